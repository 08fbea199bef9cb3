import { ServegateError } from '../errors.ts'
import type { RequestRecord, RunRecord } from '../schema/run.ts'
import { codeOfStatus, httpStatusOf, requestFromTimes } from './common.ts'
import { assembleImport, type ImportedRun, runSpan } from './imported-record.ts'
import { type BenchImportOptions, describeSource } from './result-file.ts'
import { type NumpySummary, summaryMetrics } from './summary-metrics.ts'

/*
 * ray-project/llmperf `token_benchmark_ray.py` writes two files per run into --results-dir:
 * `<model>_<in>_<out>_summary.json` and `<model>_<in>_<out>_individual_responses.json`.
 *
 * Summary (`run_token_benchmark()`, `LLMPerfResults.to_dict()` in `src/llmperf/utils.py`, which
 * flattens nested dicts with `_`): `version` ("2023-08-31"), `name`, `model`, `mean_input_tokens`,
 * `stddev_input_tokens`, `mean_output_tokens`, `stddev_output_tokens`, `num_concurrent_requests`,
 * `additional_sampling_params`, `timestamp` (Unix s at write), then `metrics_summary()`:
 * `results_<metric>_quantiles_p25…p99` (pandas `Series.quantile`, linear), `_mean`, `_min`,
 * `_max`, `_stddev` (pandas `Series.std`: sample, ddof 1) over the requests without an error for
 * `inter_token_latency_s`, `ttft_s`, `end_to_end_latency_s`,
 * `request_output_throughput_token_per_s`, `number_input_tokens`, `number_output_tokens`;
 * `results_num_requests_started`, `results_error_rate`, `results_number_errors`,
 * `results_error_code_frequency` (a str of a dict), `results_mean_output_throughput_token_per_s`
 * (Σ output tokens ÷ test time), `results_num_completed_requests`,
 * `results_num_completed_requests_per_min`.
 *
 * Individual responses: a JSON array, one object per request (`metrics` of
 * `src/llmperf/ray_clients/openai_chat_completions_client.py`): `error_code` (null, the HTTP
 * status or −1), `error_msg`, `inter_token_latency_s`, `ttft_s` (0 when no content arrived),
 * `end_to_end_latency_s`, `request_output_throughput_token_per_s`, `number_total_tokens`,
 * `number_output_tokens` (the generated text re-tokenized with hf-internal-testing/llama-tokenizer),
 * `number_input_tokens` (the prompt's size by that tokenizer). Real file: ray-project/llmperf-leaderboard,
 * `raw_data/individual/anyscale_7b.json`.
 */

/** `importedFrom.schema` of a record imported from llmperf's results. */
const LLMPERF_FORMAT_ID = 'llmperf.token-benchmark'

const FIX = 'pass the *_summary.json or *_individual_responses.json that llmperf token_benchmark_ray.py writes, or pick another --from'

/** True for llmperf's flattened summary: used by `--from auto`. */
export function looksLikeLlmperfSummary(value: unknown): boolean {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return false
  const keys = Object.keys(value)
  return keys.includes('results_ttft_s_mean') || (keys.includes('num_concurrent_requests') && keys.some((k) => k.startsWith('results_')))
}

/** True for llmperf's individual responses (an array of request objects): used by `--from auto`. */
export function looksLikeLlmperfIndividual(value: unknown): boolean {
  if (!Array.isArray(value) || value.length === 0) return false
  const first = value[0] as Record<string, unknown> | null
  return first !== null && typeof first === 'object' && 'ttft_s' in first && 'end_to_end_latency_s' in first
}

function num(value: Record<string, unknown>, key: string): number | null {
  const v = value[key]
  return typeof v === 'number' && Number.isFinite(v) ? v : null
}

