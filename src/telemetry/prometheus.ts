import { pollEvery } from './poll.ts'
import { httpRequest } from '../http-request.ts'
import { sanitizeMessage } from '../errors.ts'
import type { ConcurrencyCheck, EngineKind, EngineOccupancy, EngineTimingDeltas, NullReasons, TimingDelta } from '../schema/telemetry.ts'
import { specDecodeFromCounts, specDecodeFromGauges } from '../metrics/spec-decode.ts'
import type { SpecDecodeMetrics } from '../schema/run.ts'
import { type Exposition, type ExpositionSample, parseExposition } from './exposition.ts'

/** Where one figure lives in an engine's `/metrics`. */
interface MetricRef {
  /** A gauge's or counter's sample name, or a histogram's base name (without `_sum`/`_count`). */
  name: string
  type: 'gauge' | 'counter' | 'histogram'
  /** Older names, tried in order when `name` is not exposed. */
  fallbacks?: readonly string[]
  /** Only the series with these label values (SGLang's per-stage histogram). */
  match?: Readonly<Record<string, string>>
  /** What the figure means or when its name changed. */
  note?: string
}

/** A figure the engine does not expose, and why. */
interface MissingMetric {
  name: null
  reason: string
}

export type MetricSource = MetricRef | MissingMetric

/**
 * Where an engine exports speculative decoding's draft acceptance: counters of drafts (verification
 * steps), draft tokens and accepted tokens (and accepted tokens per draft position, by a
 * `position` label), or gauges of the mean acceptance length and rate over its last logging window.
 */
type SpecDecodeSource =
  | { kind: 'counters'; drafts: string; draftTokens: string; acceptedTokens: string; acceptedPerPosition: string; note: string }
  | { kind: 'gauges'; acceptLength: string; acceptRate: string; note: string }
  | MissingMetric

export interface EngineMetricNames {
  /** Path of the Prometheus endpoint on the engine's HTTP origin. */
  metricsPath: string
  /** The label that tells data-parallel ranks apart: their gauges are summed; other duplicates (TP ranks) take the max. */
  rankLabel: string | null
  /** Requests in the running batch. */
  running: MetricSource
  /** Requests queued in the engine. */
  waiting: MetricSource
  /** KV-cache usage, a fraction (1 = full). */
  kvUsage: MetricSource
  /** Per-request model prefill time, seconds. */
  prefillSeconds: MetricSource
  /** Per-request decode time, seconds. */
  decodeSeconds: MetricSource
  /** Engine-side time to first token (arrival → first token), seconds. */
  ttftSeconds: MetricSource
  /** Time in the engine's waiting queue, seconds. */
  queueSeconds: MetricSource
  promptTokens: MetricSource
  generationTokens: MetricSource
  /**
   * Requests sent back to the waiting queue for lack of KV cache, a counter: vLLM's preemptions,
   * SGLang's retractions. A preempted request recomputes (or reloads) its KV when it runs again.
   */
  preemptions: MetricSource
  /** Speculative decoding's draft acceptance (exported only while the engine drafts). */
  specDecode: SpecDecodeSource
  /**
   * Values of the `model_name` label that name no model (TensorRT-LLM labels every series
   * `model_name="undefined"`): such series are kept whatever model is served.
   */
  placeholderModelNames: readonly string[]
  /**
   * How often the engine refreshes its running-requests gauge, when not continuously: SGLang
   * publishes `num_running_reqs` at a prefill and every `decodeSteps` decode steps only.
   */
  runningRefresh: { decodeSteps: number; flag: string; note: string } | null
  /**
   * The engine's release lines, told apart by the names a scrape holds: the first whose marker
   * matches a sample name is the line named in the reason of an absent figure.
   */
  lines: ReadonlyArray<{ label: string; marker: RegExp }>
  /** Labels, flags and version history. */
  notes: readonly string[]
}

/**
 * The Prometheus metrics servegate reads from each engine, with the versions where names changed.
 * Sources: vLLM `vllm/v1/metrics/loggers.py` and PRs #18354 / #29330; SGLang
 * `python/sglang/srt/metrics/collector.py`; llama.cpp `tools/server/server-task.cpp`
 * (`to_metrics`) and PRs #13660 / #22879; TensorRT-LLM `tensorrt_llm/metrics/collector.py` and
 * PR #5785.
 */
