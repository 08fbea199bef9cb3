import { z } from 'zod'
import { ServegateError } from '../errors.ts'
import { parseBaseUrl, trustCaFile } from '../loopback.ts'
import { ArrivalSpec } from '../load/arrival-spec.ts'
import { SLO } from '../schema/load.ts'
import { Api, UsageCheck } from '../schema/run.ts'
import { MIN_SECRET_CHARS, registerSecret } from '../secrets.ts'
import { lengthOption, MIN_MAX_TOKENS } from '../workload/lengths.ts'
import { WorkloadSpec } from '../workload/workload-spec.ts'
import { CancelSpec } from '../workload/cancel-plan.ts'
import { MAX_CLIENT_WORKERS } from './client-workers.ts'

/**
 * What one cell measures, wherever it is sent: closed loop (at `concurrency`) or open loop (at
 * `arrival`). Strict: a key it does not know (a typo) is an error, not silently dropped.
 * Defaults are filled here, once.
 */
export const CellPlan = z.strictObject({
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
  slo: SLO.nullable().default(null),
  /** Measured requests. @default 32 */
  requests: z.int().min(1).default(32),
  /** Requests run first and not recorded (warm caches, connections, JIT). @default 0 */
  warmupRequests: z.int().min(0).default(0),
  /**
   * `max_tokens` of every request: one size, or a distribution each request draws its own from
   * (seeded by `workload.seed`, the same on both arms; held exactly under output control).
   * @default 128
   * @example { uniform: [64, 256] }
   */
  maxTokens: lengthOption(MIN_MAX_TOKENS).default(128),
  /** What the requests contain: kind, planned prompt tokens, seed, canaries, prefix cache, output control, sampling. */
  workload: WorkloadSpec.default(WorkloadSpec.parse({})),
  /** Size prompts with the engine's own tokenizer when it has one. @default true */
  calibrate: z.boolean().default(true),
  /** How each reply's `usage` is cross-checked against what streamed. @default { maxTokensPerChunk: 16, retokenize: true } */
  usageCheck: UsageCheck.default(UsageCheck.parse({})),
  /** Per-request deadline, ms. @default 120000 */
  requestTimeoutMs: z.int().min(1).default(120_000),
  /**
   * Abort a seeded share of the measured requests `afterMs` after each was sent, the same requests
   * on both arms: they are recorded as `cancelled` (neither ok nor failed, in no distribution), and
   * after the cell the engine must go back to idle (running and waiting requests at 0, KV usage at
   * its pre-cell level) or the cell fails. Null: none is cancelled. @default null
   * @example { share: 0.2, afterMs: 300 }
   */
  cancel: CancelSpec.nullable().default(null),
  /**
   * Sent as `Authorization: Bearer …`; never recorded: from the moment the options are resolved it
   * is scrubbed (raw, URL-encoded, base64) from everything servegate writes. At least 4 characters.
   */
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
  /**
   * Worker threads the client streams on, each with its own connections; 0 streams in the cell's
   * own thread. `'auto'`: one per 32 streams, up to the cores free beyond the engine's share less
   * one (the cell's thread), at most 16; 0 where one core or none is free. @default 'auto'
   */
  clientWorkers: z.union([z.literal('auto'), z.int().min(0).max(MAX_CLIENT_WORKERS)]).default('auto'),
})
/** A cell's plan as declared (on an engine servegate launches: no URL, no model name). */
export type CellPlan = z.input<typeof CellPlan>
/** A cell's plan with every default filled: what the runner takes. */
export type ResolvedCellPlan = z.infer<typeof CellPlan>

/** Options of one cell sent to an endpoint: the plan, where to send it and the model name. */
export const RunCellOptions = CellPlan.extend({
  /** Server root or `/v1` prefix of an OpenAI-compatible endpoint; loopback unless `remote`. */
  baseUrl: z.string(),
  /** Model name sent in every request. */
  model: z.string().min(1),
  /**
   * True allows a `baseUrl` on another host (`--remote`): a remote endpoint is only ever named on
   * purpose. Loopback needs nothing. @default false
   */
  remote: z.boolean().default(false),
  /** A PEM file of the CA an `https://` endpoint's certificate is verified against (`--ca-file`); unset: the system's CAs. */
  caFile: z.string().min(1).optional(),
})
export type RunCellOptions = z.input<typeof RunCellOptions>
export type ResolvedRunCellOptions = z.infer<typeof RunCellOptions>

