import { ServegateError } from '../errors.ts'
import type { Api, RequestRecord, RunRecord } from '../schema/run.ts'
import { codeOfStatus, httpStatusOf, requestFromTimes, toMs } from './common.ts'
import type { FailedCount } from './import-methodology.ts'
import { assembleImport, type ImportedRun } from './imported-record.ts'
import { type BenchImportOptions, describeSource } from './result-file.ts'
import { type NumpySummary, summaryMetrics } from './summary-metrics.ts'

/*
 * NVIDIA AIPerf (ai-dynamo/aiperf) writes into its artifact directory:
 * - `profile_export_aiperf.json` (`JsonExporter` in `aiperf/exporters/json_exporter.py`,
 *   `JsonExportData` / `JsonMetricResult` in `aiperf/common/models/export_models.py`): one object
 *   per metric tag, `{ unit, avg, p1, p5, p10, p25, p50, p75, p90, p95, p99, min, max, std }` in
 *   display units (ms, tokens, requests/sec, sec); the stats come from `to_result()` in
 *   `aiperf/metrics/metric_dicts.py`: `np.percentile` (linear) and `np.std` (population, ddof 0).
 *   Also `input_config` (`endpoint.model_names`, `endpoint.type`, `loadgen.concurrency`,
 *   `loadgen.request_rate`), `was_cancelled`, `error_summary` ([{ error_details, count }]),
 *   `start_time` / `end_time` (naive local ISO).
 * - `profile_export.jsonl`: one line per request, `{ metadata: { session_num, request_start_ns,
 *   request_end_ns, benchmark_phase, was_cancelled, … }, metrics: { <tag>: { value, unit } }, error:
 *   null | { code, type, message } }` (`MetricRecordInfo` in `aiperf/common/models/record_models.py`;
 *   shape as documented in `docs/tutorials/working-with-profile-exports.md`).
 * AIPerf's `inter_token_latency` is (request_latency − ttft) ÷ (osl − 1) per request
 * (`aiperf/metrics/types/inter_token_latency_metric.py`): servegate's tpot, not a pooled gap;
 * `inter_chunk_latency` holds the gaps between chunks.
 */

/** `importedFrom.schema` of a record imported from AIPerf. */
const AIPERF_FORMAT_ID = 'aiperf.profile-export'

/** The per-request file AIPerf writes beside its aggregate. */
export const AIPERF_RECORDS_FILE = 'profile_export.jsonl'

const FIX = 'pass the profile_export_aiperf.json (or profile_export.jsonl) of an aiperf profile artifact directory, or pick another --from'

function isObject(v: unknown): v is Record<string, unknown> {
  return v !== null && typeof v === 'object' && !Array.isArray(v)
}

function isMetric(v: unknown): v is Record<string, unknown> & { unit: string } {
  return isObject(v) && typeof v.unit === 'string'
}

/** True for AIPerf's aggregate export: used by `--from auto`. */
export function looksLikeAiperfAggregate(value: unknown): boolean {
  if (!isObject(value)) return false
  const metrics = ['time_to_first_token', 'request_latency', 'request_throughput', 'benchmark_duration'].filter((k) => isMetric(value[k]))
  return metrics.length >= 2 || (metrics.length >= 1 && isObject(value.input_config))
}

/** True for one line of AIPerf's per-request export: used by `--from auto`. */
export function looksLikeAiperfRecord(value: unknown): boolean {
  return isObject(value) && isObject(value.metadata) && isObject(value.metrics) && 'error' in value
}

function num(v: unknown): number | null {
  return typeof v === 'number' && Number.isFinite(v) ? v : null
}