/** One metric of the summary, scaled (× 1000 for seconds → ms); min and max become p0 and p100. */
function llmperfSummary(value: Record<string, unknown>, stem: string, scale: number): NumpySummary | null {
  const at = (suffix: string): number | null => {
    const v = num(value, `results_${stem}_${suffix}`)
    return v === null ? null : v * scale
  }
  const percentiles = new Map<number, number>()
  for (const q of [25, 50, 75, 90, 95, 99]) {
    const v = at(`quantiles_p${q}`)
    if (v !== null) percentiles.set(q, v)
  }
  const min = at('min')
  const max = at('max')
  if (min !== null) percentiles.set(0, min)
  if (max !== null) percentiles.set(100, max)
  const mean = at('mean')
  if (mean === null && percentiles.size === 0) return null
  return { mean, median: percentiles.get(50) ?? null, std: at('stddev'), percentiles, max }
}

/** llmperf's own definitions, read from token_benchmark_ray.py and its OpenAI client. */
const DEFINITIONS = {
  clock: "llmperf's client clock: time.monotonic() in each Ray actor (one per concurrent stream)",
  ttft: "llmperf's ttft_s: request start to the first chunk whose delta.content is non-empty (reasoning deltas are not counted)",
  timeToFirstOutput: 'the same number as ttft: llmperf does not time reasoning separately',
  e2e: "llmperf's end_to_end_latency_s: request start to the end of the stream",
  itl:
    "not imported: llmperf's inter_token_latency_s is per request (ttft + Σ gaps) ÷ output tokens, TTFT included " +
    '("Standardize on ITL including the TTFT time", llmperf 2023-10): neither a pooled gap nor servegate\'s tpot',
  completionTokens:
    "llmperf's number_output_tokens: the generated text re-tokenized with hf-internal-testing/llama-tokenizer, " +
    "not the served model's tokenizer (client-count)",
  warmup: 'llmperf runs no warm-up; plan.warmupRequests is 0',
  plan:
    "plan.workload.promptTokens is llmperf's mean_input_tokens (sized with the Llama tokenizer, drawn around that mean " +
    'with stddev_input_tokens); plan.maxTokens is mean_output_tokens when stddev_output_tokens is 0, else null (each request drew its own)',
}

/** What the summary says about the run: shared by both files. */
interface LlmperfRun {
  model: string | null
  concurrency: number | null
  meanInput: number | null
  stddevInput: number | null
  meanOutput: number | null
  stddevOutput: number | null
  finished: Date | null
}

function runFacts(summary: Record<string, unknown> | null): LlmperfRun {
  const s = summary ?? {}
  const ts = num(s, 'timestamp')
  return {
    model: typeof s.model === 'string' && s.model !== '' ? s.model : null,
    concurrency: num(s, 'num_concurrent_requests'),
    meanInput: num(s, 'mean_input_tokens'),
    stddevInput: num(s, 'stddev_input_tokens'),
    meanOutput: num(s, 'mean_output_tokens'),
    stddevOutput: num(s, 'stddev_output_tokens'),
    finished: ts === null ? null : new Date(ts * 1000),
  }
}

function planOf(facts: LlmperfRun, fallbackPrompt: number): { promptTokens: number; maxTokens: number | null; estimator: string } {
  const prompt = facts.meanInput ?? fallbackPrompt
  return {
    promptTokens: Math.max(1, Math.round(prompt)),
    maxTokens: facts.meanOutput !== null && facts.stddevOutput === 0 ? Math.max(1, Math.round(facts.meanOutput)) : null,
    estimator:
      facts.meanInput === null
        ? 'mean of llmperf number_input_tokens (no summary beside the file)'
        : `llmperf mean_input_tokens ${facts.meanInput} (stddev ${facts.stddevInput ?? 'not recorded'}), counted with hf-internal-testing/llama-tokenizer`,
  }
}

/** The run's identity and plan, shared by both files: what the summary (when there is one) records. */
function runOf(
  facts: LlmperfRun,
  name: string,
  options: BenchImportOptions,
  wallClockMs: number | null,
  requests: number,
  fallbackPrompt: number,
): Omit<ImportedRun, 'measure' | 'facts'> {
  const plan = planOf(facts, fallbackPrompt)
  return {
    format: LLMPERF_FORMAT_ID,
    runId: `llmperf-${name}`,
    engine: null,
    model: options.model ?? facts.model ?? 'unknown',
    api: 'chat',
    ...runSpan(facts.finished, wallClockMs),
    wallClockMs,
    plan: {
      concurrency: Math.max(1, Math.round(facts.concurrency ?? 1)),
      requests,
      maxTokens: plan.maxTokens,
      warmupRequests: 0,
      promptTokens: plan.promptTokens,
      promptTokensEstimator: plan.estimator,
    },
  }
}

