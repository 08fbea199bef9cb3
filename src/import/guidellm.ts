import { ServegateError } from '../errors.ts'
import type { Api, RequestRecord, RunRecord } from '../schema/run.ts'
import { requestFromTimes } from './common.ts'
import type { FailedCount } from './import-methodology.ts'
import { assembleImport, type ImportedRun } from './imported-record.ts'
import { type BenchImportOptions, describeSource } from './result-file.ts'
import { type NumpySummary, summaryMetrics } from './summary-metrics.ts'

/*
 * vllm-project/guidellm `guidellm benchmark --output-path benchmarks.json` writes a
 * `GenerativeBenchmarksReport` (`src/guidellm/benchmark/output.py` up to v0.3,
 * `src/guidellm/benchmark/schemas/report.py` later): `{ benchmarks: [GenerativeBenchmark, …] }`
 * (later also `metadata` and `config`), one benchmark per strategy of the profile (a sweep holds
 * synchronous, throughput and several constant rates), so one file holds several runs.
 *
 * Each benchmark (`src/guidellm/benchmark/benchmark.py` v0.3): `type_` "generative_benchmark",
 * `run_id`, `args.strategy` ({ type_: synchronous | concurrent (streams) | throughput (max_concurrency)
 * | constant | poisson (rate) }), `args.warmup_number`, `worker.backend_model`, `start_time`,
 * `end_time`, `duration` (s), `metrics`, `request_totals` ({ successful, incomplete, errored, total }),
 * `request_samples` (null unless the requests were randomly sampled), `requests` ({ successful,
 * incomplete, errored } lists of `GenerativeTextResponseStats`: `start_time`, `end_time`,
 * `first_token_time`, `last_token_time` (Unix s), `prompt_tokens`, `output_tokens`, `error`).
 *
 * Every metric is a `StatusDistributionSummary` ({ successful, incomplete, errored, total }) of
 * `DistributionSummary` (`src/guidellm/objects/statistics.py` v0.3, later
 * `src/guidellm/schemas/statistics.py`): `mean`, `median`, `mode`, `variance`, `std_dev` (weighted
 * population), `min`, `max`, `count`, `total_sum`, `percentiles` ({ p001, p01, p05, p10, p25, p50,
 * p75, p90, p95, p99, p999 }) read off the weighted CDF: the first value whose cumulative
 * probability reaches q, which with equal weights is the nearest rank. `request_latency` is in
 * seconds, `*_ms` in ms. `inter_token_latency_ms` is each request's (last − first token) ÷
 * (output tokens − 1), weighted by output tokens − 1; `time_per_output_token_ms` divides the same
 * span by output tokens (v0.3) and is not servegate's tpot.
 */

/** `importedFrom.schema` of a record imported from GuideLLM. */
const GUIDELLM_FORMAT_ID = 'guidellm.benchmarks'

const FIX = 'pass the benchmarks.json that `guidellm benchmark --output-path` writes, or pick another --from'

function isObject(v: unknown): v is Record<string, unknown> {
  return v !== null && typeof v === 'object' && !Array.isArray(v)
}

function num(v: unknown): number | null {
  return typeof v === 'number' && Number.isFinite(v) ? v : null
}

function at(value: unknown, path: readonly string[]): unknown {
  let v = value
  for (const k of path) v = isObject(v) ? v[k] : undefined
  return v
}

/** True for a GuideLLM report: used by `--from auto`. */
export function looksLikeGuidellm(value: unknown): boolean {
  if (!isObject(value) || !Array.isArray(value.benchmarks)) return false
  const first = value.benchmarks[0]
  return isObject(first) && isObject(first.metrics) && ('type_' in first || 'requests' in first || 'request_totals' in first)
}

/** The benchmarks of a report, for `--all` and `--line` (a benchmark's 1-based position). */
export function guidellmBenchmarks(value: unknown, source: string): Record<string, unknown>[] {
  if (!looksLikeGuidellm(value))
    throw new ServegateError('FILE_INVALID', `${source}: field "benchmarks" (an array of benchmarks with metrics) is missing; ${FIX}`)
  return (value as { benchmarks: unknown[] }).benchmarks.filter(isObject)
}

const PERCENTILE_KEYS: ReadonlyArray<[string, number]> = [
  ['p01', 1],
  ['p05', 5],
  ['p10', 10],
  ['p25', 25],
  ['p50', 50],
  ['p75', 75],
  ['p90', 90],
  ['p95', 95],
  ['p99', 99],
  ['p999', 99.9],
]

