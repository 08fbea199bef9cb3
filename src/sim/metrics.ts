/** Which engine's Prometheus names the sim's `/metrics` and version endpoint imitate. */
export type MetricsDialect = 'vllm' | 'sglang' | 'llama-server'

export interface SimCounters {
  running: number
  waiting: number
  /** Fraction of the KV budget in use, 0..1. */
  kvUsage: number
  promptTokens: number
  generationTokens: number
  requestsFinished: number
}

/** Per-request timing totals of the finished requests that produced output (the engine's own view). */
export interface SimTimings {
  /** Requests counted in the sums. */
  count: number
  /** Arrival to first token: queueing and prefill. */
  ttftSecondsSum: number
  /** Modelled prefill compute: prompt tokens ÷ prefill rate. */
  prefillSecondsSum: number
  /** First token to the last. */
  decodeSecondsSum: number
}

const NAMES: Record<MetricsDialect, Record<keyof SimCounters, [name: string, type: 'gauge' | 'counter', help: string]>> = {
  vllm: {
    running: ['vllm:num_requests_running', 'gauge', 'Number of requests in model execution batches.'],
    waiting: ['vllm:num_requests_waiting', 'gauge', 'Number of requests waiting to be processed.'],
    kvUsage: ['vllm:kv_cache_usage_perc', 'gauge', 'KV-cache usage. 1 means 100 percent usage.'],
    promptTokens: ['vllm:prompt_tokens_total', 'counter', 'Number of prefill tokens processed.'],
    generationTokens: ['vllm:generation_tokens_total', 'counter', 'Number of generation tokens processed.'],
    requestsFinished: ['vllm:request_success_total', 'counter', 'Count of successfully processed requests.'],
  },
  sglang: {
    running: ['sglang:num_running_reqs', 'gauge', 'The number of running requests.'],
    waiting: ['sglang:num_queue_reqs', 'gauge', 'The number of requests in the waiting queue.'],
    kvUsage: ['sglang:token_usage', 'gauge', 'The token usage.'],
    promptTokens: ['sglang:prompt_tokens_total', 'counter', 'Number of prefill tokens processed.'],
    generationTokens: ['sglang:generation_tokens_total', 'counter', 'Number of generation tokens processed.'],
    requestsFinished: ['sglang:num_requests_total', 'counter', 'Number of requests processed.'],
  },
  'llama-server': {
    running: ['llamacpp:requests_processing', 'gauge', 'Number of requests processing.'],
    waiting: ['llamacpp:requests_deferred', 'gauge', 'Number of requests deferred.'],
    kvUsage: ['llamacpp:kv_cache_usage_ratio', 'gauge', 'KV-cache usage. 1 means 100 percent usage.'],
    promptTokens: ['llamacpp:prompt_tokens_total', 'counter', 'Number of prompt tokens processed.'],
    generationTokens: ['llamacpp:tokens_predicted_total', 'counter', 'Number of generation tokens processed.'],
    requestsFinished: ['llamacpp:n_decode_total', 'counter', 'Total number of llama_decode() calls'],
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

/** The engine's timing metrics: vLLM's histograms, llama.cpp's second counters. */
function timingLines(dialect: MetricsDialect, labels: string, t: SimTimings): string[] {
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

/** The sim's counters in an engine's Prometheus text format (`# HELP`, `# TYPE`, samples). */
export function renderMetrics(
  dialect: MetricsDialect,
  model: string,
  c: SimCounters,
  t: SimTimings = { count: 0, ttftSecondsSum: 0, prefillSecondsSum: 0, decodeSecondsSum: 0 },
): string {
  const labels = dialect === 'llama-server' ? '' : `{model_name="${model.replaceAll('\\', '\\\\').replaceAll('"', '\\"')}"}`
  const lines: string[] = []
  for (const key of Object.keys(NAMES[dialect]) as Array<keyof SimCounters>) {
    const [name, type, help] = NAMES[dialect][key]
    lines.push(`# HELP ${name} ${help}`, `# TYPE ${name} ${type}`, `${name}${labels} ${c[key]}`)
  }
  lines.push(...timingLines(dialect, labels, t))
  return `${lines.join('\n')}\n`
}

/** The engine's own version endpoint, as the dialect's engine answers it. */
export function versionRoute(dialect: MetricsDialect, version: string): { path: string; body: Record<string, unknown> } {
  if (dialect === 'sglang') return { path: '/get_server_info', body: { version, model_path: 'sim', tp_size: 1 } }
  if (dialect === 'llama-server') return { path: '/props', body: { build_info: version, total_slots: 1 } }
  return { path: '/version', body: { version } }
}