/**
 * Imports llmperf's summary as a summary-only record, or, with its individual responses
 * (`individual`, the companion `*_individual_responses.json`), a per-request record.
 */
export function importLlmperfSummary(value: unknown, options: BenchImportOptions & { individual?: unknown }): RunRecord {
  const source = describeSource(options)
  if (!looksLikeLlmperfSummary(value)) {
    throw new ServegateError('FILE_INVALID', `${source}: field "results_ttft_s_mean" is missing; ${FIX}`)
  }
  const s = value as Record<string, unknown>
  if (options.individual !== undefined) return importLlmperfIndividual(options.individual, { ...options, summary: s })
  const completed = num(s, 'results_num_completed_requests')
  if (completed === null) throw new ServegateError('FILE_INVALID', `${source}: field "results_num_completed_requests" is missing; ${FIX}`)
  const errors = num(s, 'results_number_errors')
  const perMin = num(s, 'results_num_completed_requests_per_min')
  // llmperf records no duration: completed ÷ (completed per minute) gives its test time back.
  const wallClockMs = perMin !== null && perMin > 0 ? (completed / perMin) * 60_000 : null
  const inputMean = num(s, 'results_number_input_tokens_mean')
  // Without an error count the requests started are the completed ones at least.
  const requests = Math.max(1, Math.round(num(s, 'results_num_requests_started') ?? completed + (errors ?? 0)))
  return assembleImport({
    ...runOf(runFacts(s), typeof s.name === 'string' ? s.name : 'run', options, wallClockMs, requests, inputMean ?? 1),
    measure: {
      perRequest: false,
      summary: summaryOf(s, completed, wallClockMs),
      completed,
      failed:
        errors === null
          ? { count: null, why: 'the summary has no results_number_errors' }
          : { count: errors, from: "llmperf's results_number_errors" },
    },
    facts: {
      tool: 'llmperf',
      read: `an llmperf summary (results version ${String(s.version ?? 'not recorded')})`,
      std: 'sample',
      definitions: {
        ...DEFINITIONS,
        throughput:
          "llmperf's results_mean_output_throughput_token_per_s (Σ output tokens of ok requests ÷ test time); " +
          'the wall clock is results_num_completed_requests ÷ results_num_completed_requests_per_min (llmperf records no duration)',
        promptTokens: "promptTokens and completionTokens hold llmperf's own summaries of number_input_tokens and number_output_tokens",
      },
      perRequestHint: 'put its *_individual_responses.json beside it to import per request',
    },
  })
}

/** The summary's figures as servegate's metrics: llmperf's own (pandas, sample std), nothing recomputed. */
function summaryOf(s: Record<string, unknown>, completed: number, wallClockMs: number | null): ReturnType<typeof summaryMetrics> {
  const outputMean = num(s, 'results_number_output_tokens_mean')
  const inputMean = num(s, 'results_number_input_tokens_mean')
  const perMin = num(s, 'results_num_completed_requests_per_min')
  return summaryMetrics({
    stats: {
      ttft: llmperfSummary(s, 'ttft_s', 1000),
      tpot: null,
      itl: null,
      e2e: llmperfSummary(s, 'end_to_end_latency_s', 1000),
      queueDelay: null,
      promptTokens: llmperfSummary(s, 'number_input_tokens', 1),
      completionTokens: llmperfSummary(s, 'number_output_tokens', 1),
    },
    completed,
    totalInputTokens: inputMean === null ? null : Math.round(inputMean * completed),
    totalOutputTokens: outputMean === null ? null : Math.round(outputMean * completed),
    outputThroughput: num(s, 'results_mean_output_throughput_token_per_s'),
    requestThroughput: perMin === null ? null : perMin / 60,
    wallClockMs,
    tokenSource: 'client-count',
    std: 'sample',
  })
}