export const ENGINE_METRIC_NAMES: Readonly<Record<EngineKind, EngineMetricNames>> = {
  vllm: {
    metricsPath: '/metrics',
    rankLabel: 'engine',
    placeholderModelNames: [],
    lines: [
      { label: 'vLLM 0.9 or later (vllm:kv_cache_usage_perc)', marker: /^vllm:kv_cache_usage_perc$/ },
      { label: 'vLLM before 0.9 (vllm:gpu_cache_usage_perc)', marker: /^vllm:gpu_cache_usage_perc$/ },
    ],
    runningRefresh: null,
    running: { name: 'vllm:num_requests_running', type: 'gauge' },
    waiting: { name: 'vllm:num_requests_waiting', type: 'gauge' },
    kvUsage: {
      name: 'vllm:kv_cache_usage_perc',
      type: 'gauge',
      fallbacks: ['vllm:gpu_cache_usage_perc'],
      note:
        'vllm:kv_cache_usage_perc since 0.9 (PR #18354); ' +
        'vllm:gpu_cache_usage_perc was deprecated then and removed in PR #29330 (Nov 2025)',
    },
    prefillSeconds: {
      name: 'vllm:request_prefill_time_seconds',
      type: 'histogram',
      note: 'V1 engine: first scheduled → first token, queueing excluded',
    },
    decodeSeconds: { name: 'vllm:request_decode_time_seconds', type: 'histogram', note: 'V1 engine: first → last token' },
    ttftSeconds: { name: 'vllm:time_to_first_token_seconds', type: 'histogram' },
    queueSeconds: { name: 'vllm:request_queue_time_seconds', type: 'histogram' },
    promptTokens: { name: 'vllm:prompt_tokens_total', type: 'counter' },
    generationTokens: { name: 'vllm:generation_tokens_total', type: 'counter' },
    preemptions: {
      name: 'vllm:num_preemptions_total',
      type: 'counter',
      fallbacks: ['vllm:num_preemptions'],
      note:
        'registered as vllm:num_preemptions_total (V0, early V1) and as vllm:num_preemptions (later V1 loggers.py); ' +
        'prometheus_client exposes both as vllm:num_preemptions_total; counted per preemption, so a request preempted twice counts 2',
    },
    specDecode: {
      kind: 'counters',
      drafts: 'vllm:spec_decode_num_drafts_total',
      draftTokens: 'vllm:spec_decode_num_draft_tokens_total',
      acceptedTokens: 'vllm:spec_decode_num_accepted_tokens_total',
      acceptedPerPosition: 'vllm:spec_decode_num_accepted_tokens_per_pos_total',
      note: 'V1 engine with --speculative-config (vllm/v1/spec_decode/metrics.py, SpecDecodingProm); absent without it',
    },
    notes: [
      'labels: model_name (the served model name) and engine (data-parallel engine index, V1)',
      'V0 and V1 both expose num_requests_running/waiting; V1 histograms observe when a request finishes',
    ],
  },
  sglang: {
    metricsPath: '/metrics',
    rankLabel: 'dp_rank',
    placeholderModelNames: [],
    lines: [
      { label: 'SGLang 0.5.x metric set (with per-stage histograms)', marker: /^sglang:per_stage_req_latency_seconds/ },
      { label: 'SGLang 2025 metric set (no per-stage or queue-time histograms)', marker: /^sglang:/ },
    ],
    runningRefresh: {
      decodeSteps: 40,
      flag: '--decode-log-interval',
      note:
        'SGLang refreshes sglang:num_running_reqs only at a prefill (where it counts the requests already decoding, ' +
        'not the batch being admitted) and every --decode-log-interval decode steps (scheduler_metrics_mixin.py)',
    },
    running: { name: 'sglang:num_running_reqs', type: 'gauge' },
    waiting: { name: 'sglang:num_queue_reqs', type: 'gauge' },
    kvUsage: { name: 'sglang:token_usage', type: 'gauge', note: 'share of the KV token pool in use' },
    prefillSeconds: {
      name: 'sglang:per_stage_req_latency_seconds',
      type: 'histogram',
      match: { stage: 'prefill_forward' },
      note:
        'per-stage request latency, exported by releases with RequestStage (0.5.x line, late 2025); ' +
        'the 2025 metric set of docs/references/production_metrics.md has no stage series; ' +
        'with chunked prefill the earlier chunks are stage="chunked_prefill"',
    },
    decodeSeconds: {
      name: null,
      reason:
        'SGLang exports no per-request decode time: sglang:per_stage_req_latency_seconds observes only the stages marked ' +
        'metrics_is_observed (request_process, prefill_forward, chunked_prefill and the disaggregation stages); ' +
        'decode_loop and decode_forward are tracing spans only (RequestStage in req_time_stats.py, 0.5.x), ' +
        'and releases before the stage histogram have no stage series at all',
    },
    ttftSeconds: { name: 'sglang:time_to_first_token_seconds', type: 'histogram' },
    queueSeconds: {
      name: 'sglang:queue_time_seconds',
      type: 'histogram',
      note: 'a scheduler histogram of the 0.5.x line; the 2025 metric set has only the avg_request_queue_latency gauge',
    },
    promptTokens: { name: 'sglang:prompt_tokens_total', type: 'counter' },
    generationTokens: { name: 'sglang:generation_tokens_total', type: 'counter' },
    preemptions: {
      name: 'sglang:num_retracted_requests_total',
      type: 'counter',
      note:
        'a scheduler counter of the 0.5.x line (metrics/collector.py, increment_retracted_reqs); SGLang creates the series ' +
        'at its first retraction, so a release that has it shows none until then; earlier releases export only ' +
        'sglang:num_retracted_reqs, a gauge of the last batch, which cannot be differenced',
    },
    specDecode: {
      kind: 'gauges',
      acceptLength: 'sglang:spec_accept_length',
      acceptRate: 'sglang:spec_accept_rate',
      note:
        "gauges of the scheduler's last logging window (metrics/collector.py): mean acceptance length, bonus token " +
        'counted, and (later releases) accepted ÷ proposed draft tokens; SGLang exports no draft counters',
    },
    notes: [
      'needs --enable-metrics',
      'scheduler labels: model_name, engine_type (unified|prefill|decode), tp_rank, pp_rank, moe_ep_rank, dp_rank with DP; ' +
        'tokenizer-side metrics carry model_name only',
      'only TP rank 0 records scheduler metrics unless --enable-metrics-for-all-schedulers',
      'older releases (2024) labelled with name= instead of model_name=',
      'num_running_reqs and num_queue_reqs are refreshed at each prefill (counting the requests already decoding) ' +
        'and every --decode-log-interval decode steps (default 40), not continuously',
      '/server_info (since 0.4.x) and its deprecated alias /get_server_info report the version',
    ],
  },
  'llama-server': {
    metricsPath: '/metrics',
    rankLabel: null,
    placeholderModelNames: [],
    lines: [
      { label: 'llama.cpp build before PR #13660 (with llamacpp:kv_cache_usage_ratio)', marker: /^llamacpp:kv_cache_usage_ratio$/ },
      { label: 'llama.cpp build after PR #13660 (May 2025: no KV-usage gauge)', marker: /^llamacpp:/ },
    ],
    runningRefresh: null,
    running: { name: 'llamacpp:requests_processing', type: 'gauge' },
    waiting: { name: 'llamacpp:requests_deferred', type: 'gauge' },
    kvUsage: {
      name: 'llamacpp:kv_cache_usage_ratio',
      type: 'gauge',
      note:
        'llama.cpp removed llamacpp:kv_cache_usage_ratio and kv_cache_tokens from /metrics in PR #13660 (May 2025); ' +
        'only older builds expose it',
    },
    prefillSeconds: { name: 'llamacpp:prompt_seconds_total', type: 'counter', note: 'a counter: total seconds, no request count' },
    decodeSeconds: { name: 'llamacpp:tokens_predicted_seconds_total', type: 'counter', note: 'a counter: total seconds, no request count' },
    ttftSeconds: { name: null, reason: 'llama-server exposes no time-to-first-token metric' },
    queueSeconds: { name: null, reason: 'llama-server exposes no queue time, only the deferred request count' },
    promptTokens: {
      name: 'llamacpp:prompt_tokens_total',
      type: 'counter',
      note: 'current builds count evaluated prompt tokens only (cached ones are llamacpp:prompt_tokens_cached_total)',
    },
    generationTokens: { name: 'llamacpp:tokens_predicted_total', type: 'counter' },
    preemptions: {
      name: null,
      reason: 'llama-server exports no preemption counter: a request keeps its slot (--parallel) until it ends',
    },
    specDecode: {
      kind: 'counters',
      drafts: 'llamacpp:spec_decode_num_drafts_total',
      draftTokens: 'llamacpp:spec_decode_num_draft_tokens_total',
      acceptedTokens: 'llamacpp:spec_decode_num_accepted_tokens_total',
      acceptedPerPosition: 'llamacpp:spec_decode_num_accepted_tokens_per_pos_total',
      note:
        'builds of 2026 export these counters (0 until a draft model or n-gram drafting is on); ' +
        "every build reports each reply's timings.draft_n and draft_n_accepted",
    },
    notes: [
      'needs --metrics (otherwise /metrics answers 501 not_supported_error)',
      'no labels; in router mode /metrics needs ?model=<name>',
      "per-request timings (prompt_ms, predicted_ms…) come in each response's `timings` object instead",
    ],
  },
  trtllm: {
    metricsPath: '/prometheus/metrics',
    rankLabel: null,
    // Every release so far labels its series model_name="undefined" (OpenAIServer builds its
    // MetricsCollector with that placeholder), so the served name cannot select them.
    placeholderModelNames: ['undefined'],
    lines: [
      { label: 'trtllm-serve 1.3 line (trtllm_ names)', marker: /^trtllm_/ },
      {
        label: 'trtllm-serve up to 1.2 (five unprefixed request series only)',
        marker: /^(e2e_request_latency_seconds|time_to_first_token_seconds|request_queue_time_seconds|request_success_total)/,
      },
    ],
    runningRefresh: null,
    running: {
      name: 'trtllm_num_requests_running',
      type: 'gauge',
      note: 'an iteration-stats gauge of the 1.3 line, needs enable_iter_perf_stats: true; releases up to 1.2 export no running gauge',
    },
    waiting: {
      name: 'trtllm_num_requests_waiting',
      type: 'gauge',
      note: 'an iteration-stats gauge of the 1.3 line, needs enable_iter_perf_stats: true; releases up to 1.2 export no waiting gauge',
    },
    kvUsage: {
      name: 'trtllm_kv_cache_utilization',
      type: 'gauge',
      note: 'usedNumBlocks / maxNumBlocks, an iteration-stats gauge of the 1.3 line; releases up to 1.2 export none',
    },
    prefillSeconds: {
      name: 'trtllm_request_prefill_time_seconds',
      type: 'histogram',
      note: 'first scheduled → first token, 1.3 line; releases up to 1.2 export no prefill histogram',
    },
    decodeSeconds: {
      name: 'trtllm_request_decode_time_seconds',
      type: 'histogram',
      note: 'first → last token, 1.3 line; releases up to 1.2 export no decode histogram',
    },
    ttftSeconds: {
      name: 'trtllm_time_to_first_token_seconds',
      type: 'histogram',
      fallbacks: ['time_to_first_token_seconds'],
      note: 'trtllm_-prefixed from the 1.3 line; releases up to 1.2 name it time_to_first_token_seconds',
    },
    queueSeconds: {
      name: 'trtllm_request_queue_time_seconds',
      type: 'histogram',
      fallbacks: ['request_queue_time_seconds'],
      note: 'trtllm_-prefixed from the 1.3 line; releases up to 1.2 name it request_queue_time_seconds',
    },
    promptTokens: {
      name: 'trtllm_prompt_tokens_total',
      type: 'counter',
      note: 'a counter of the 1.3 line; releases up to 1.2 count no tokens',
    },
    generationTokens: {
      name: 'trtllm_generation_tokens_total',
      type: 'counter',
      note: 'a counter of the 1.3 line; releases up to 1.2 count no tokens',
    },
    preemptions: {
      name: null,
      reason: "trtllm-serve's Prometheus text (metrics/collector.py) has no preemption counter",
    },
    specDecode: {
      name: null,
      reason: "trtllm-serve's Prometheus text (metrics/collector.py) has no speculative decoding series",
    },
    notes: [
      'trtllm-serve mounts Prometheus text at /prometheus/metrics only with return_perf_metrics: true in its ' +
        '--extra_llm_api_options YAML (also --config from 1.1); its /metrics is JSON iteration stats. ' +
        'The running/waiting/KV gauges also need enable_iter_perf_stats: true (PyTorch backend)',
      'up to 1.2: five unprefixed series only (request_success_total, e2e_request_latency_seconds, ' +
        'time_to_first_token_seconds, time_per_output_token_seconds, request_queue_time_seconds); ' +
        'from 1.3: the trtllm_ prefix, iteration gauges, prefill/decode histograms and token counters (metrics/collector.py)',
      'labels: model_name="undefined", engine_type="undefined" (a placeholder, not the served name)',
      'a model launched from a local directory is served under the directory name: trtllm-serve has no option to rename it',
    ],
  },
}

