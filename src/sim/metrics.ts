import type { SimSpecCounters } from './spec-decode.ts'

/** Which engine's Prometheus names the sim's metrics endpoint and version endpoint imitate. */
export type MetricsDialect = 'vllm' | 'sglang' | 'llama-server' | 'trtllm'

export interface SimCounters {
  running: number
  waiting: number
  /** Fraction of the KV budget in use, 0..1. */
  kvUsage: number
  promptTokens: number
  generationTokens: number
  requestsFinished: number
  /** Requests preempted (SGLang: retracted) so far. */
  preemptions: number
  /** Prompt tokens looked up in the prefix cache (vLLM counts every prompt, with the cache off too). */
  prefixCacheQueries: number
  /** Of those, the tokens found cached. */
  prefixCacheHits: number
  /** prefixCacheHits ÷ prefixCacheQueries, 0 before any query (SGLang's gauge). */
  prefixCacheHitRate: number
}

/** Per-request timing totals of the finished requests that produced output (the engine's own view). */
export interface SimTimings {
  /** Requests counted in the sums. */
  count: number
  /** Arrival to first token: queueing and prefill. */
  ttftSecondsSum: number
  /** Modelled prefill compute: prompt tokens computed (those the prefix cache did not hold) ÷ prefill rate. */
  prefillSecondsSum: number
  /** First token to the last. */
  decodeSecondsSum: number
}

/** What a dialect's endpoint serves beyond its names: TensorRT-LLM's release line and options. */
export interface DialectShape {
  /** The engine version the sim reports; TensorRT-LLM's metric names depend on it. */
  version: string
  /** TensorRT-LLM `enable_iter_perf_stats`: the running/waiting/KV gauges. @default true */
  iterationStats?: boolean
}

type Row = [name: string, type: 'gauge' | 'counter', help: string]

const NAMES: Record<Exclude<MetricsDialect, 'trtllm'>, Partial<Record<keyof SimCounters, Row>>> = {
  vllm: {
    running: ['vllm:num_requests_running', 'gauge', 'Number of requests in model execution batches.'],
    waiting: ['vllm:num_requests_waiting', 'gauge', 'Number of requests waiting to be processed.'],
    kvUsage: ['vllm:kv_cache_usage_perc', 'gauge', 'KV-cache usage. 1 means 100 percent usage.'],
    promptTokens: ['vllm:prompt_tokens_total', 'counter', 'Number of prefill tokens processed.'],
    generationTokens: ['vllm:generation_tokens_total', 'counter', 'Number of generation tokens processed.'],
    requestsFinished: ['vllm:request_success_total', 'counter', 'Count of successfully processed requests.'],
    // Registered as vllm:num_preemptions (V1 loggers.py); prometheus_client appends _total, as wild/metrics/vllm.prom shows.
    preemptions: ['vllm:num_preemptions_total', 'counter', 'Cumulative number of preemption from the engine.'],
    // vLLM V1's counters (wild/metrics/vllm.prom); V0's gauge vllm:gpu_prefix_cache_hit_rate is gone from current releases.
    prefixCacheQueries: ['vllm:prefix_cache_queries_total', 'counter', 'Prefix cache queries, in terms of number of queried tokens.'],
    prefixCacheHits: ['vllm:prefix_cache_hits_total', 'counter', 'Prefix cache hits, in terms of number of cached tokens.'],
  },
  // SGLang 0.5.x: scheduler gauges (refreshed by the caller the way SGLang refreshes them) and
  // tokenizer counters, all labelled model_name (see ../../fixtures/reference/wild/metrics/sglang.prom).
  sglang: {
    running: ['sglang:num_running_reqs', 'gauge', 'The number of running requests'],
    waiting: ['sglang:num_queue_reqs', 'gauge', 'The number of requests in the waiting queue'],
    kvUsage: ['sglang:token_usage', 'gauge', 'The token usage'],
    promptTokens: ['sglang:prompt_tokens_total', 'counter', 'Number of prefill tokens processed.'],
    generationTokens: ['sglang:generation_tokens_total', 'counter', 'Number of generation tokens processed.'],
    requestsFinished: ['sglang:num_requests_total', 'counter', 'Number of requests processed.'],
    prefixCacheHitRate: ['sglang:cache_hit_rate', 'gauge', 'The cache hit rate'],
  },
  // Current llama.cpp (2025–2026): no KV-usage gauge, removed in PR #13660. The requests counter
  // the sim keeps is not one llama-server exports, so it is left out.
  'llama-server': {
    promptTokens: ['llamacpp:prompt_tokens_total', 'counter', 'Number of prompt tokens processed.'],
    generationTokens: ['llamacpp:tokens_predicted_total', 'counter', 'Number of generation tokens processed.'],
    running: ['llamacpp:requests_processing', 'gauge', 'Number of requests processing.'],
    waiting: ['llamacpp:requests_deferred', 'gauge', 'Number of requests deferred.'],
  },
}