/** The successful requests' summary of one metric, × `scale`, with its count. */
function successful(metrics: Record<string, unknown>, key: string, scale: number): { summary: NumpySummary; count: number } | null {
  const d = at(metrics, [key, 'successful'])
  if (!isObject(d)) return null
  const s = (v: unknown): number | null => {
    const n = num(v)
    return n === null ? null : n * scale
  }
  const percentiles = new Map<number, number>()
  for (const [k, q] of PERCENTILE_KEYS) {
    const v = s(at(d, ['percentiles', k]))
    if (v !== null) percentiles.set(q, v)
  }
  const min = s(d.min)
  const max = s(d.max)
  if (min !== null) percentiles.set(0, min)
  if (max !== null) percentiles.set(100, max)
  return { summary: { mean: s(d.mean), median: s(d.median), std: s(d.std_dev), percentiles, max }, count: num(d.count) ?? 0 }
}

function strategyOf(b: Record<string, unknown>): { type: string; concurrency: number | null; rate: number | null } {
  const strategy = at(b, ['args', 'strategy']) ?? at(b, ['config', 'strategy'])
  const type = String(at(strategy, ['type_']) ?? 'unknown')
  const streams = num(at(strategy, ['streams'])) ?? num(at(strategy, ['max_concurrency']))
  return { type, concurrency: type === 'synchronous' ? 1 : streams, rate: num(at(strategy, ['rate'])) }
}

function describeStrategy(s: { type: string; concurrency: number | null; rate: number | null }): string {
  if (s.type === 'synchronous') return 'synchronous: one request at a time'
  if (s.type === 'concurrent') return `concurrent: ${s.concurrency ?? '?'} streams`
  if (s.type === 'throughput') return `throughput: all at once${s.concurrency === null ? '' : ` (max_concurrency ${s.concurrency})`}`
  if (s.type === 'constant' || s.type === 'poisson') return `${s.type} arrivals at ${s.rate ?? '?'} req/s`
  return `strategy ${s.type}`
}

/** GuideLLM's own definitions, read from its benchmark schemas. */
const DEFINITIONS = {
  clock: "GuideLLM's client clock: time.time() in its worker processes (Unix seconds)",
  ttft: "GuideLLM's time_to_first_token_ms: request start to the first token iteration",
  timeToFirstOutput: 'the same number as ttft: GuideLLM does not time reasoning separately',
  e2e: "GuideLLM's request_latency: request start to request end",
  completionTokens: "GuideLLM's output_tokens: the server's usage where reported, else its own token count (client-count)",
  warmup: "GuideLLM's warm-up (args.warmup_number / warmup_duration) is excluded from its figures",
}

/** What a benchmark says about its run, read once for either shape of import. */
interface GuidellmRun {
  b: Record<string, unknown>
  metrics: Record<string, unknown>
  strategy: ReturnType<typeof strategyOf>
  /** `GuideLLM benchmarks.json (benchmark 2 of 3), concurrent: 3 streams`: what was read. */
  read: string
  completed: number
  failed: FailedCount
  durationS: number | null
  /** Every request the benchmark kept (null when it kept a random sample, or none). */
  requests: Record<string, unknown> | null
}

/**
 * Imports one benchmark of a GuideLLM report. Per request when the benchmark kept every request
 * (`request_samples` null and the lists filled, the v0.3 shape), else summary-only.
 */
export function importGuidellmBenchmark(b: Record<string, unknown>, options: BenchImportOptions & { count?: number }): RunRecord {
  const run = readBenchmark(b, options)
  const start = num(b.start_time)
  const end = num(b.end_time)
  const iso = (s: number | null): string | null => (s === null ? null : new Date(s * 1000).toISOString())
  const requestType = at(b, ['requests', 'successful', '0', 'request_type'])
  const api: Api | null = requestType === 'chat_completions' ? 'chat' : requestType === 'text_completions' ? 'completions' : null
  return assembleImport({
    format: GUIDELLM_FORMAT_ID,
    runId: `guidellm-${typeof b.run_id === 'string' ? b.run_id : 'run'}${options.line === undefined ? '' : `-${options.line}`}`,
    engine: null,
    model: options.model ?? modelOf(b) ?? 'unknown',
    api,
    startedAt: iso(start),
    finishedAt: iso(end),
    wallClockMs: run.durationS === null ? null : run.durationS * 1000,
    ...(run.requests === null ? summaryOnly(run) : perRequest(run, run.requests, start ?? 0)),
  })
}