/** The Prometheus URL of an engine at `origin` (e.g. `http://127.0.0.1:8000`). */
export function metricsUrl(origin: string, kind: EngineKind): string {
  return new URL(ENGINE_METRIC_NAMES[kind].metricsPath, origin).toString()
}

type TimingKey = 'prefill' | 'decode' | 'ttft' | 'queue'
const TIMING_SOURCES: Record<TimingKey, keyof EngineMetricNames> = {
  prefill: 'prefillSeconds',
  decode: 'decodeSeconds',
  ttft: 'ttftSeconds',
  queue: 'queueSeconds',
}

/** Speculative decoding as one scrape shows it; a figure the engine does not export is null. */
interface SpecDecodeReading {
  drafts: number | null
  draftTokens: number | null
  acceptedTokens: number | null
  /** Accepted tokens per draft position (0-based, by the `position` label); null where not exported. */
  acceptedByPosition: number[] | null
  /** SGLang's gauges: mean acceptance length and acceptance rate of its last logging window. */
  acceptLength: number | null
  acceptRate: number | null
}

/** One scrape, reduced to what servegate keeps; a figure the scrape lacked is null. */
export interface EngineReading {
  running: number | null
  waiting: number | null
  kvUsage: number | null
  timings: Record<TimingKey, { secondsSum: number; count: number | null } | null>
  promptTokens: number | null
  generationTokens: number | null
  /** Preemptions (SGLang: retractions) so far, summed over data-parallel ranks. */
  preemptions: number | null
  /** Speculative decoding's counters or gauges; null when the scrape has none (the engine does not draft). */
  specDecode: SpecDecodeReading | null
  /** The engine's release line as its names show it (see {@link EngineMetricNames.lines}), or null. */
  line: string | null
}

