import type { z } from 'zod'
import { type ErrorCode, ServegateError, sanitizeMessage } from '../errors.ts'
import { computeCellMetrics, countFailures } from '../metrics/cell-metrics.ts'
import { METHODOLOGY } from '../metrics/methodology.ts'
import { deriveRequestMetrics, requestMetricFields } from '../metrics/request-metrics.ts'
import {
  type Api,
  type CellMetrics,
  type CompletionTokenSource,
  type Distribution,
  PERCENTILE_METHOD,
  P99_MIN_SAMPLES,
  REQUEST_METRIC_NAMES,
  RUN_SCHEMA_ID,
  type RequestRecord,
  type RunRecord,
  type WorkloadPlan,
} from '../schema/run.ts'
import { SERVEGATE_VERSION } from '../version.ts'
import { importedWorkload, NO_REQUEST_CHECKS } from './common.ts'

/*
 * Shared machinery for the result files of vLLM's `vllm bench serve` and SGLang's
 * `bench_serving`: SGLang's script is adapted from vLLM's `benchmark_serving.py`, so both
 * keep the same per-request lists (seconds, one entry per request, `""` error for success)
 * and the same numpy summaries (population std, linearly interpolated percentiles).
 */

/** Options of an import from a results file. */
export interface BenchImportOptions {
  /** The file (or label) named in errors. */
  source: string
  /** The line the run came from, when the file held several (JSON Lines). */
  line?: number | undefined
  /** Model name to record when the file names none. */
  model?: string | undefined
}

/** Names the file, and the line when the run came from a JSON Lines file, for messages. */
export function describeSource(options: BenchImportOptions): string {
  return options.line === undefined ? options.source : `${options.source} line ${options.line}`
}

/** One run read from a results file: the 1-based line it came from and its parsed value. */
export interface BenchmarkLine {
  line: number
  value: unknown
}

/**
 * Python's `json.dumps` writes `NaN`, `Infinity` and `-Infinity` (SGLang's default
 * `request_rate` is `inf`; an all-failed run has a `NaN` mean). Outside strings they become
 * `null` and the strings `"Infinity"` / `"-Infinity"`, so `JSON.parse` can read the text.
 */
export function normalizePythonJson(text: string): string {
  let out = ''
  let i = 0
  let inString = false
  while (i < text.length) {
    const c = text[i] as string
    if (inString) {
      out += c
      if (c === '\\') {
        out += text[i + 1] ?? ''
        i += 2
        continue
      }
      if (c === '"') inString = false
      i++
      continue
    }
    if (c === '"') {
      inString = true
      out += c
      i++
      continue
    }
    if (text.startsWith('NaN', i)) {
      out += 'null'
      i += 3
    } else if (text.startsWith('-Infinity', i)) {
      out += '"-Infinity"'
      i += 9
    } else if (text.startsWith('Infinity', i)) {
      out += '"Infinity"'
      i += 8
    } else {
      out += c
      i++
    }
  }
  return out
}

/**
 * Reads a results file as one JSON document (a `--save-result` file, pretty-printed or not)
 * or as JSON Lines (SGLang's `--output-file`, vLLM's `--append-result`): one run per line.
 * A line that is not JSON throws naming its line number.
 */
export function parseBenchmarkLines(text: string, source: string, fix: string): BenchmarkLine[] {
  try {
    return [{ line: 1, value: JSON.parse(text) as unknown }]
  } catch {
    // Python's NaN/Infinity, or several documents: normalize, then read as JSON Lines below.
  }
  const normalized = normalizePythonJson(text)
  try {
    return [{ line: 1, value: JSON.parse(normalized) as unknown }]
  } catch {
    // Not one document: read it as JSON Lines below.
  }
  const lines = normalized.split(/\r?\n/)
  const runs: BenchmarkLine[] = []
  let firstNonEmpty = true
  for (const [i, raw] of lines.entries()) {
    if (raw.trim() === '') continue
    try {
      runs.push({ line: i + 1, value: JSON.parse(raw) as unknown })
    } catch (err) {
      const why = (err as Error).message
      const where = firstNonEmpty ? `${source} is not JSON` : `${source}: line ${i + 1} is not JSON`
      throw new ServegateError('FILE_INVALID', `${where} (${why}); ${fix}`, { cause: err })
    }
    firstNonEmpty = false
  }
  if (runs.length === 0) throw new ServegateError('FILE_INVALID', `${source} is empty; ${fix}`)
  return runs
}