function histogram(name: string, help: string, labels: string, count: number, sum: number): string[] {
  const withLe = labels === '' ? '{le="+Inf"}' : `${labels.slice(0, -1)},le="+Inf"}`
  return [
    `# HELP ${name} ${help}`,
    `# TYPE ${name} histogram`,
    `${name}_bucket${withLe} ${count}`,
    `${name}_sum${labels} ${sum}`,
    `${name}_count${labels} ${count}`,
  ]
}

function sample(name: string, type: 'gauge' | 'counter', help: string, labels: string, value: number): string[] {
  return [`# HELP ${name} ${help}`, `# TYPE ${name} ${type}`, `${name}${labels} ${value}`]
}

/** `{model_name="…"}` with Prometheus escaping; extra labels first. */
function labelSet(model: string, extra: Record<string, string> = {}): string {
  const escaped = model.replaceAll('\\', '\\\\').replaceAll('"', '\\"')
  const parts = [...Object.entries(extra).map(([k, v]) => `${k}="${v}"`), `model_name="${escaped}"`]
  return `{${parts.join(',')}}`
}

/** Whether a TensorRT-LLM version is of the 1.3 line or later (the `trtllm_` names). */
function trtllmPrefixed(version: string): boolean {
  const m = /^(\d+)\.(\d+)/.exec(version)
  if (m === null) return true
  const [major, minor] = [Number(m[1]), Number(m[2])]
  return major > 1 || (major === 1 && minor >= 3)
}

/**
 * TensorRT-LLM's `/prometheus/metrics`: up to 1.2 five unprefixed request series labelled
 * `engine_type="undefined",model_name="undefined"` (as in the wild trtllm.prom); from 1.3 the
 * `trtllm_` names with iteration gauges (with `enable_iter_perf_stats`), prefill/decode
 * histograms and token counters (tensorrt_llm/metrics/collector.py).
 */