/** The release line a scrape's names show, or null when none of the engine's markers match. */
export function metricLine(exposition: Exposition, kind: EngineKind): string | null {
  for (const { label, marker } of ENGINE_METRIC_NAMES[kind].lines) {
    if (exposition.samples.some((s) => marker.test(s.name))) return label
  }
  return null
}

function matches(
  sample: ExpositionSample,
  name: string,
  match: MetricRef['match'],
  modelName: string | undefined,
  placeholders: readonly string[],
): boolean {
  if (sample.name !== name) return false
  const label = sample.labels.model_name
  if (modelName !== undefined && label !== undefined && label !== modelName && !placeholders.includes(label)) return false
  for (const [k, v] of Object.entries(match ?? {})) if (sample.labels[k] !== v) return false
  return true
}

/** The series of a metric (its first exposed name, fallbacks included), finite values only. */
function series(
  exposition: Exposition,
  ref: MetricRef,
  suffix: string,
  modelName: string | undefined,
  placeholders: readonly string[],
): ExpositionSample[] | null {
  for (const name of [ref.name, ...(ref.fallbacks ?? [])]) {
    const found = exposition.samples.filter((s) => matches(s, name + suffix, ref.match, modelName, placeholders))
    if (found.length > 0) return found.filter((s) => Number.isFinite(s.value))
  }
  return null
}

