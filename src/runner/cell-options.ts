import { z } from 'zod'
import { ServegateError } from '../errors.ts'
import { parseBaseUrl } from '../loopback.ts'
import { ArrivalSpec } from '../load/arrival-spec.ts'
import { Slo } from '../schema/load.ts'
import { Api } from '../schema/run.ts'
import { WorkloadSpec } from '../workload/workload-spec.ts'

/** Options of one cell, closed loop (at `concurrency`) or open loop (at `arrival`). Defaults are filled here, once. */
export const CellOptions = z.object({
  /** Server root or `/v1` prefix of an OpenAI-compatible endpoint on loopback. */
  baseUrl: z.string(),
  /** Model name sent in every request. */
  model: z.string().min(1),
  /** @default 'chat' */
  api: Api.default('chat'),
  /** Closed loop: requests in flight at once; when one ends, the next starts. Unused with `arrival`. @default 1 */
  concurrency: z.int().min(1).max(4096).default(1),
  /**
   * Open-loop arrivals: requests are sent at scheduled times (a rate process or a replayed
   * trace) whatever the engine does. Null: the closed loop at `concurrency`. @default null
   * @example { kind: 'poisson', ratePerS: 8, seed: 1 }
   */
  arrival: ArrivalSpec.nullable().default(null),
  /** Latency objectives: the record then carries the cell's goodput. @default null @example { ttftMs: 500, tpotMs: 50 } */
  slo: Slo.nullable().default(null),
  /** Measured requests. @default 32 */
  requests: z.int().min(1).default(32),
  /** Requests run first and not recorded (warm caches, connections, JIT). @default 0 */
  warmupRequests: z.int().min(0).default(0),
  /** `max_tokens` of every request. @default 128 */
  maxTokens: z.int().min(1).default(128),
  /** What the requests contain: kind, planned prompt tokens, seed, canaries, prefix cache, output control, sampling. */
  workload: WorkloadSpec.default(WorkloadSpec.parse({})),
  /** Size prompts with the engine's own tokenizer when it has one. @default true */
  calibrate: z.boolean().default(true),
  /** Per-request deadline, ms. @default 120000 */
  requestTimeoutMs: z.int().min(1).default(120_000),
  /** Sent as `Authorization: Bearer …`; never recorded. */
  apiKey: z.string().optional(),
  /**
   * A cell whose p99 send lag (closed loop: a free slot to the send; open loop: the scheduled
   * time to the send) exceeds this is flagged harness-limited, ms. @default 5
   */
  sendLagLimitMs: z.number().positive().default(5),
  /** A cell whose client CPU share (1 = one core) reaches this is flagged harness-limited. @default 0.9 */
  cpuShareLimit: z.number().positive().default(0.9),
  /** A cell whose event-loop delay p99 exceeds this is flagged harness-limited, ms. @default 10 */
  eventLoopDelayLimitMs: z.number().positive().default(10),
})
export type CellOptions = z.input<typeof CellOptions>
export type ResolvedCellOptions = z.infer<typeof CellOptions>

/** Validates cell options; the error names each bad field and what to pass instead. */
export function resolveCellOptions(input: CellOptions): ResolvedCellOptions {
  const result = CellOptions.safeParse(input)
  if (!result.success) {
    throw new ServegateError('CONFIG_INVALID', `invalid cell options: ${z.prettifyError(result.error).replace(/\n/g, '; ')}`)
  }
  parseBaseUrl(result.data.baseUrl)
  return result.data
}