/** An AIPerf metric summary in ms (times) or its own unit (counts), min and max as p0 and p100. */
function aiperfSummary(value: Record<string, unknown>, tag: string): NumpySummary | null {
  const m = value[tag]
  if (!isMetric(m)) return null
  const isTime = toMs(1, m.unit) !== null
  const scale = (v: number | null): number | null => (v === null ? null : isTime ? (toMs(v, m.unit) as number) : v)
  const percentiles = new Map<number, number>()
  for (const q of [1, 5, 10, 25, 50, 75, 90, 95, 99]) {
    const v = scale(num(m[`p${q}`]))
    if (v !== null) percentiles.set(q, v)
  }
  const min = scale(num(m.min))
  const max = scale(num(m.max))
  if (min !== null) percentiles.set(0, min)
  if (max !== null) percentiles.set(100, max)
  return { mean: scale(num(m.avg)), median: percentiles.get(50) ?? null, std: scale(num(m.std)), percentiles, max }
}

function avgOf(value: Record<string, unknown>, tag: string): number | null {
  const m = value[tag]
  return isMetric(m) ? num(m.avg) : null
}

function at(value: unknown, path: readonly string[]): unknown {
  let v = value
  for (const k of path) v = isObject(v) ? v[k] : undefined
  return v
}

/** AIPerf writes naive local ISO times (`datetime.fromtimestamp`): read as UTC, as vLLM's date is. */
function naiveIso(v: unknown): string | null {
  if (typeof v !== 'string') return null
  const ms = Date.parse(/[zZ]|[+-]\d\d:\d\d$/.test(v) ? v : `${v}Z`)
  return Number.isNaN(ms) ? null : new Date(ms).toISOString()
}

interface AiperfFacts {
  model: string | null
  api: Api | null
  concurrency: number | null
  requestRate: number | null
  inputMean: number | null
  outputMean: number | null
  startedAt: string | null
  finishedAt: string | null
}

function factsOf(aggregate: Record<string, unknown> | null): AiperfFacts {
  const a = aggregate ?? {}
  const names = at(a, ['input_config', 'endpoint', 'model_names'])
  const type = at(a, ['input_config', 'endpoint', 'type'])
  return {
    model: Array.isArray(names) && typeof names[0] === 'string' ? names[0] : null,
    api: type === 'chat' ? 'chat' : type === 'completions' ? 'completions' : null,
    concurrency: num(at(a, ['input_config', 'loadgen', 'concurrency'])),
    requestRate: num(at(a, ['input_config', 'loadgen', 'request_rate'])),
    inputMean: num(at(a, ['input_config', 'input', 'prompt', 'input_tokens', 'mean'])),
    outputMean: num(at(a, ['input_config', 'input', 'prompt', 'output_tokens', 'mean'])),
    startedAt: naiveIso(a.start_time),
    finishedAt: naiveIso(a.end_time),
  }
}

/** AIPerf's own definitions, read from its metric classes. */
const DEFINITIONS = {
  clock: "AIPerf's client clock: time.perf_counter_ns() in its worker processes; start/end times are time.time_ns()",
  ttft: "AIPerf's time_to_first_token: request start to the first response message (responses[0])",
  timeToFirstOutput: 'the same number as ttft: AIPerf does not time reasoning separately',
  e2e: "AIPerf's request_latency: request start to the last response",
  tpot: "AIPerf's inter_token_latency: (request_latency − ttft) ÷ (output_sequence_length − 1) per request, which is servegate's tpot",
  completionTokens:
    "AIPerf's output_sequence_length: output plus reasoning tokens, from the server's usage where reported, else its tokenizer (client-count)",
  warmup:
    "AIPerf's --warmup-request-count is excluded from its profiling figures; plan.warmupRequests counts warm-up lines when the per-request export holds them, else null",
}

/**
 * Imports AIPerf's `profile_export_aiperf.json`. With `records` (the lines of the
 * `profile_export.jsonl` beside it) the import is per request; otherwise summary-only.
 */