function sum(values: readonly ExpositionSample[]): number {
  return values.reduce((total, s) => total + s.value, 0)
}

/** Running/waiting: max over duplicates of one rank (TP ranks repeat the figure), summed over ranks. */
function occupancy(found: readonly ExpositionSample[] | null, rankLabel: string | null): number | null {
  if (found === null || found.length === 0) return null
  const perRank = new Map<string, number>()
  for (const s of found) {
    const rank = rankLabel === null ? '' : (s.labels[rankLabel] ?? '')
    perRank.set(rank, Math.max(perRank.get(rank) ?? Number.NEGATIVE_INFINITY, s.value))
  }
  return [...perRank.values()].reduce((a, b) => a + b, 0)
}

/**
 * Reduces one parsed scrape to running, waiting, KV usage, timing totals and token counters.
 * Pure. `modelName` keeps series whose `model_name` label is that name (or that have none, or the
 * engine's placeholder such as TensorRT-LLM's `"undefined"`).
 */
export function readEngineMetrics(exposition: Exposition, kind: EngineKind, modelName?: string): EngineReading {
  const names = ENGINE_METRIC_NAMES[kind]
  const get = (source: MetricSource, suffix = ''): ExpositionSample[] | null =>
    source.name === null ? null : series(exposition, source, suffix, modelName, names.placeholderModelNames)
  const timing = (key: TimingKey): EngineReading['timings'][TimingKey] => {
    const source = names[TIMING_SOURCES[key]] as MetricSource
    if (source.name === null) return null
    if (source.type === 'counter') {
      const found = get(source)
      return found === null || found.length === 0 ? null : { secondsSum: sum(found), count: null }
    }
    const sums = get(source, '_sum')
    const counts = get(source, '_count')
    if (sums === null || counts === null || sums.length === 0 || counts.length === 0) return null
    return { secondsSum: sum(sums), count: sum(counts) }
  }
  const counter = (source: MetricSource): number | null => {
    const found = get(source)
    return found === null || found.length === 0 ? null : sum(found)
  }
  const kv = get(names.kvUsage)
  return {
    running: occupancy(get(names.running), names.rankLabel),
    waiting: occupancy(get(names.waiting), names.rankLabel),
    kvUsage: kv === null || kv.length === 0 ? null : Math.max(...kv.map((s) => s.value)),
    timings: { prefill: timing('prefill'), decode: timing('decode'), ttft: timing('ttft'), queue: timing('queue') },
    promptTokens: counter(names.promptTokens),
    generationTokens: counter(names.generationTokens),
    // Per scheduler: TP ranks that record it repeat the figure, data-parallel ranks add up.
    preemptions: occupancy(get(names.preemptions), names.rankLabel),
    specDecode: specDecodeReading(names.specDecode, (name) =>
      exposition.samples.filter((s) => matches(s, name, undefined, modelName, names.placeholderModelNames) && Number.isFinite(s.value)),
    ),
    line: metricLine(exposition, kind),
  }
}

/**
 * Speculative decoding in one scrape: the counters summed over ranks (accepted tokens per draft
 * position by its `position` label), or SGLang's gauges (the largest over ranks); null when the
 * scrape has none of them.
 */
function specDecodeReading(source: SpecDecodeSource, samples: (name: string) => ExpositionSample[]): SpecDecodeReading | null {
  if (!('kind' in source)) return null
  const value = (name: string): number | null => {
    const found = samples(name)
    return found.length === 0 ? null : sum(found)
  }
  if (source.kind === 'gauges') {
    const gauge = (name: string): number | null => {
      const found = samples(name)
      return found.length === 0 ? null : Math.max(...found.map((s) => s.value))
    }
    const acceptLength = gauge(source.acceptLength)
    const acceptRate = gauge(source.acceptRate)
    if (acceptLength === null && acceptRate === null) return null
    return { drafts: null, draftTokens: null, acceptedTokens: null, acceptedByPosition: null, acceptLength, acceptRate }
  }
  const draftTokens = value(source.draftTokens)
  const acceptedTokens = value(source.acceptedTokens)
  if (draftTokens === null || acceptedTokens === null) return null
  const byPosition = new Map<number, number>()
  for (const s of samples(source.acceptedPerPosition)) {
    const position = Number(s.labels.position)
    if (Number.isInteger(position) && position >= 0) byPosition.set(position, (byPosition.get(position) ?? 0) + s.value)
  }
  const positions = [...byPosition.keys()].sort((a, b) => a - b)
  return {
    drafts: value(source.drafts),
    draftTokens,
    acceptedTokens,
    acceptedByPosition: positions.length === 0 ? null : positions.map((p) => byPosition.get(p) as number),
    acceptLength: null,
    acceptRate: null,
  }
}