/** Picks the run on a 1-based line (default: the last run, the most recent append). */
export function pickLine(runs: readonly BenchmarkLine[], source: string, line: number | undefined): BenchmarkLine {
  if (line === undefined) return runs[runs.length - 1] as BenchmarkLine
  const found = runs.find((r) => r.line === line)
  if (found !== undefined) return found
  const lines = runs.map((r) => r.line)
  const which = runs.length === 1 ? `it holds one run, on line ${lines[0]}` : `its runs are on lines ${lines.join(', ')}`
  throw new ServegateError('CONFIG_INVALID', `--line ${line}: ${source} has no run on that line (${which}); pass one of those line numbers`)
}

function at(value: unknown, path: readonly PropertyKey[]): unknown {
  let v = value
  for (const key of path) {
    if (v === null || typeof v !== 'object') return undefined
    v = (v as Record<PropertyKey, unknown>)[key]
  }
  return v
}

function fieldName(path: readonly PropertyKey[]): string {
  let out = ''
  for (const key of path) out += typeof key === 'number' ? `[${key}]` : out === '' ? String(key) : `.${String(key)}`
  return out
}

function describeValue(v: unknown): string {
  if (v === null) return 'null'
  if (Array.isArray(v)) return 'an array'
  if (typeof v === 'string') return `the string ${JSON.stringify(v.length > 40 ? `${v.slice(0, 39)}…` : v)}`
  if (typeof v === 'object') return 'an object'
  return `${typeof v} ${String(v)}`
}

/** Turns the first zod issue into one line: the field, what is wrong with it, the fix. */
export function invalidFieldError(error: z.ZodError, value: unknown, source: string, fix: string): ServegateError {
  const issue = error.issues[0]
  if (issue === undefined) return new ServegateError('FILE_INVALID', `${source}: not valid; ${fix}`)
  const name = fieldName(issue.path)
  const actual = at(value, issue.path)
  let what: string
  if (issue.path.length === 0) what = `is ${describeValue(value)}, not a JSON object`
  else if (actual === undefined) what = `field "${name}" is missing`
  else if (issue.code === 'invalid_type') what = `field "${name}" is ${describeValue(actual)}; expected ${issue.expected}`
  else what = `field "${name}" is ${describeValue(actual)}: ${issue.message}`
  return new ServegateError('FILE_INVALID', `${source}: ${what}; ${fix}`)
}

/** A numpy summary of one metric as a results file records it (ms, population std). */
export interface NumpySummary {
  mean: number | null
  median: number | null
  /** numpy `std` (ddof 0). */
  std: number | null
  /** Keyed by percentile (0–100), numpy linear interpolation. */
  percentiles: ReadonlyMap<number, number>
  max: number | null
}

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

const EMPTY: Distribution = {
  samples: 0,
  mean: null,
  stddev: null,
  ci95Low: null,
  ci95High: null,
  min: null,
  p25: null,
  p50: null,
  p75: null,
  p90: null,
  p95: null,
  p99: null,
  max: null,
}

/** How a source computed its standard deviation: numpy's `std` (ddof 0) or pandas' `std` (ddof 1). */
export type StdKind = 'population' | 'sample'

/**
 * A distribution holding only what the source summarized. A population std becomes the
 * sample std (× √(n/(n−1)), n = `samples`); a sample std is kept; the median is p50; p0 and
 * p100 are min and max. The 95% interval stays null: servegate does not rebuild statistics
 * the source did not give.
 */
export function summaryDistribution(s: NumpySummary | null, samples: number, std: StdKind = 'population'): Distribution {
  if (s === null || samples <= 0) return { ...EMPTY }
  const p = (q: number): number | null => s.percentiles.get(q) ?? null
  const stddev = s.std === null || samples < 2 ? null : std === 'sample' ? s.std : s.std * Math.sqrt(samples / (samples - 1))
  return {
    samples,
    mean: s.mean,
    stddev,
    ci95Low: null,
    ci95High: null,
    min: p(0),
    p25: p(25),
    p50: s.median ?? p(50),
    p75: p(75),
    p90: p(90),
    p95: p(95),
    p99: p(99),
    max: p(100) ?? s.max,
  }
}

