import { z } from 'zod'
import { ServegateError } from '../errors.ts'
import { Api } from '../schema/run.ts'
import { WorkloadSpec } from '../workload/spec.ts'

const LOOPBACK_HOSTS = new Set(['localhost', '[::1]', '::1'])

/** True for 127.0.0.0/8, ::1 and localhost: the only hosts servegate sends load to. */
export function isLoopbackHost(hostname: string): boolean {
  return LOOPBACK_HOSTS.has(hostname) || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(hostname)
}

/** Parses a base URL (`http://127.0.0.1:8000` or `…/v1`) into its origin; loopback only. */
export function parseBaseUrl(raw: string): { origin: string; display: string } {
  let url: URL
  try {
    url = new URL(raw)
  } catch {
    throw new ServegateError('CONFIG_INVALID', `baseUrl: "${raw}" is not a URL; pass e.g. http://127.0.0.1:8000`)
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new ServegateError('CONFIG_INVALID', `baseUrl: protocol ${url.protocol} is not supported; use http:// or https://`)
  }
  if (!isLoopbackHost(url.hostname)) {
    throw new ServegateError('CONFIG_INVALID', `baseUrl: ${url.hostname} is not a loopback address; servegate only targets engines on this host (127.0.0.1, ::1, localhost): run it on the engine's machine`)
  }
  const path = url.pathname.replace(/\/+$/, '')
  if (path !== '' && path !== '/v1') {
    throw new ServegateError('CONFIG_INVALID', `baseUrl: path ${url.pathname} is not supported; pass the server root or its /v1 prefix`)
  }
  return { origin: url.origin, display: url.origin }
}

/** Options of one closed-loop cell. Defaults are filled here, once. */
export const CellOptions = z.object({
  /** Server root or `/v1` prefix of an OpenAI-compatible endpoint on loopback. */
  baseUrl: z.string(),
  /** Model name sent in every request. */
  model: z.string().min(1),
  /** @default 'chat' */
  api: Api.default('chat'),
  /** Requests in flight at once; when one ends, the next starts. @default 1 */
  concurrency: z.int().min(1).max(4096).default(1),
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
  /** A cell whose p99 send lag exceeds this is flagged harness-limited, ms. @default 5 */
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
