import { type ErrorCode, sanitizeMessage } from '../errors.ts'
import { deriveRequestMetrics, requestMetricFields } from '../metrics/request-metrics.ts'
import { quantizeGap } from '../schema/itl-packed.ts'
import type { CompletionTokenSource, RequestRecord } from '../schema/run.ts'
import { NO_REQUEST_CHECKS } from './common.ts'
import type { NumpySummary } from './summary-metrics.ts'

/*
 * Shared machinery for the result files of vLLM's `vllm bench serve` and SGLang's
 * `bench_serving`: SGLang's script is adapted from vLLM's `benchmark_serving.py`, so both
 * keep the same per-request lists (seconds, one entry per request, `""` error for success)
 * and the same numpy summaries (population std, linearly interpolated percentiles).
 */

/**
 * Collects `mean_<m>_ms`, `median_<m>_ms`, `std_<m>_ms`, `max_<m>_ms` and every
 * `p<NN>_<m>_ms` (e.g. `p99_ttft_ms`, `p99.9_ttft_ms`) for each spelling of a metric stem.
 * Null when the file holds none of them.
 */
export function readNumpySummary(value: Record<string, unknown>, stems: readonly string[]): NumpySummary | null {
  const finiteNumberAt = (key: string): number | null => {
    const v = value[key]
    return typeof v === 'number' && Number.isFinite(v) ? v : null
  }
  let found = false
  const summary = { mean: null as number | null, median: null as number | null, std: null as number | null, max: null as number | null }
  const percentiles = new Map<number, number>()
  for (const stem of stems) {
    for (const stat of ['mean', 'median', 'std', 'max'] as const) {
      const v = finiteNumberAt(`${stat}_${stem}_ms`)
      if (v !== null && summary[stat] === null) {
        summary[stat] = v
        found = true
      }
    }
    const pattern = new RegExp(`^p(\\d+(?:\\.\\d+)?)_${stem}_ms$`)
    for (const key of Object.keys(value)) {
      const m = pattern.exec(key)
      const v = finiteNumberAt(key)
      if (m === null || v === null) continue
      const p = Number(m[1])
      if (p >= 0 && p <= 100 && !percentiles.has(p)) {
        percentiles.set(p, v)
        found = true
      }
    }
  }
  return found ? { ...summary, percentiles } : null
}

const HTTP_REASONS: ReadonlyArray<[string, number]> = [
  ['Bad Request', 400],
  ['Unauthorized', 401],
  ['Forbidden', 403],
  ['Not Found', 404],
  ['Method Not Allowed', 405],
  ['Request Timeout', 408],
  ['Payload Too Large', 413],
  ['Request Entity Too Large', 413],
  ['Unprocessable Entity', 422],
  ['Too Many Requests', 429],
  ['Internal Server Error', 500],
  ['Bad Gateway', 502],
  ['Service Unavailable', 503],
  ['Gateway Timeout', 504],
]

/**
 * Classifies a failed request's `errors[i]` string. The tools store either the HTTP reason
 * phrase (`response.reason`, SGLang appends `": " + body`), a full Python traceback, or
 * vLLM's "Never received a valid chunk…" line. A traceback is reduced to its last line.
 */
export function classifyError(raw: string): { code: ErrorCode; message: string; httpStatus: number | null } {
  const text = raw.trim()
  const lines = text.split(/\r?\n/).filter((l) => l.trim() !== '')
  const traceback = /^Traceback \(most recent call last\)/.test(text)
  const last = (lines[lines.length - 1] ?? text).trim()
  const message = sanitizeMessage(traceback ? last : text)
  if (/Never received a valid chunk/i.test(text)) return { code: 'EMPTY_COMPLETION', message, httpStatus: null }
  if (traceback) {
    if (/TimeoutError|ServerTimeoutError/.test(last)) return { code: 'REQUEST_DEADLINE', message, httpStatus: null }
    if (/ClientConnectorError|ConnectionRefusedError|Cannot connect to host/.test(last))
      return { code: 'CONNECT_FAILED', message, httpStatus: null }
    if (
      /ServerDisconnectedError|ClientPayloadError|ConnectionResetError|TransferEncodingError|ContentLengthError|Connection closed/.test(
        last,
      )
    ) {
      return { code: 'STREAM_DROPPED', message, httpStatus: null }
    }
    if (/JSONDecodeError/.test(last)) return { code: 'STREAM_PROTOCOL', message, httpStatus: null }
    return { code: 'INTERNAL', message, httpStatus: null }
  }
  for (const [reason, status] of HTTP_REASONS) {
    if (text === reason || text.startsWith(`${reason}:`)) {
      return { code: status === 429 ? 'HTTP_RATE_LIMITED' : 'HTTP_STATUS', message, httpStatus: status }
    }
  }
  return { code: 'INTERNAL', message, httpStatus: null }
}