/** A mean known exactly from a total (e.g. total input tokens ÷ completed requests). */
export function meanOnlyDistribution(total: number | null, samples: number): Distribution {
  if (total === null || samples <= 0) return { ...EMPTY }
  return { ...EMPTY, samples, mean: total / samples }
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

/** Checks that every per-request list has one entry per request; names the first that does not. */
export function checkListLengths(lists: Record<string, readonly unknown[] | null | undefined>, source: string, fix: string): number {
  const entries = Object.entries(lists).filter((e): e is [string, readonly unknown[]] => Array.isArray(e[1]))
  const [firstName, first] = entries[0] as [string, readonly unknown[]]
  for (const [name, list] of entries) {
    if (list.length !== first.length) {
      throw new ServegateError(
        'FILE_INVALID',
        `${source}: field "${name}" has ${list.length} entries but "${firstName}" has ${first.length}; ` +
          `every per-request list holds one entry per request; ${fix}`,
      )
    }
  }
  return first.length
}

/** The message of a request the source counted successful although it produced nothing. */
export const EMPTY_SUCCESS_NOTE = 'counted successful by the source but empty'

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
      itlMs: itlS.length > 0 || !failed ? itlS.map((s) => s * 1000) : null,
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

/** The per-metric summaries of a summary-only file, keyed by servegate's names. */
export interface SummaryStats {
  ttft: NumpySummary | null
  tpot: NumpySummary | null
  itl: NumpySummary | null
  e2e: NumpySummary | null
  queueDelay: NumpySummary | null
  /** Full token-count summaries, where the source kept them (else only the exact mean from the totals). */
  promptTokens?: NumpySummary | null | undefined
  completionTokens?: NumpySummary | null | undefined
}

/**
 * The gaps an ITL summary pooled, estimated as one per output token after each request's first:
 * total output tokens − completed (exact when every chunk carries one token); the completed
 * count when the total is unknown.
 */
export function itlGapCount(totalOutputTokens: number | null, completed: number): number {
  if (totalOutputTokens === null || totalOutputTokens <= completed) return completed
  return totalOutputTokens - completed
}

/** Cell metrics of a summary-only import: the source's figures, nothing recomputed or invented. */
export function summaryMetrics(input: {
  stats: SummaryStats
  completed: number
  totalInputTokens: number | null
  totalOutputTokens: number | null
  outputThroughput: number | null
  requestThroughput: number | null
  wallClockMs: number
  tokenSource: CompletionTokenSource
  /**
   * How many gaps the ITL summary pooled; default: total output tokens − completed (one gap
   * per token after the first), else the completed count.
   */
  itlSamples?: number | null | undefined
  /** How the source computed its standard deviations. @default 'population' */
  std?: StdKind | undefined
  /** How the source computed its percentiles. @default 'linear-interpolation' (numpy, pandas) */
  percentileMethod?: CellMetrics['percentileMethod'] | undefined
}): CellMetrics {
  const n = input.completed
  const std = input.std ?? 'population'
  const itlSamples = input.itlSamples ?? itlGapCount(input.totalOutputTokens, n)
  const ttft = summaryDistribution(input.stats.ttft, n, std)
  const distributions = {
    ttftMs: ttft,
    timeToFirstOutputMs: { ...ttft },
    e2eMs: summaryDistribution(input.stats.e2e, n, std),
    generationMs: { ...EMPTY },
    tpotMs: summaryDistribution(input.stats.tpot, n, std),
    decodeTokPerS: { ...EMPTY },
    effectivePrefillTokPerS: { ...EMPTY },
    promptTokens: input.stats.promptTokens
      ? summaryDistribution(input.stats.promptTokens, n, std)
      : meanOnlyDistribution(input.totalInputTokens, n),
    completionTokens: input.stats.completionTokens
      ? summaryDistribution(input.stats.completionTokens, n, std)
      : meanOnlyDistribution(input.totalOutputTokens, n),
    itlMs: summaryDistribution(input.stats.itl, n > 0 ? itlSamples : 0, std),
    queueDelayMs: summaryDistribution(input.stats.queueDelay, n, std),
    sendLagMs: { ...EMPTY },
  } satisfies CellMetrics['distributions']
  return {
    percentileMethod: input.percentileMethod ?? 'linear-interpolation',
    p99MinSamples: P99_MIN_SAMPLES,
    p99DescriptiveOnly: REQUEST_METRIC_NAMES.filter((name) => {
      const d = distributions[name]
      return d.p99 !== null && d.samples < P99_MIN_SAMPLES
    }),
    distributions,
    totalCompletionTokens: input.totalOutputTokens ?? 0,
    totalPromptTokens: input.totalInputTokens ?? 0,
    completionTokenSources: { usage: input.tokenSource === 'usage' ? n : 0, 'client-count': input.tokenSource === 'client-count' ? n : 0 },
    outputThroughputTokPerS: n > 0 ? input.outputThroughput : null,
    requestRateReqPerS: n > 0 ? input.requestThroughput : null,
    wallClockMs: input.wallClockMs,
    canaries: null,
    outputControl: null,
    accuracy: null,
    goodput: null,
    openLoop: null,
  }
}

/** The methodology strings a summary-only import replaces: what its distributions hold. */
export function summaryOnlyMethodology(tool: string, std: StdKind = 'population'): Record<string, string> {
  const stdNote =
    std === 'population'
      ? "stddev is the source's population std (numpy ddof 0) × √(n/(n−1)) with n = samples"
      : "stddev is the source's own sample std (pandas ddof 1), kept as is"
  return {
    distributions:
      `summary-only: each distribution holds only what ${tool} summarized — mean, stddev, p50 (its median) and the ` +
      'pNN keys it wrote; min and max only from p0/p100 (or min/max) keys; ci95, and p25/p75 unless written, are null. ' +
      `The percentiles are the source's linear interpolation, not servegate's ${PERCENTILE_METHOD} (percentileMethod says so). ` +
      `${stdNote}. ` +
      'samples = completed requests: exact for ttft and e2e, ' +
      'an upper bound for tpot (only requests with more than one output token have one); ' +
      'for itl samples is the gap count, total output tokens − completed (one gap per token after the first; ' +
      'exact when every chunk carries one token, an upper bound when chunks carry several), and its stddev is rescaled by that count. ' +
      'promptTokens and completionTokens hold only their exact mean (total ÷ completed). ' +
      'generation, decode and effective prefill have no summary and stay empty',
    p99: `descriptive only below ${P99_MIN_SAMPLES} samples; in a summary-only import it is ${tool}'s interpolated p99`,
  }
}

/** The methodology key that says the failed count is unknown (the record's `failed` is then 0). */
export const FAILED_UNKNOWN_KEY = 'failedCount'

/** Everything the two importers know about a run, in servegate units, before assembly. */
export interface ImportedRun {
  /** e.g. `vllm.save-result` */
  format: string
  runId: string
  engine: string | null
  model: string
  api: Api | null
  /** Null when the source records no date. */
  startedAt: string | null
  finishedAt: string | null
  concurrency: number
  requests: number
  /** Null when the source does not record the planned output length. */
  maxTokens: number | null
  promptTokens: number
  promptTokensEstimator: string
  /** Per-request records, or null for a summary-only import. */
  records: RequestRecord[] | null
  /** For a summary-only import. */
  summary: CellMetrics | null
  completed: number
  failed: number
  wallClockMs: number
  methodology: Record<string, string>
  /** Facts of the workload the source did record (prefix cache, sampling…); the rest stays unknown. */
  workload?: Partial<WorkloadPlan> | undefined
  /** Warm-up requests the source recorded; null (the default) when it does not say. */
  warmupRequests?: number | null | undefined
  /** Planned requests the source says were never sent. @default 0 */
  unsent?: number | undefined
  gpu?: string | null | undefined
}

/** Assembles the servegate.run/v1 record; per-request imports get their metrics recomputed. */
export function assembleRunRecord(run: ImportedRun): RunRecord {
  const records = run.records ?? []
  const metrics = run.records === null ? (run.summary as CellMetrics) : computeCellMetrics(records, run.wallClockMs)
  return {
    schema: RUN_SCHEMA_ID,
    runId: run.runId,
    servegateVersion: SERVEGATE_VERSION,
    startedAt: run.startedAt,
    finishedAt: run.finishedAt,
    target: { baseUrl: null, model: run.model },
    plan: {
      api: run.api,
      model: run.model,
      concurrency: run.concurrency,
      requests: run.requests,
      warmupRequests: run.warmupRequests ?? null,
      maxTokens: run.maxTokens,
      requestTimeoutMs: null,
      workload: { ...importedWorkload(run.promptTokens, null, run.promptTokensEstimator), ...run.workload },
      sequential: null,
      arrival: null,
    },
    completed: run.completed,
    failed: run.failed,
    failures: countFailures(records),
    unsent: run.unsent ?? 0,
    requests: records,
    metrics,
    harness: {
      clientCpuMs: null,
      clientCpuShare: null,
      eventLoopDelayP99Ms: null,
      eventLoopDelayMaxMs: null,
      sendLagP99Ms: null,
      harnessLimited: false,
      reasons: [],
    },
    methodology: { ...METHODOLOGY, ...run.methodology },
    manifest: null,
    telemetry: null,
    cellFailure: null,
    importedFrom: { schema: run.format, runId: null, engine: run.engine, gpu: run.gpu ?? null, perRequest: run.records !== null },
  }
}

/**
 * ISO start and end of a run from its end time and duration; both null when the file records
 * no time (the duration stays in the metrics' wall clock).
 */
export function runSpan(finished: Date | null, wallClockMs: number): { startedAt: string | null; finishedAt: string | null } {
  if (finished === null) return { startedAt: null, finishedAt: null }
  return { startedAt: new Date(finished.getTime() - wallClockMs).toISOString(), finishedAt: finished.toISOString() }
}

/** A positive integer for a plan field, or the fallback when the source gave nothing usable. */
export function positiveInt(v: number | null | undefined, fallback: number): number {
  return typeof v === 'number' && Number.isFinite(v) && v >= 1 ? Math.round(v) : fallback
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