function modelOf(b: Record<string, unknown>): string | null {
  const named = [at(b, ['worker', 'backend_model']), at(b, ['config', 'backend', 'model']), at(b, ['config', 'requests', 'model'])]
  return named.find((m): m is string => typeof m === 'string' && m !== '' && m !== 'None') ?? null
}

/** The check and parse steps: the benchmark's metrics, strategy, counts, and whether it kept every request. */
function readBenchmark(b: Record<string, unknown>, options: BenchImportOptions & { count?: number }): GuidellmRun {
  const metrics = b.metrics
  if (!isObject(metrics)) throw new ServegateError('FILE_INVALID', `${describeSource(options)}: field "metrics" is missing; ${FIX}`)
  const strategy = strategyOf(b)
  const totals = isObject(b.request_totals) ? b.request_totals : {}
  const errored = num(totals.errored)
  const incomplete = num(totals.incomplete)
  const failed: FailedCount =
    errored !== null && incomplete !== null
      ? { count: errored + incomplete, from: "GuideLLM's request_totals errored + incomplete" }
      : { count: null, why: 'the benchmark has no request_totals errored and incomplete counts' }
  const start = num(b.start_time)
  const end = num(b.end_time)
  const lists = isObject(b.requests) ? b.requests : null
  const sampled = b.request_samples !== null && b.request_samples !== undefined
  const kept =
    lists === null ? [] : (['successful', 'errored', 'incomplete'] as const).flatMap((k) => (Array.isArray(lists[k]) ? lists[k] : []))
  const everyRequest = !sampled && kept.length > 0 && kept.every((r) => isObject(r) && num(r.start_time) !== null)
  const where = options.line === undefined ? '' : ` (benchmark ${options.line}${options.count === undefined ? '' : ` of ${options.count}`})`
  return {
    b,
    metrics,
    strategy,
    read: `GuideLLM benchmarks.json${where}, ${describeStrategy(strategy)}`,
    completed: num(totals.successful) ?? successful(metrics, 'request_latency', 1)?.count ?? 0,
    failed,
    durationS: num(b.duration) ?? (start !== null && end !== null ? end - start : null),
    requests: everyRequest ? lists : null,
  }
}

/** The plan a benchmark records: its strategy's concurrency and warm-up; GuideLLM keeps no planned lengths. */
function planOf(run: GuidellmRun, requests: number, promptTokens: number, estimator: string): ImportedRun['plan'] {
  return {
    concurrency: Math.max(1, Math.round(run.strategy.concurrency ?? requests)),
    requests,
    maxTokens: null,
    warmupRequests: num(at(run.b, ['args', 'warmup_number'])),
    promptTokens: Math.max(1, Math.round(promptTokens)),
    promptTokensEstimator: estimator,
  }
}

/** A benchmark that kept every request: one record each, servegate's own distributions. */
function perRequest(run: GuidellmRun, lists: Record<string, unknown>, start: number): Pick<ImportedRun, 'plan' | 'measure' | 'facts'> {
  const records = buildGuidellmRequests(lists, start)
  const prompts = records.flatMap((r) => (r.promptTokens === null ? [] : [r.promptTokens]))
  const meanPrompt = prompts.reduce((x, y) => x + y, 0) / Math.max(prompts.length, 1) || 1
  return {
    plan: planOf(run, records.length, meanPrompt, "mean of GuideLLM's prompt_tokens (actual; its data config is not read)"),
    measure: { perRequest: true, records },
    facts: {
      tool: 'GuideLLM',
      read: run.read,
      conversion: "per-request times converted Unix seconds → ms from the benchmark's start",
      definitions: {
        ...DEFINITIONS,
        itl: 'not recorded per gap by GuideLLM (only first and last token times): itlMs is null',
        tpot: "(e2e − ttft) ÷ (output tokens − 1), derived by servegate; GuideLLM's inter_token_latency_ms measures to the last token instead of the end",
      },
      failureRule:
        'errored requests keep their error text (code INTERNAL); incomplete ones (cut off when the benchmark ended) are REQUEST_ABORTED',
    },
  }
}

