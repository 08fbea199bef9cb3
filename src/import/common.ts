import { type ErrorCode, sanitizeMessage } from '../errors.ts'
import { deriveRequestMetrics, requestMetricFields } from '../metrics/request-metrics.ts'
import { quantizeGaps } from '../schema/itl-packed.ts'
import type { CompletionTokenSource, RequestRecord } from '../schema/run.ts'

/**
 * The per-request checks another harness did not record: absent, never invented. (And the packed
 * gaps, which only a record file holds: null in memory.)
 */
export const NO_REQUEST_CHECKS = {
  plannedPromptTokens: null,
  wireSha256: null,
  canary: null,
  outputAdherence: null,
  score: null,
  outputText: null,
  engineTimings: null,
  enginePrefillTokPerS: null,
  cachedPromptTokens: null,
  sendAttempts: 1,
  scheduledOffsetMs: null,
  usageRule: null,
  retokenizedTokens: null,
  session: null,
  turn: null,
  group: null,
  reportedUsage: null,
  itlPacked: null,
} as const

/** What another harness recorded about one request, in servegate units (ms, tokens). */
export interface RequestTimes {
  index: number
  ttftMs: number | null
  e2eMs: number | null
  promptTokens: number | null
  completionTokens: number | null
  /** Gaps after the first chunk, ms (quantized to whole µs in the record); null when the source kept none. */
  itlMs: number[] | null
  startOffsetMs: number | null
  tokenSource: CompletionTokenSource
  /** Null for a request the source counted successful. */
  error: { code: ErrorCode; message: string; httpStatus: number | null } | null
}

/** One servegate request record from a request's times; tpot, decode and prefill are derived as servegate derives its own. */
export function requestFromTimes(t: RequestTimes): RequestRecord {
  const failed = t.error !== null
  const m = deriveRequestMetrics({
    sentAt: 0,
    firstOutputAt: t.ttftMs,
    firstContentAt: t.ttftMs,
    endAt: t.e2eMs,
    outputChunkAt: [],
    usagePromptTokens: t.promptTokens,
    usageCompletionTokens: failed ? null : t.completionTokens,
  })
  const common = {
    index: t.index,
    queueDelayMs: null,
    sendLagMs: null,
    startOffsetMs: t.startOffsetMs,
    ...requestMetricFields(m),
    completionTokenSource: m.completionTokens === null ? null : t.tokenSource,
    reasoningChunks: null,
    contentChunks: null,
    itlMs: quantizeGaps(t.itlMs),
    finishReason: null,
    ...NO_REQUEST_CHECKS,
  }
  if (t.error === null) return { status: 'ok', ...common }
  return {
    status: 'failed',
    error: { code: t.error.code, message: sanitizeMessage(t.error.message), httpStatus: t.error.httpStatus, retryAfterS: null },
    ...common,
  }
}

/** A time in the unit a source names (`ns`, `us`, `ms`, `s`, `sec`) in ms; null for an unknown unit. */
export function toMs(value: number, unit: string): number | null {
  const factor: Record<string, number> = { ns: 1e-6, us: 1e-3, µs: 1e-3, ms: 1, s: 1000, sec: 1000, seconds: 1000 }
  const f = factor[unit.trim().toLowerCase()]
  return f === undefined ? null : value * f
}

/** An HTTP status from a source's error code, when it is one (100–599); null otherwise (e.g. llmperf's −1). */
export function httpStatusOf(code: unknown): number | null {
  const n = typeof code === 'number' ? code : typeof code === 'string' ? Number(code) : Number.NaN
  return Number.isInteger(n) && n >= 100 && n <= 599 ? n : null
}

/** The stable code for a failed request from its HTTP status (or none). */
export function codeOfStatus(status: number | null): ErrorCode {
  if (status === 429) return 'HTTP_RATE_LIMITED'
  if (status === 408 || status === 504) return 'REQUEST_DEADLINE'
  if (status === 499) return 'REQUEST_ABORTED'
  return status === null ? 'INTERNAL' : 'HTTP_STATUS'
}

/** The top-level keys of a parsed file, for "--from auto" errors: `{ a, b, c, … 12 more }`. */
export function describeKeys(value: unknown): string {
  if (Array.isArray(value)) {
    const first = value[0]
    return `a JSON array of ${value.length} item(s)${first !== null && typeof first === 'object' && !Array.isArray(first) ? ` whose first has keys ${describeKeys(first)}` : ''}`
  }
  if (value === null || typeof value !== 'object') return `${value === null ? 'null' : typeof value}, not an object`
  const keys = Object.keys(value)
  const shown = keys.slice(0, 12).join(', ')
  return keys.length === 0 ? '{} (no keys)' : `{ ${shown}${keys.length > 12 ? `, … ${keys.length - 12} more` : ''} }`
}