/** One entry of the individual responses as a request record; a wrong shape throws naming the entry. */
function responseRecord(raw: unknown, index: number, source: string): RequestRecord {
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) {
    throw new ServegateError('FILE_INVALID', `${source}: entry [${index}] is not an object; ${FIX}`)
  }
  const r = raw as Record<string, unknown>
  for (const key of ['ttft_s', 'end_to_end_latency_s'] as const) {
    if (typeof r[key] !== 'number') throw new ServegateError('FILE_INVALID', `${source}: field "[${index}].${key}" is missing; ${FIX}`)
  }
  const failed = r.error_code !== null && r.error_code !== undefined
  const status = httpStatusOf(r.error_code)
  const ttftS = num(r, 'ttft_s') ?? 0
  const e2eS = num(r, 'end_to_end_latency_s') ?? 0
  return requestFromTimes({
    index,
    ttftMs: ttftS > 0 ? ttftS * 1000 : null,
    e2eMs: e2eS > 0 ? e2eS * 1000 : null,
    promptTokens: num(r, 'number_input_tokens'),
    completionTokens: num(r, 'number_output_tokens'),
    itlMs: null,
    startOffsetMs: null,
    tokenSource: 'client-count',
    error: failed
      ? {
          code: codeOfStatus(status),
          message: `llmperf error_code ${String(r.error_code)}: ${typeof r.error_msg === 'string' && r.error_msg !== '' ? r.error_msg : 'no message'}`,
          httpStatus: status,
        }
      : null,
  })
}

/**
 * Imports llmperf's individual responses: one request record per entry, servegate's own
 * distributions. `summary` (the companion `*_summary.json`) supplies model, concurrency and plan.
 */
export function importLlmperfIndividual(value: unknown, options: BenchImportOptions & { summary?: unknown }): RunRecord {
  const source = describeSource(options)
  if (!Array.isArray(value)) throw new ServegateError('FILE_INVALID', `${source}: is not a JSON array of requests; ${FIX}`)
  if (value.length === 0)
    throw new ServegateError('FILE_INVALID', `${source}: the array is empty, so there are no requests to import; ${FIX}`)
  const records = value.map((raw, index) => responseRecord(raw, index, source))
  const summary = options.summary !== null && typeof options.summary === 'object' ? (options.summary as Record<string, unknown>) : null
  const facts = runFacts(summary)
  const completed = records.filter((r) => r.status === 'ok').length
  const perMin = summary === null ? null : num(summary, 'results_num_completed_requests_per_min')
  // llmperf keeps no per-request start times: its test time comes back only from the summary.
  const e2eMax = Math.max(0, ...records.map((r) => r.e2eMs ?? 0))
  const wallClockMs = perMin !== null && perMin > 0 ? (completed / perMin) * 60_000 : e2eMax
  const prompts = records.flatMap((r) => (r.promptTokens === null ? [] : [r.promptTokens]))
  const meanPrompt = prompts.length === 0 ? 1 : prompts.reduce((a, b) => a + b, 0) / prompts.length
  const name = summary !== null && typeof summary.name === 'string' ? summary.name : 'individual'
  return assembleImport({
    ...runOf(facts, name, options, wallClockMs, records.length, meanPrompt),
    measure: { perRequest: true, records },
    facts: {
      tool: 'llmperf',
      read: 'llmperf individual responses',
      definitions: {
        ...DEFINITIONS,
        ...(facts.model === null && options.model === undefined
          ? {
              plan: `${DEFINITIONS.plan}; no *_summary.json beside the file, so model is "unknown" (pass --model) and concurrency 1 (unknown)`,
            }
          : {}),
        tpot: '(e2e − ttft) ÷ (output tokens − 1), derived by servegate from end_to_end_latency_s, ttft_s and number_output_tokens',
        throughput:
          perMin === null
            ? 'total completion tokens of ok requests ÷ the longest request (no summary beside the file, so the test time is unknown)'
            : "total completion tokens of ok requests ÷ llmperf's test time (results_num_completed_requests ÷ results_num_completed_requests_per_min)",
      },
      failureRule:
        'a request failed when error_code is not null (the HTTP status, or −1 for an exception); its code is derived from the status',
    },
  })
}