export function importAiperfAggregate(value: unknown, options: BenchImportOptions & { records?: unknown[] }): RunRecord {
  const source = describeSource(options)
  if (!looksLikeAiperfAggregate(value)) {
    throw new ServegateError(
      'FILE_INVALID',
      `${source}: fields "time_to_first_token" and "request_latency" ({ unit, avg, … }) are missing; ${FIX}`,
    )
  }
  const a = value as Record<string, unknown>
  if (options.records !== undefined) return importAiperfRecords(options.records, { ...options, aggregate: a })
  const completed = Math.round(avgOf(a, 'request_count') ?? 0)
  if (completed === 0)
    throw new ServegateError('FILE_INVALID', `${source}: field "request_count.avg" is missing or 0, so there is nothing to import; ${FIX}`)
  const facts = factsOf(a)
  const failed = failedCount(a)
  const durationS = avgOf(a, 'benchmark_duration')
  const wallClockMs = durationS === null ? null : durationS * 1000
  // Without a failed count the requests sent are unknown: completed is the least there were.
  const requests = completed + (failed.count ?? 0)
  return assembleImport({
    ...runOf(facts, options),
    wallClockMs,
    plan: {
      concurrency: Math.max(1, Math.round(facts.concurrency ?? requests)),
      requests,
      maxTokens: facts.outputMean === null ? null : Math.max(1, Math.round(facts.outputMean)),
      promptTokens: Math.max(1, Math.round(facts.inputMean ?? avgOf(a, 'input_sequence_length') ?? 1)),
      promptTokensEstimator:
        facts.inputMean !== null
          ? `AIPerf input_config input.prompt.input_tokens.mean ${facts.inputMean} (its tokenizer's count)`
          : "mean of AIPerf's input_sequence_length",
    },
    measure: { perRequest: false, summary: aggregateMetrics(a, completed, wallClockMs), completed, failed },
    facts: {
      tool: 'AIPerf',
      read: `AIPerf profile_export_aiperf.json${a.was_cancelled === true ? ' (the run was cancelled before it finished)' : ''}`,
      definitions: {
        ...DEFINITIONS,
        itl: "AIPerf's inter_chunk_latency where exported (gaps between response chunks, pooled); else empty",
        throughput: "AIPerf's output_token_throughput and request_throughput (over its benchmark_duration)",
      },
      perRequestHint: `put its ${AIPERF_RECORDS_FILE} beside it to import per request`,
    },
  })
}

/** The run's identity from the aggregate's facts, for both shapes of import. */
function runOf(
  facts: AiperfFacts,
  options: BenchImportOptions,
): Pick<ImportedRun, 'format' | 'runId' | 'engine' | 'model' | 'api' | 'startedAt' | 'finishedAt'> {
  return {
    format: AIPERF_FORMAT_ID,
    runId: `aiperf-${facts.startedAt ?? 'undated'}`,
    engine: null,
    model: options.model ?? facts.model ?? 'unknown',
    api: facts.api,
    startedAt: facts.startedAt,
    finishedAt: facts.finishedAt,
  }
}

/** AIPerf's failed count: its error_request_count, else the sum of its error_summary, else never recorded. */
function failedCount(a: Record<string, unknown>): FailedCount {
  const errorCount = avgOf(a, 'error_request_count')
  if (errorCount !== null) return { count: Math.round(errorCount), from: "AIPerf's error_request_count" }
  if (Array.isArray(a.error_summary)) {
    const summed = a.error_summary.reduce((n: number, e) => n + (num(at(e, ['count'])) ?? 0), 0)
    return { count: Math.round(summed), from: "the sum of AIPerf's error_summary counts" }
  }
  return { count: null, why: 'the file has neither error_request_count nor error_summary' }
}