/**
 * The closest of `known` to a mistyped key (edit distance, case aside), when it is close enough to
 * be what was meant: what a cell option's and a CLI flag's "did you mean" name.
 * @example closest('concurency', ['concurrency', 'requests']) // 'concurrency'
 */
export function closest(key: string, known: readonly string[]): string | null {
  const distance = (a: string, b: string): number => {
    const row = Array.from({ length: b.length + 1 }, (_, j) => j)
    for (let i = 1; i <= a.length; i++) {
      let diagonal = row[0] as number
      row[0] = i
      for (let j = 1; j <= b.length; j++) {
        const above = row[j] as number
        row[j] = Math.min(above + 1, (row[j - 1] as number) + 1, diagonal + (a[i - 1]?.toLowerCase() === b[j - 1]?.toLowerCase() ? 0 : 1))
        diagonal = above
      }
    }
    return row[b.length] as number
  }
  let best: { key: string; d: number } | null = null
  for (const k of known) {
    const d = distance(key, k)
    if (best === null || d < best.d) best = { key: k, d }
  }
  return best !== null && best.d <= Math.max(2, Math.floor(key.length / 3)) ? best.key : null
}

/**
 * One line per problem, each naming the field: `where.field: what is wrong`, and for an unknown
 * key the known key it most likely meant.
 */
function describeIssues(error: z.ZodError, where: string, known: readonly string[] = []): string {
  return error.issues
    .flatMap((issue) => {
      const at = (path: readonly PropertyKey[]): string => [where, ...path.map(String)].join('.')
      if (issue.code === 'unrecognized_keys') {
        return issue.keys.map((key) => {
          const meant = issue.path.length === 0 ? closest(key, known) : null
          const fix = meant === null ? 'remove it' : `did you mean \`${meant}\`?`
          return `${at([...issue.path, key])}: not an option of a cell; ${fix}`
        })
      }
      return [`${at(issue.path)}: ${issue.message}`]
    })
    .join('; ')
}

/**
 * Validates a cell's plan and fills its defaults; the error names each bad field and the fix.
 * `where` names the declaration in the message (e.g. `pair "tiny-c4"`).
 * @throws ServegateError CONFIG_INVALID
 */
export function resolveCellPlan(input: unknown, where = 'cell'): ResolvedCellPlan {
  const result = CellPlan.safeParse(withGroupRequests(withConversationRequests(input, where), where))
  if (!result.success) {
    throw new ServegateError(
      'CONFIG_INVALID',
      `invalid ${where} options: ${describeIssues(result.error, where, Object.keys(CellPlan.shape))}`,
    )
  }
  checkDrawnSizes(result.data, where)
  registerApiKey(result.data.apiKey, where)
  return result.data
}

/**
 * A conversation's request count is its sessions × turns: filled in when the cell does not say,
 * refused when it says otherwise; a conversation is sent closed loop, as chat.
 * @throws ServegateError CONFIG_INVALID naming the fix
 */
function withConversationRequests(input: unknown, where: string): unknown {
  if (input === null || typeof input !== 'object') return input
  const cell = input as {
    requests?: unknown
    arrival?: unknown
    api?: unknown
    workload?: { kind?: unknown; sessions?: unknown; turns?: unknown }
  }
  const w = cell.workload
  if (w?.kind !== 'conversation' || typeof w.sessions !== 'number' || typeof w.turns !== 'number') return input
  const expected = w.sessions * w.turns
  const invalid = (message: string): ServegateError => new ServegateError('CONFIG_INVALID', `invalid ${where} options: ${message}`)
  if (cell.requests !== undefined && cell.requests !== expected) {
    throw invalid(
      `requests: a conversation sends sessions × turns = ${expected} requests, not ${String(cell.requests)}; remove requests or set it to ${expected}`,
    )
  }
  if (cell.arrival !== undefined && cell.arrival !== null) {
    throw invalid('arrival: a conversation is sent closed loop, its sessions under concurrency; remove arrival')
  }
  if (cell.api !== undefined && cell.api !== 'chat') throw invalid("api: a conversation is sent as chat messages; use api: 'chat'")
  return { ...cell, requests: expected }
}