/** A benchmark that kept no requests, or a random sample of them: GuideLLM's summaries of its successful ones. */
function summaryOnly(run: GuidellmRun): Pick<ImportedRun, 'plan' | 'measure' | 'facts'> {
  const { metrics, completed, durationS } = run
  const prompt = successful(metrics, 'prompt_token_count', 1)
  const itl = successful(metrics, 'inter_token_latency_ms', 1)
  const totalOutput = num(at(metrics, ['output_token_count', 'successful', 'total_sum']))
  const totalInput = num(at(metrics, ['prompt_token_count', 'successful', 'total_sum']))
  const summary = summaryMetrics({
    stats: {
      ttft: successful(metrics, 'time_to_first_token_ms', 1)?.summary ?? null,
      tpot: null,
      itl: itl?.summary ?? null,
      e2e: successful(metrics, 'request_latency', 1000)?.summary ?? null,
      queueDelay: null,
      promptTokens: prompt?.summary ?? null,
      completionTokens: successful(metrics, 'output_token_count', 1)?.summary ?? null,
    },
    completed,
    totalInputTokens: totalInput === null ? null : Math.round(totalInput),
    totalOutputTokens: totalOutput === null ? null : Math.round(totalOutput),
    outputThroughput: totalOutput !== null && durationS !== null && durationS > 0 ? totalOutput / durationS : null,
    requestThroughput: durationS !== null && durationS > 0 ? completed / durationS : null,
    wallClockMs: durationS === null ? null : durationS * 1000,
    tokenSource: 'client-count',
    itlSamples: itl?.count ?? null,
    percentileMethod: 'nearest-rank',
  })
  const sampled = run.b.request_samples !== null && run.b.request_samples !== undefined
  return {
    plan: planOf(
      run,
      Math.max(1, completed + (run.failed.count ?? 0)),
      prompt?.summary.mean ?? 1,
      "GuideLLM's mean prompt_token_count of successful requests",
    ),
    measure: { perRequest: false, summary, completed, failed: run.failed },
    facts: {
      tool: 'GuideLLM',
      read: run.read,
      notes: sampled ? ['the file kept only a random sample of requests (request_samples), so its per-request lists are not the run'] : [],
      definitions: { ...DEFINITIONS, ...SUMMARY_DEFINITIONS },
    },
  }
}

/** What GuideLLM's summaries hold, where they differ from numpy's. */
const SUMMARY_DEFINITIONS = {
  distributions:
    "summary-only: each distribution holds GuideLLM's summary of its successful requests — mean, std_dev, median, min, max and " +
    'p1…p99.9 — read off its weighted CDF (the first value whose cumulative share reaches q: the nearest rank with equal weights, ' +
    'so percentileMethod is nearest-rank). ' +
    "std_dev is GuideLLM's weighted population std × √(n/(n−1)). ci95 is null. " +
    "itl holds GuideLLM's inter_token_latency_ms: each request's mean gap (last − first token) ÷ (output tokens − 1) " +
    'weighted by its gap count, so its mean is the pooled mean gap; samples is the number of requests it covers. ' +
    "tpot stays empty: GuideLLM's time_per_output_token_ms is a different ratio",
  throughput: "Σ output tokens of successful requests ÷ GuideLLM's duration (first request start to last request end)",
}

function buildGuidellmRequests(lists: Record<string, unknown>, benchmarkStart: number): RequestRecord[] {
  const rows: Array<{ r: Record<string, unknown>; kind: 'successful' | 'errored' | 'incomplete' }> = []
  for (const kind of ['successful', 'errored', 'incomplete'] as const) {
    for (const r of Array.isArray(lists[kind]) ? lists[kind] : []) if (isObject(r)) rows.push({ r, kind })
  }
  rows.sort((a, b) => (num(a.r.start_time) ?? 0) - (num(b.r.start_time) ?? 0))
  return rows.map(({ r, kind }, index) => {
    const start = num(r.start_time) ?? 0
    const end = num(r.end_time)
    const first = num(r.first_token_time)
    return requestFromTimes({
      index,
      ttftMs: first === null ? null : (first - start) * 1000,
      e2eMs: end === null ? null : (end - start) * 1000,
      promptTokens: num(r.prompt_tokens),
      completionTokens: num(r.output_tokens),
      itlMs: null,
      startOffsetMs: (start - benchmarkStart) * 1000,
      tokenSource: 'client-count',
      error:
        kind === 'successful'
          ? null
          : {
              code: kind === 'incomplete' ? 'REQUEST_ABORTED' : 'INTERNAL',
              message: `GuideLLM ${kind}: ${typeof r.error === 'string' && r.error !== '' ? r.error : 'no message'}`,
              httpStatus: null,
            },
    })
  })
}