function trtllmLines(c: SimCounters, t: SimTimings, shape: DialectShape): string[] {
  const labels = '{engine_type="undefined",model_name="undefined"}'
  const e2e = t.ttftSecondsSum + t.decodeSecondsSum
  const queue = Math.max(0, t.ttftSecondsSum - t.prefillSecondsSum)
  // Per-request decode time over its tokens, approximated with the mean output length.
  const tpot = t.count === 0 ? 0 : t.decodeSecondsSum / Math.max(1, c.generationTokens / t.count)
  if (!trtllmPrefixed(shape.version)) {
    return [
      ...sample('request_success_total', 'counter', 'Count of successfully processed requests.', labels, c.requestsFinished),
      ...histogram('e2e_request_latency_seconds', 'Histogram of end to end request latency in seconds.', labels, t.count, e2e),
      ...histogram('time_to_first_token_seconds', 'Histogram of time to first token in seconds.', labels, t.count, t.ttftSecondsSum),
      ...histogram('time_per_output_token_seconds', 'Histogram of time per output token in seconds.', labels, t.count, tpot),
      ...histogram('request_queue_time_seconds', 'Histogram of time spent in WAITING phase for request.', labels, t.count, queue),
    ]
  }
  const p = 'trtllm_'
  const iteration =
    shape.iterationStats === false
      ? []
      : [
          ...sample(`${p}num_requests_running`, 'gauge', 'Number of active requests', labels, c.running),
          ...sample(`${p}num_requests_waiting`, 'gauge', 'Number of queued requests', labels, c.waiting),
          ...sample(`${p}kv_cache_utilization`, 'gauge', 'KV cache utilization', labels, c.kvUsage),
        ]
  return [
    ...sample(`${p}request_success_total`, 'counter', 'Count of successfully processed requests.', labels, c.requestsFinished),
    ...histogram(`${p}e2e_request_latency_seconds`, 'Histogram of end to end request latency in seconds.', labels, t.count, e2e),
    ...histogram(`${p}time_to_first_token_seconds`, 'Histogram of time to first token in seconds.', labels, t.count, t.ttftSecondsSum),
    ...histogram(`${p}request_queue_time_seconds`, 'Histogram of time spent in WAITING phase for request.', labels, t.count, queue),
    ...histogram(
      `${p}request_prefill_time_seconds`,
      'Histogram of prefill (context) phase duration in seconds.',
      labels,
      t.count,
      t.prefillSecondsSum,
    ),
    ...histogram(
      `${p}request_decode_time_seconds`,
      'Histogram of decode (generation) phase duration in seconds.',
      labels,
      t.count,
      t.decodeSecondsSum,
    ),
    ...sample(`${p}prompt_tokens_total`, 'counter', 'Cumulative number of prompt (input) tokens processed.', labels, c.promptTokens),
    ...sample(
      `${p}generation_tokens_total`,
      'counter',
      'Cumulative number of generation (output) tokens produced.',
      labels,
      c.generationTokens,
    ),
    ...iteration,
  ]
}

/** The engine's timing metrics: vLLM's histograms, SGLang's request and stage histograms, llama.cpp's second counters. */
function timingLines(dialect: MetricsDialect, model: string, t: SimTimings): string[] {
  const labels = labelSet(model)
  if (dialect === 'vllm') {
    return [
      ...histogram('vllm:time_to_first_token_seconds', 'Histogram of time to first token in seconds.', labels, t.count, t.ttftSecondsSum),
      ...histogram(
        'vllm:request_prefill_time_seconds',
        'Histogram of time spent in PREFILL phase for request.',
        labels,
        t.count,
        t.prefillSecondsSum,
      ),
      ...histogram(
        'vllm:request_decode_time_seconds',
        'Histogram of time spent in DECODE phase for request.',
        labels,
        t.count,
        t.decodeSecondsSum,
      ),
    ]
  }
  if (dialect === 'sglang') {
    // SGLang 0.5.x observes per-stage latency only for the stages marked metrics_is_observed:
    // prefill_forward and request_process here; decode_loop is a tracing span, never exported.
    const stage = (name: string, sum: number): string[] => [
      `sglang:per_stage_req_latency_seconds_bucket${labelSet(model, { stage: name }).slice(0, -1)},le="+Inf"} ${t.count}`,
      `sglang:per_stage_req_latency_seconds_sum${labelSet(model, { stage: name })} ${sum}`,
      `sglang:per_stage_req_latency_seconds_count${labelSet(model, { stage: name })} ${t.count}`,
    ]
    return [
      ...histogram('sglang:time_to_first_token_seconds', 'Histogram of time to first token in seconds.', labels, t.count, t.ttftSecondsSum),
      ...histogram(
        'sglang:e2e_request_latency_seconds',
        'Histogram of End-to-end request latency in seconds',
        labels,
        t.count,
        t.ttftSecondsSum + t.decodeSecondsSum,
      ),
      '# HELP sglang:per_stage_req_latency_seconds The latency of each stage of requests.',
      '# TYPE sglang:per_stage_req_latency_seconds histogram',
      ...stage('prefill_forward', t.prefillSecondsSum),
      ...stage('request_process', 0.0001 * t.count),
    ]
  }
  if (dialect === 'llama-server') {
    return [
      '# HELP llamacpp:prompt_seconds_total Prompt process time',
      '# TYPE llamacpp:prompt_seconds_total counter',
      `llamacpp:prompt_seconds_total ${t.prefillSecondsSum}`,
      '# HELP llamacpp:tokens_predicted_seconds_total Predict process time',
      '# TYPE llamacpp:tokens_predicted_seconds_total counter',
      `llamacpp:tokens_predicted_seconds_total ${t.decodeSecondsSum}`,
    ]
  }
  return []
}