/** The per-request lists a detailed results file holds, one entry per request. */
export interface PerRequestLists {
  inputLens: readonly number[]
  outputLens: readonly number[]
  /** Seconds; 0 when no first chunk arrived (or the backend did not stream). */
  ttftsS: readonly number[]
  /** Seconds; gaps after the first chunk. */
  itlsS: ReadonlyArray<readonly number[]>
  /** `""` for a successful request. */
  errors: readonly string[]
  /** Seconds from send to the last token chunk (vLLM ≥ the version that writes `latencies`). */
  latenciesS: readonly number[] | null
  /** Seconds the request waited for the client's concurrency semaphore (vLLM `queue_times`). */
  queueTimesS: readonly number[] | null
  /** `time.perf_counter()` at each send, seconds (vLLM `start_times`). */
  startTimesS: readonly number[] | null
}

/** The message of a request the source counted successful although it produced nothing. */
const EMPTY_SUCCESS_NOTE = 'counted successful by the source but empty'

/** Requests {@link buildRequests} failed as empty although the source counted them successful. */
export function countEmptySuccesses(records: readonly RequestRecord[]): number {
  return records.filter((r) => r.status === 'failed' && r.error.message.startsWith(EMPTY_SUCCESS_NOTE)).length
}

/**
 * Builds one request record per entry, seconds → ms. A "successful" entry with no output at
 * all (empty error, 0 output tokens, no chunk, ttft 0.0) becomes an `EMPTY_COMPLETION` failure,
 * as servegate's own client would record it. A request failed when its error string
 * is non-empty; a 0 ttft is the tools' "never measured" default and becomes null. e2e is the
 * source's own latency when recorded, else ttft + Σ itl (the last token chunk) for an ok
 * request and null for a failed one.
 */
export function buildRequests(lists: PerRequestLists, tokenSource: CompletionTokenSource): RequestRecord[] {
  const firstStart = lists.startTimesS === null || lists.startTimesS.length === 0 ? null : Math.min(...lists.startTimesS)
  return lists.ttftsS.map((ttftS, index) => {
    const itlS = lists.itlsS[index] ?? []
    const error = lists.errors[index] ?? ''
    const latencyS = lists.latenciesS?.[index] ?? null
    const hasTtft = ttftS > 0
    const outputLen = lists.outputLens[index] ?? null
    // "Successful" with no output at all (0 tokens, no chunk, ttft 0.0): servegate fails an empty completion.
    const empty = error.trim() === '' && outputLen === 0 && itlS.length === 0 && !hasTtft
    const failed = error.trim() !== '' || empty
    // A failed stream's last chunk is not its end: without the source's latency its e2e is unknown.
    const e2eS = latencyS !== null && latencyS > 0 ? latencyS : hasTtft && !failed ? ttftS + itlS.reduce((a, b) => a + b, 0) : null
    const ttftMs = hasTtft ? ttftS * 1000 : null
    const m = deriveRequestMetrics({
      sentAt: 0,
      firstOutputAt: ttftMs,
      firstContentAt: ttftMs,
      endAt: e2eS === null ? null : e2eS * 1000,
      outputChunkAt: [],
      usagePromptTokens: lists.inputLens[index] ?? null,
      usageCompletionTokens: failed ? null : outputLen,
    })
    const queueS = lists.queueTimesS?.[index] ?? null
    const startS = lists.startTimesS?.[index] ?? null
    const common = {
      index,
      queueDelayMs: queueS === null ? null : Math.max(0, queueS * 1000),
      sendLagMs: null,
      startOffsetMs: startS === null || firstStart === null ? null : (startS - firstStart) * 1000,
      ...requestMetricFields(m),
      completionTokenSource: m.completionTokens === null ? null : tokenSource,
      reasoningChunks: null,
      contentChunks: null,
      itlMs: itlS.length > 0 || !failed ? itlS.map((s) => quantizeGap(s * 1000)) : null,
      finishReason: null,
      ...NO_REQUEST_CHECKS,
    }
    if (!failed) return { status: 'ok', ...common }
    if (empty) {
      const message = `${EMPTY_SUCCESS_NOTE}: no error string, 0 output tokens, no chunk and ttft 0.0`
      return { status: 'failed', error: { code: 'EMPTY_COMPLETION', message, httpStatus: null, retryAfterS: null }, ...common }
    }
    const { code, message, httpStatus } = classifyError(error)
    return { status: 'failed', error: { code, message, httpStatus, retryAfterS: null }, ...common }
  })
}

/** Describes the arrival process the tools record (`request_rate`, `max_concurrency`, vLLM's `burstiness`). */
export function describeTraffic(requestRate: unknown, maxConcurrency: number | null | undefined, burstiness?: number | null): string {
  const rate =
    requestRate === 'inf' || requestRate === 'Infinity' || requestRate === null || requestRate === undefined
      ? 'every request released at once (request_rate inf)'
      : requestRate === 'trace'
        ? 'arrivals replayed from trace timestamps'
        : `open-loop arrivals at ${String(requestRate)} req/s ` +
          `(${burstiness !== undefined && burstiness !== null && burstiness !== 1 ? `gamma, burstiness ${burstiness}` : 'Poisson'})`
  const limit =
    maxConcurrency === null || maxConcurrency === undefined
      ? 'no client concurrency limit, so plan.concurrency is the request count (an upper bound)'
      : `at most ${maxConcurrency} in flight (max_concurrency)`
  return `${rate}; ${limit}`
}