/** The aggregate's summaries as servegate's metrics: AIPerf's own figures, nothing recomputed. */
function aggregateMetrics(a: Record<string, unknown>, completed: number, wallClockMs: number | null): ReturnType<typeof summaryMetrics> {
  const totalOutput = avgOf(a, 'total_osl') ?? avgOf(a, 'total_output_tokens')
  const totalInput = avgOf(a, 'total_isl')
  return summaryMetrics({
    stats: {
      ttft: aiperfSummary(a, 'time_to_first_token'),
      tpot: aiperfSummary(a, 'inter_token_latency'),
      itl: aiperfSummary(a, 'inter_chunk_latency'),
      e2e: aiperfSummary(a, 'request_latency'),
      queueDelay: null,
      promptTokens: aiperfSummary(a, 'input_sequence_length'),
      completionTokens: aiperfSummary(a, 'output_sequence_length'),
    },
    completed,
    totalInputTokens: totalInput === null ? null : Math.round(totalInput),
    totalOutputTokens: totalOutput === null ? null : Math.round(totalOutput),
    outputThroughput: avgOf(a, 'output_token_throughput'),
    requestThroughput: avgOf(a, 'request_throughput'),
    wallClockMs,
    tokenSource: 'client-count',
  })
}

function metricValue(metrics: Record<string, unknown>, tag: string): { value: unknown; unit: string } | null {
  const m = metrics[tag]
  return isObject(m) && typeof m.unit === 'string' ? { value: m.value, unit: m.unit } : null
}

function msOf(metrics: Record<string, unknown>, tag: string): number | null {
  const m = metricValue(metrics, tag)
  const v = m === null ? null : num(m.value)
  return m === null || v === null ? null : toMs(v, m.unit)
}

/** The profiling lines of a per-request export, each checked; warm-up lines are only counted. */
function profilingLines(lines: readonly unknown[], source: string): { kept: Array<Record<string, unknown>>; warmup: number } {
  let warmup = 0
  const kept: Array<Record<string, unknown>> = []
  for (const [i, line] of lines.entries()) {
    if (!looksLikeAiperfRecord(line)) {
      throw new ServegateError('FILE_INVALID', `${source}: line ${i + 1} has no "metadata", "metrics" and "error" fields; ${FIX}`)
    }
    if (at(line, ['metadata', 'benchmark_phase']) === 'warmup') warmup++
    else kept.push(line as Record<string, unknown>)
  }
  if (kept.length === 0)
    throw new ServegateError('FILE_INVALID', `${source}: no profiling lines (only warm-up), so there is nothing to import; ${FIX}`)
  return { kept, warmup }
}

/** One profiling line as a request record; `first` is the earliest request start (ns), for the start offset. */
function lineRecord(line: Record<string, unknown>, i: number, first: number | null): RequestRecord {
  const metrics = isObject(line.metrics) ? line.metrics : {}
  const err = line.error
  const icl = metricValue(metrics, 'inter_chunk_latency')
  const gaps =
    icl !== null && Array.isArray(icl.value) ? icl.value.flatMap((v) => (num(v) === null ? [] : [toMs(v as number, icl.unit) ?? 0])) : null
  const status = isObject(err) ? httpStatusOf(err.code) : null
  const start = num(at(line, ['metadata', 'request_start_ns']))
  const end = num(at(line, ['metadata', 'request_end_ns']))
  const e2e = msOf(metrics, 'request_latency') ?? (start !== null && end !== null ? (end - start) / 1e6 : null)
  const cancelled = at(line, ['metadata', 'was_cancelled']) === true
  return requestFromTimes({
    index: num(at(line, ['metadata', 'session_num'])) ?? i,
    ttftMs: msOf(metrics, 'time_to_first_token'),
    e2eMs: e2e,
    promptTokens: num(metricValue(metrics, 'input_sequence_length')?.value) ?? num(metricValue(metrics, 'error_isl')?.value),
    completionTokens: num(metricValue(metrics, 'output_sequence_length')?.value),
    itlMs: gaps,
    startOffsetMs: start === null || first === null ? null : (start - first) / 1e6,
    tokenSource: 'client-count',
    error: isObject(err)
      ? {
          code: cancelled ? 'REQUEST_ABORTED' : codeOfStatus(status),
          message: `${String(err.type ?? 'error')}: ${String(err.message ?? 'no message')}`,
          httpStatus: status,
        }
      : null,
  })
}