/**
 * Speculative decoding's counters as vLLM (`vllm:spec_decode_*`, labelled by engine and model, as
 * vllm/v1/spec_decode/metrics.py exports them) and llama.cpp (`llamacpp:spec_decode_*`, unlabelled)
 * export them; SGLang and TensorRT-LLM dialects export none here.
 */
function specDecodeLines(dialect: MetricsDialect, model: string, s: SimSpecCounters | null): string[] {
  if (s === null || (dialect !== 'vllm' && dialect !== 'llama-server')) return []
  const prefix = dialect === 'vllm' ? 'vllm' : 'llamacpp'
  const labels = (extra: Record<string, string> = {}): string => {
    if (dialect === 'vllm') return labelSet(model, { engine: '0', ...extra })
    const parts = Object.entries(extra).map(([k, v]) => `${k}="${v}"`)
    return parts.length === 0 ? '' : `{${parts.join(',')}}`
  }
  const counter = (name: string, help: string, value: number): string[] => sample(`${prefix}:${name}`, 'counter', help, labels(), value)
  return [
    ...counter('spec_decode_num_drafts_total', 'Number of spec decoding drafts.', s.drafts),
    ...counter('spec_decode_num_draft_tokens_total', 'Number of draft tokens.', s.draftTokens),
    ...counter('spec_decode_num_accepted_tokens_total', 'Number of accepted tokens.', s.acceptedTokens),
    `# HELP ${prefix}:spec_decode_num_accepted_tokens_per_pos_total Accepted tokens per draft position.`,
    `# TYPE ${prefix}:spec_decode_num_accepted_tokens_per_pos_total counter`,
    ...s.acceptedPerPosition.map(
      (n, p) => `${prefix}:spec_decode_num_accepted_tokens_per_pos_total${labels({ position: String(p) })} ${n}`,
    ),
  ]
}

/** The sim's counters in an engine's Prometheus text format (`# HELP`, `# TYPE`, samples). */
export function renderMetrics(
  dialect: MetricsDialect,
  model: string,
  c: SimCounters,
  t: SimTimings = { count: 0, ttftSecondsSum: 0, prefillSecondsSum: 0, decodeSecondsSum: 0 },
  shape: DialectShape = { version: '1.3.0' },
  spec: SimSpecCounters | null = null,
): string {
  if (dialect === 'trtllm') return `${trtllmLines(c, t, shape).join('\n')}\n`
  const labels = dialect === 'llama-server' ? '' : labelSet(model)
  const lines: string[] = []
  for (const [key, row] of Object.entries(NAMES[dialect]) as Array<[keyof SimCounters, Row]>) {
    lines.push(...sample(row[0], row[1], row[2], labels, c[key]))
  }
  // SGLang's retraction counter (metrics/collector.py) gets its series at the first retraction.
  if (dialect === 'sglang' && c.preemptions > 0) {
    lines.push(...sample('sglang:num_retracted_requests_total', 'counter', 'Total number of retracted requests.', labels, c.preemptions))
  }
  lines.push(...timingLines(dialect, model, t))
  lines.push(...specDecodeLines(dialect, model, spec))
  return `${lines.join('\n')}\n`
}

/** Where the dialect's engine serves Prometheus text: TensorRT-LLM under `/prometheus/metrics`. */
export function metricsRoute(dialect: MetricsDialect): string {
  return dialect === 'trtllm' ? '/prometheus/metrics' : '/metrics'
}

/** The engine's own version endpoint, as the dialect's engine answers it (SGLang: `/server_info`, alias `/get_server_info`). */
export function versionRoutes(dialect: MetricsDialect, version: string): { paths: string[]; body: Record<string, unknown> } {
  if (dialect === 'sglang') return { paths: ['/server_info', '/get_server_info'], body: { version, model_path: 'sim', tp_size: 1 } }
  if (dialect === 'llama-server') return { paths: ['/props'], body: { build_info: version, total_slots: 1 } }
  return { paths: ['/version'], body: { version } }
}