function notExposed(source: MetricSource, line: string | null = null): string {
  const seen = line === null ? '' : `; the scrape shows a ${line}`
  return notExposedBy(source) + seen
}

function notExposedBy(source: MetricSource): string {
  if (source.name === null) return source.reason
  const names = [source.name, ...(source.fallbacks ?? [])].join(' / ')
  const where =
    source.match === undefined
      ? ''
      : `{${Object.entries(source.match)
          .map(([k, v]) => `${k}="${v}"`)
          .join(',')}}`
  return `${names}${where} is not in the engine's metrics${source.note === undefined ? '' : ` (${source.note})`}`
}

/** A reading and when it was taken (epoch ms). */
export interface EngineSnapshot {
  atMs: number
  reading: EngineReading
}

/** Differences the timing totals and token counters between two readings. Pure. */
export function timingDeltas(
  base: EngineSnapshot | null,
  last: EngineSnapshot | null,
  kind: EngineKind,
): { timings: EngineTimingDeltas; reasons: NullReasons } {
  const names = ENGINE_METRIC_NAMES[kind]
  const reasons: NullReasons = {}
  const timings: EngineTimingDeltas = {
    windowMs: null,
    prefill: null,
    decode: null,
    ttft: null,
    queue: null,
    promptTokens: null,
    generationTokens: null,
  }
  const noInterval =
    base === null || last === null
      ? 'no successful scrape'
      : base === last || last.atMs <= base.atMs
        ? 'only one successful scrape since the load started: no interval to difference'
        : null
  if (noInterval !== null) {
    for (const key of Object.keys(timings)) reasons[`timings.${key}`] = noInterval
    return { timings, reasons }
  }
  const b = base as EngineSnapshot
  const l = last as EngineSnapshot
  timings.windowMs = l.atMs - b.atMs
  const backwards = 'the counter went backwards between scrapes (engine restarted?)'
  for (const key of Object.keys(TIMING_SOURCES) as TimingKey[]) {
    const x = b.reading.timings[key]
    const y = l.reading.timings[key]
    if (x === null || y === null) {
      reasons[`timings.${key}`] = notExposed(names[TIMING_SOURCES[key]] as MetricSource, l.reading.line)
      continue
    }
    const seconds = y.secondsSum - x.secondsSum
    const count = x.count === null || y.count === null ? null : y.count - x.count
    if (seconds < 0 || (count !== null && count < 0)) reasons[`timings.${key}`] = backwards
    else timings[key] = { secondsSum: seconds, count } satisfies TimingDelta
  }
  for (const [key, source] of [
    ['promptTokens', names.promptTokens],
    ['generationTokens', names.generationTokens],
  ] as const) {
    const x = b.reading[key]
    const y = l.reading[key]
    if (x === null || y === null) reasons[`timings.${key}`] = notExposed(source, l.reading.line)
    else if (y < x) reasons[`timings.${key}`] = backwards
    else timings[key] = y - x
  }
  return { timings, reasons }
}

/**
 * Speculative decoding over the load window: the counters differenced between the two readings
 * (vLLM, llama.cpp), or SGLang's gauges at the last one; null when the engine exported none or
 * drafted nothing in the window. Pure.
 */
export function specDecodeOver(base: EngineSnapshot | null, last: EngineSnapshot | null): SpecDecodeMetrics | null {
  const end = last?.reading.specDecode ?? null
  if (end === null) return null
  if (end.draftTokens === null || end.acceptedTokens === null) return specDecodeFromGauges(end.acceptLength, end.acceptRate)
  // A counter absent from the first reading had not been incremented yet: 0.
  if (base === null || base === last) return null
  const start = base.reading.specDecode
  const drafts = end.drafts === null ? null : end.drafts - (start?.drafts ?? 0)
  const draftTokens = end.draftTokens - (start?.draftTokens ?? 0)
  const acceptedTokens = end.acceptedTokens - (start?.acceptedTokens ?? 0)
  const acceptedByPosition = end.acceptedByPosition?.map((n, i) => n - (start?.acceptedByPosition?.[i] ?? 0)) ?? null
  const backwards = [drafts ?? 0, draftTokens, acceptedTokens, ...(acceptedByPosition ?? [])].some((n) => n < 0)
  return backwards ? null : specDecodeFromCounts({ drafts, draftTokens, acceptedTokens, acceptedByPosition }, 'prometheus-counters')
}