/** Checks the aggregate beside the lines counts the same successes: else the two files are from different runs. */
function checkSameRun(aggregate: Record<string, unknown> | null, records: readonly RequestRecord[], source: string): void {
  const expected = aggregate === null ? null : avgOf(aggregate, 'request_count')
  const completed = records.filter((r) => r.status === 'ok').length
  if (expected !== null && Math.round(expected) !== completed) {
    throw new ServegateError(
      'FILE_INVALID',
      `${source}: request_count.avg in profile_export_aiperf.json is ${expected} but ${AIPERF_RECORDS_FILE} holds ${completed} successful profiling lines; ` +
        `the two files are not from the same run; ${FIX}`,
    )
  }
}

/**
 * Imports AIPerf's `profile_export.jsonl` (parsed lines): one request record per profiling
 * line, warm-up lines counted apart. `aggregate` (the JSON beside it) supplies model and plan.
 */
export function importAiperfRecords(lines: readonly unknown[], options: BenchImportOptions & { aggregate?: unknown }): RunRecord {
  const source = describeSource(options)
  const aggregate = isObject(options.aggregate) ? options.aggregate : null
  const facts = factsOf(aggregate)
  const { kept, warmup } = profilingLines(lines, source)
  const starts = kept.flatMap((l) => num(at(l, ['metadata', 'request_start_ns'])) ?? [])
  const ends = kept.flatMap((l) => num(at(l, ['metadata', 'request_end_ns'])) ?? [])
  const first = starts.length === 0 ? null : Math.min(...starts)
  const lastEnd = ends.length === 0 ? null : Math.max(...ends)
  const records = kept.map((line, i) => lineRecord(line, i, first)).sort((x, y) => x.index - y.index)
  checkSameRun(aggregate, records, source)
  const durationS = aggregate === null ? null : avgOf(aggregate, 'benchmark_duration')
  const wallClockMs = durationS !== null ? durationS * 1000 : first !== null && lastEnd !== null ? (lastEnd - first) / 1e6 : null
  const prompts = records.flatMap((r) => (r.promptTokens === null ? [] : [r.promptTokens]))
  const run = runOf(facts, options)
  return assembleImport({
    ...run,
    startedAt: run.startedAt ?? (first === null ? null : new Date(first / 1e6).toISOString()),
    finishedAt: run.finishedAt ?? (lastEnd === null ? null : new Date(lastEnd / 1e6).toISOString()),
    wallClockMs,
    plan: {
      concurrency: Math.max(1, Math.round(facts.concurrency ?? records.length)),
      requests: records.length,
      maxTokens: facts.outputMean === null ? null : Math.max(1, Math.round(facts.outputMean)),
      warmupRequests: warmup,
      promptTokens: Math.max(1, Math.round(facts.inputMean ?? (prompts.reduce((x, y) => x + y, 0) / Math.max(prompts.length, 1) || 1))),
      promptTokensEstimator:
        facts.inputMean !== null
          ? `AIPerf input_config input.prompt.input_tokens.mean ${facts.inputMean}`
          : "mean of AIPerf's input_sequence_length",
    },
    measure: { perRequest: true, records },
    facts: {
      tool: 'AIPerf',
      read:
        `AIPerf ${AIPERF_RECORDS_FILE}` +
        (aggregate === null
          ? ' alone (no profile_export_aiperf.json beside it: model and plan unknown)'
          : ' with profile_export_aiperf.json beside it'),
      conversion: 'per-request values converted to ms',
      definitions: {
        ...DEFINITIONS,
        itl: "AIPerf's inter_chunk_latency per request: the gaps between response chunks (one chunk may carry several tokens)",
        tpot: "(e2e − ttft) ÷ (output tokens − 1), derived by servegate; AIPerf's inter_token_latency is the same definition",
        warmup: `${warmup} warm-up line(s) (metadata.benchmark_phase "warmup") left out of the record; plan.warmupRequests counts them`,
      },
      failureRule:
        'a request failed when its line has an error ({ code, type, message }); a cancelled one is REQUEST_ABORTED, ' +
        'an HTTP status maps to its code',
    },
  })
}