/**
 * A shared-prefix workload with groups sends `groups × promptsPerGroup` requests (as SGLang's
 * generated-shared-prefix): filled in when the cell does not say, refused when it says otherwise.
 * @throws ServegateError CONFIG_INVALID naming the fix
 */
function withGroupRequests(input: unknown, where: string): unknown {
  if (input === null || typeof input !== 'object') return input
  const cell = input as { requests?: unknown; workload?: { kind?: unknown; groups?: unknown; promptsPerGroup?: unknown } }
  const w = cell.workload
  if (w?.kind !== 'shared-prefix' || typeof w.groups !== 'number' || typeof w.promptsPerGroup !== 'number') return input
  const expected = w.groups * w.promptsPerGroup
  if (cell.requests !== undefined && cell.requests !== expected) {
    throw new ServegateError(
      'CONFIG_INVALID',
      `invalid ${where} options: requests: shared-prefix groups send groups × promptsPerGroup = ${expected} requests, ` +
        `not ${String(cell.requests)}; remove requests or set it to ${expected}`,
    )
  }
  return { ...cell, requests: expected }
}

/**
 * Drawn sizes where each request's size can be drawn: not under a trace (it sizes every request
 * itself), and `maxTokens` not in a conversation (its turns share one).
 * @throws ServegateError CONFIG_INVALID naming the field and the fix
 */
function checkDrawnSizes(plan: ResolvedCellPlan, where: string): void {
  const invalid = (message: string): ServegateError => new ServegateError('CONFIG_INVALID', `invalid ${where} options: ${message}`)
  const drawnPrompt = typeof plan.workload.promptTokens !== 'number'
  const drawnMax = typeof plan.maxTokens !== 'number'
  if (plan.arrival?.kind === 'trace' && (drawnPrompt || drawnMax)) {
    const field = drawnPrompt ? 'workload.promptTokens' : 'maxTokens'
    throw invalid(`${field}: a trace sets each request's sizes itself; pass one number or remove the trace arrival`)
  }
  if (drawnMax && plan.workload.kind === 'conversation') {
    throw invalid("maxTokens: a conversation's turns share one max_tokens; pass one number")
  }
}

/** Registers a cell's API key as a secret, so every writer scrubs it; refuses one too short to scrub. */
function registerApiKey(apiKey: string | undefined, where: string): void {
  if (apiKey !== undefined && registerSecret(apiKey) === 'too-short') {
    throw new ServegateError(
      'CONFIG_INVALID',
      `invalid ${where} options: apiKey (or the variable --api-key-env names) has ${apiKey.length} characters, fewer than ` +
        `the ${MIN_SECRET_CHARS} servegate can scrub from its output without mangling it; use a longer key`,
    )
  }
}

/** Validates cell options sent to an endpoint; the error names each bad field and what to pass instead. */
export function resolveCellOptions(input: RunCellOptions): ResolvedRunCellOptions {
  const result = RunCellOptions.safeParse(withGroupRequests(withConversationRequests(input, 'cell'), 'cell'))
  if (!result.success) {
    throw new ServegateError('CONFIG_INVALID', `invalid cell options: ${z.prettifyError(result.error).replace(/\n/g, '; ')}`)
  }
  checkDrawnSizes(result.data, 'cell')
  trustCaFile(parseBaseUrl(result.data.baseUrl, result.data.remote).origin, result.data.caFile, 'caFile')
  registerApiKey(result.data.apiKey, 'cell')
  return result.data
}