/**
 * Preemptions (SGLang: retractions) over the load window: the counter's growth between the two
 * readings. A counter absent from the first reading and present in the last was created since
 * (SGLang creates its series at the first retraction): it grew from 0. Null with the reason when
 * the engine exports none or there is no interval. Pure.
 * @example preemptionsOver(base, last, 'vllm') // { preemptions: 12, reason: null }
 */
export function preemptionsOver(
  base: EngineSnapshot | null,
  last: EngineSnapshot | null,
  kind: EngineKind,
): { preemptions: number | null; reason: string | null } {
  if (base === null || last === null) return { preemptions: null, reason: 'no successful scrape' }
  if (base === last || last.atMs <= base.atMs) {
    return { preemptions: null, reason: 'only one successful scrape since the load started: no interval to difference' }
  }
  const end = last.reading.preemptions
  if (end === null) return { preemptions: null, reason: notExposed(ENGINE_METRIC_NAMES[kind].preemptions, last.reading.line) }
  const start = base.reading.preemptions ?? 0
  if (end < start) return { preemptions: null, reason: 'the counter went backwards between scrapes (engine restarted?)' }
  return { preemptions: end - start, reason: null }
}

export interface MetricsScraperOptions {
  /** The engine's Prometheus URL (see {@link metricsUrl}); loopback, as every servegate target. */
  url: string
  kind: EngineKind
  /** Time between scrapes, ms. @default 250 */
  intervalMs?: number
  /** Per-scrape timeout, ms. @default 2000 */
  timeoutMs?: number
  /** Keep only series of this served model (`model_name` label). */
  modelName?: string
  /** Stops scraping when aborted; `stop()` still returns what was collected. */
  signal?: AbortSignal
}

export interface MetricsScraper {
  /** Scrapes now and makes that scrape the base of the timing deltas (call it after warm-up). */
  markLoadStart(): Promise<void>
  /** Stops, scrapes once more (so the last requests are counted) and summarizes. */
  stop(): Promise<EngineOccupancy>
  /** After `stop()`: speculative decoding over the load window (see {@link specDecodeOver}); null before it. */
  specDecode(): SpecDecodeMetrics | null
}

/**
 * Scrapes an engine's Prometheus endpoint every `intervalMs` while a cell runs: the largest
 * running and waiting request counts and KV-cache usage seen, and the engine's own timing totals
 * between the load start (or first scrape) and the last scrape. A failed scrape is counted, never
 * fatal; a figure the engine does not expose is null with the reason.
 * @example
 * const scraper = startMetricsScraper({ url: metricsUrl(origin, 'vllm'), kind: 'vllm' })
 * await scraper.markLoadStart()
 * // … run the cell …
 * const occupancy = await scraper.stop()
 * reachedConcurrency(occupancy, 8) // { reached: true, … }
 */
export function startMetricsScraper(options: MetricsScraperOptions): MetricsScraper {
  const { url, kind } = options
  const intervalMs = options.intervalMs ?? 250
  const timeoutMs = options.timeoutMs ?? 2000
  if (!(intervalMs > 0)) throw new RangeError(`startMetricsScraper: intervalMs must be > 0, got ${intervalMs}`)
  const stopping = new AbortController()
  const signal = options.signal === undefined ? stopping.signal : AbortSignal.any([options.signal, stopping.signal])
  let scrapes = 0
  let scrapeErrors = 0
  let lastScrapeError: string | null = null
  let runningMax: number | null = null
  let waitingMax: number | null = null
  let kvUsageMax: number | null = null
  let base: EngineSnapshot | null = null
  let last: EngineSnapshot | null = null
  let rebase = false
  const max = (a: number | null, b: number | null): number | null => (b === null ? a : a === null ? b : Math.max(a, b))

  const scrape = async (): Promise<boolean> => {
    let status: number
    let body: string
    try {
      const res = await httpRequest(url, {
        headers: { accept: 'text/plain;version=0.0.4' },
        timeoutMs,
        ...(options.signal === undefined ? {} : { signal: options.signal }),
      })
      status = res.statusCode
      body = res.text
    } catch (error) {
      if (options.signal?.aborted === true) return false
      scrapeErrors++
      lastScrapeError = sanitizeMessage(`${url}: ${error instanceof Error ? error.message : String(error)}`)
      return false
    }
    if (status !== 200) {
      scrapeErrors++
      lastScrapeError = sanitizeMessage(`${url} answered HTTP ${status}: ${body}`)
      return false
    }
    const reading = readEngineMetrics(parseExposition(body), kind, options.modelName)
    const stamped = { atMs: Date.now(), reading }
    scrapes++
    runningMax = max(runningMax, reading.running)
    waitingMax = max(waitingMax, reading.waiting)
    kvUsageMax = max(kvUsageMax, reading.kvUsage)
    if (base === null || rebase) {
      base = stamped
      rebase = false
    }
    if (last === null || stamped.atMs >= last.atMs) last = stamped
    return true
  }

  const running = (async (): Promise<void> => {
    await pollEvery(intervalMs, signal, () => scrape())
  })()

  let stopped: Promise<EngineOccupancy> | null = null
  let specDecode: SpecDecodeMetrics | null = null
  return {
    specDecode: () => specDecode,
    async markLoadStart() {
      rebase = true
      await scrape()
    },
    stop() {
      stopped ??= (async (): Promise<EngineOccupancy> => {
        const callerAborted = options.signal?.aborted === true
        stopping.abort()
        await running
        if (!callerAborted) await scrape()
        const names = ENGINE_METRIC_NAMES[kind]
        const reasons: NullReasons = {}
        const none = scrapes === 0 ? `no successful scrape of ${url} (${scrapeErrors} failed; last: ${lastScrapeError ?? 'none'})` : null
        const line = last?.reading.line ?? null
        if (runningMax === null) reasons.runningMax = none ?? notExposed(names.running, line)
        if (waitingMax === null) reasons.waitingMax = none ?? notExposed(names.waiting, line)
        if (kvUsageMax === null) reasons.kvUsageMax = none ?? notExposed(names.kvUsage, line)
        const deltas = timingDeltas(base, last, kind)
        specDecode = specDecodeOver(base, last)
        const preempted = preemptionsOver(base, last, kind)
        if (preempted.reason !== null) reasons.preemptions = none ?? preempted.reason
        if (none !== null) for (const key of Object.keys(deltas.reasons)) deltas.reasons[key] = none
        return {
          kind,
          url,
          intervalMs,
          scrapes,
          scrapeErrors,
          lastScrapeError,
          runningMax,
          waitingMax,
          kvUsageMax,
          preemptions: preempted.preemptions,
          timings: deltas.timings,
          reasons: { ...reasons, ...deltas.reasons },
        }
      })()
      return stopped
    },
  }
}

