import { PERCENTILE_METHOD, P99_MIN_SAMPLES, RETOKENIZE_TOLERANCE } from '../schema/run.ts'

/** The methodology strings every servegate run record carries, so evidence explains itself. */
export const METHODOLOGY: Readonly<Record<string, string>> = {
  clock:
    'client monotonic clock (process.hrtime, one clock for every client thread); each network read is timestamped in the socket data callback, ' +
    'before HTTP framing, SSE or JSON parsing, ' +
    'and every event in a read shares that timestamp',
  requestStart: 'the moment the request bytes were handed to the socket (one write of its head and body)',
  timeToFirstOutput: 'request start to the first non-empty streamed delta, reasoning or content',
  ttft: 'request start to the first non-empty streamed content delta',
  e2e: 'request start to the end of the stream ([DONE] or the end of the response)',
  generation: 'e2e minus time to first output',
  completionTokens:
    'usage.completion_tokens (stream_options.include_usage); when the server sends no usage, the count of output chunks, ' +
    'with source client-count (a chunk is not a token)',
  usageCheck:
    "each reply's usage is checked against what streamed: prompt_tokens and completion_tokens must be non-negative integers, " +
    'completion_tokens at least 1 and at most plan.usageCheck.maxTokensPerChunk per streamed chunk carrying text; where the engine ' +
    'has POST /tokenize, the streamed text (reasoning and content) is counted once per request after the measured requests and ' +
    `completion_tokens must agree within ${RETOKENIZE_TOLERANCE.tokens} tokens + ${RETOKENIZE_TOLERANCE.share * 100}% of that count; ` +
    "a reply that fails is USAGE_INVALID: its counts are those the client saw (streamed chunks), the server's kept as reportedUsage",
  decode: '(completion tokens − 1) / generation seconds; completion tokens may include reasoning tokens',
  tpot: 'generation / (completion tokens − 1), ms per output token after the first',
  effectivePrefill: 'usage.prompt_tokens / time to first output in seconds; includes queueing, scheduling, prefill and first-token work',
  itl: 'gaps between consecutive chunks carrying a non-empty delta; chunks that arrived in one read have a gap of 0',
  throughput: 'total completion tokens of ok requests / cell wall clock (first measured send to last measured end); request rate likewise',
  queueDelay:
    'closed loop: time a request waited for a concurrency slot after it was ready (at the cell start); ' +
    'open loop: time it waited for the in-flight cap after its scheduled time',
  sendLag:
    'time from the moment a request could be sent (a free slot; open loop: its scheduled time, or the cap freeing) ' +
    "to its bytes on the socket: the harness's own lateness; a p99 over the bound flags the cell harness-limited",
  openLoop:
    'open-loop cells send each request at a time drawn (or read from a trace) before the cell starts, by a timer, ' +
    'whatever the engine does; scheduledOffsetMs is that time from the cell start',
  goodput:
    'with an SLO: a request is good when it finished ok and met every objective ' +
    '(ttft, tpot, e2e, and its own nearest-rank ITL percentile); a failed request is never good; ' +
    'goodput = good requests / cell wall clock; the good share has a Wilson 95% interval',
  distributions:
    'request-level count, mean, sample standard deviation, normal-approximation 95% interval for the mean (mean ± 1.96·sd/√n), ' +
    `min, p25, p50, p75, p90, p95, p99, max; ${PERCENTILE_METHOD} percentiles (rank ⌈p·n⌉, 1-based)`,
  p99: `descriptive only below ${P99_MIN_SAMPLES} samples`,
  failures: 'failed requests keep their sanitized error and partial timings but enter no distribution',
  warmup: 'warm-up requests run before the measured ones, at the same concurrency, with their own prompts, and are not recorded',
}