/** Below this many scrapes a running count under the requested concurrency may just be a missed peak. */
const MIN_SCRAPES_FOR_NOT_REACHED = 3

/** What the cell itself knows that bears on reading the running gauge. */
export interface ConcurrencyContext {
  /** Median output tokens of the cell's ok requests, or null when none finished. */
  outputTokensP50?: number | null
  /** The engine's refresh interval of its running gauge when set on its command line (SGLang's `--decode-log-interval`). */
  runningRefreshSteps?: number | null
}

/**
 * Whether the engine ran `requested` requests at once at some scrape. Pure. `reached` is null when
 * the engine does not report running requests, too few scrapes succeeded to say it never did, or
 * (SGLang) the requests were too short for its running gauge, refreshed every N decode steps, to
 * see them.
 * @example reachedConcurrency(occupancy, 8) // { requested: 8, runningMax: 4, reached: false, reason: '… up to 4 waited in its queue …' }
 */
export function reachedConcurrency(occupancy: EngineOccupancy, requested: number, context: ConcurrencyContext = {}): ConcurrencyCheck {
  const { runningMax, waitingMax, scrapes, intervalMs } = occupancy
  if (!(Number.isInteger(requested) && requested > 0))
    throw new TypeError(`reachedConcurrency: requested must be a positive integer, got ${requested}`)
  if (runningMax === null) {
    return { requested, runningMax, reached: null, reason: occupancy.reasons.runningMax ?? 'the engine reported no running requests' }
  }
  if (runningMax >= requested) {
    const extra = runningMax > requested ? `; more than requested: another client shares the engine, or warm-up requests overlapped` : ''
    return {
      requested,
      runningMax,
      reached: true,
      reason: `the engine ran ${runningMax} requests at once (requested ${requested})${extra}`,
    }
  }
  if (scrapes < MIN_SCRAPES_FOR_NOT_REACHED) {
    return {
      requested,
      runningMax,
      reached: null,
      reason: `only ${scrapes} successful scrape(s): a peak of ${requested} may have fallen between them`,
    }
  }
  const refresh = ENGINE_METRIC_NAMES[occupancy.kind].runningRefresh
  if (refresh !== null) {
    const steps = context.runningRefreshSteps ?? refresh.decodeSteps
    const output = context.outputTokensP50 ?? null
    if (output === null || output < steps) {
      const size = output === null ? 'no finished request told their output length' : `the median request generated ${output} tokens`
      return {
        requested,
        runningMax,
        reached: null,
        reason:
          `not observable for outputs under ${steps} tokens: ${refresh.note}, every ${steps} here; ` +
          `${size}, so a request can start and finish between two refreshes (the gauge read at most ${runningMax} of ${requested})`,
      }
    }
  }
  const why =
    waitingMax !== null && waitingMax > 0
      ? `up to ${waitingMax} waited in its queue: ` +
        'its batch limit (max-num-seqs, max-running-requests, --parallel slots…) is below the requested concurrency'
      : 'none waited in its queue: the client did not keep the requests in flight, or the peaks fell between scrapes'
  const stale = refresh === null ? '' : `; ${refresh.note}, so short peaks may go unseen`
  return {
    requested,
    runningMax,
    reached: false,
    reason: `the engine ran at most ${runningMax} of ${requested} requests at once over ${scrapes} scrapes every ${intervalMs} ms; ${why}${stale}`,
  }
}
