import { z } from 'zod'
import { ServegateError } from '../errors.ts'
import type { Api, RequestRecord, RunRecord } from '../schema/run.ts'
import { checkListLengths, invalidFieldError } from './field-check.ts'
import type { FailedCount } from './import-methodology.ts'
import { assembleImport, type ImportedRun, positiveInt, runSpan } from './imported-record.ts'
import { type BenchImportOptions, describeSource } from './result-file.ts'
import { buildRequests, countEmptySuccesses, describeTraffic, readNumpySummary } from './serving-bench.ts'
import { looksLikeSglang } from './sglang.ts'
import { summaryMetrics } from './summary-metrics.ts'

/** `importedFrom.schema` of a record imported from vLLM's benchmark results. */
export const VLLM_FORMAT_ID = 'vllm.save-result'

const FIX = 'pass the JSON that `vllm bench serve --save-result` (or benchmarks/benchmark_serving.py) writes, or pick another --from'

const num = z.number().nullable().optional()
const seconds = z.array(z.number())

/**
 * The fields of a vLLM `--save-result` JSON that servegate reads; others pass through.
 *
 * Written by `main_async()` in `vllm/benchmarks/serve.py` (the `vllm bench serve` CLI; before
 * that `main()` in `benchmarks/benchmark_serving.py`): `date`, `backend`, `model_id`,
 * `tokenizer_id`, `num_prompts`, `request_rate` (`"inf"` or a number), `burstiness`,
 * `max_concurrency`, then the dict `benchmark()` returns: `duration` (s), `completed`
 * (successes), `failed` (newer), token totals, throughputs, and for each metric in
 * `--percentile-metrics` (`ttft`, `tpot`, `itl`, `e2el`, newer also `client_queue_time`)
 * `mean_<m>_ms`, `median_<m>_ms`, `std_<m>_ms` and `p<NN>_<m>_ms` per `--metric-percentiles`.
 * With `--save-detailed` the per-request lists stay: `input_lens`, `output_lens`, `ttfts` (s),
 * `itls` (s, a list per request), `generated_texts`, `errors`; newer versions also keep
 * `latencies`, `start_times` and `queue_times` (s) even without it.
 */
const VllmResult = z.looseObject({
  date: z.string().nullable().optional(),
  backend: z.string().nullable().optional(),
  label: z.string().nullable().optional(),
  model_id: z.string().min(1),
  num_prompts: z.int().nullable().optional(),
  request_rate: z.union([z.number(), z.string()]).nullable().optional(),
  burstiness: num,
  max_concurrency: z.int().positive().nullable().optional(),
  duration: z.number().positive(),
  completed: z.int().nonnegative(),
  failed: z.int().nonnegative().nullable().optional(),
  total_input_tokens: z.int().nonnegative(),
  total_output_tokens: z.int().nonnegative(),
  request_throughput: num,
  output_throughput: num,
  input_lens: z.array(z.int().nonnegative()).optional(),
  output_lens: z.array(z.int().nonnegative()).optional(),
  ttfts: seconds.optional(),
  itls: z.array(seconds).optional(),
  errors: z.array(z.string().nullable()).optional(),
  latencies: seconds.optional(),
  start_times: seconds.optional(),
  queue_times: seconds.optional(),
})
type VllmResult = z.infer<typeof VllmResult>

/** True when a value has the shape of a vLLM result (and not SGLang's): used by `--from auto`. */
export function looksLikeVllm(value: unknown): boolean {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return false
  const keys = Object.keys(value)
  const hasLatency = keys.includes('mean_ttft_ms') || keys.some((k) => /_e2el_ms$/.test(k))
  return keys.includes('duration') && hasLatency && (keys.includes('model_id') || keys.includes('date') || keys.includes('backend'))
}

/** vLLM's `date` is `%Y%m%d-%H%M%S` in the benchmark host's local time, zone not recorded. */
function parseVllmDate(date: string | null | undefined): Date | null {
  const m = /^(\d{4})(\d{2})(\d{2})-(\d{2})(\d{2})(\d{2})$/.exec(date ?? '')
  if (m === null) return null
  const [y, mo, d, h, mi, s] = m.slice(1).map(Number) as [number, number, number, number, number, number]
  return new Date(Date.UTC(y, mo - 1, d, h, mi, s))
}

function apiOf(backend: string | null | undefined): Api | null {
  if (backend === 'openai-chat' || backend === 'vllm-chat') return 'chat'
  if (backend === 'openai' || backend === 'vllm') return 'completions'
  return null
}

const PER_REQUEST_FIELDS = ['input_lens', 'output_lens', 'ttfts', 'itls', 'errors'] as const

/**
 * Says what servegate did with the requests vLLM counted successful although they produced
 * nothing, and why its TTFT then differs from vLLM's `mean_ttft_ms` (which averaged their 0.0 in).
 */
function emptySuccessNote(input: VllmResult, records: readonly RequestRecord[], empties: number): string {
  const ttfts = records.flatMap((r) => (r.status === 'ok' && r.ttftMs !== null ? [r.ttftMs] : []))
  const mean = ttfts.length === 0 ? null : ttfts.reduce((a, b) => a + b, 0) / ttfts.length
  const fileMean = (input as Record<string, unknown>).mean_ttft_ms
  const ms = (v: number): string => `${v.toFixed(2)} ms`
  const comparison =
    typeof fileMean === 'number' && mean !== null
      ? `; vLLM's mean_ttft_ms ${ms(fileMean)} averages in their 0.0 ms TTFT over ${input.completed} requests, ` +
        `servegate's TTFT over the ${ttfts.length} others is ${ms(mean)} ` +
        `(the same sum: ${ms(fileMean)} × ${input.completed} ÷ ${ttfts.length}); its median and p99 differ for the same reason`
      : ''
  return (
    `${empties} request(s) vLLM counted successful (empty errors[i]) produced no output: 0 output tokens, no chunk, ttft 0.0. ` +
    `servegate records them as failed EMPTY_COMPLETION, so completed is ${input.completed - empties}, not vLLM's ${input.completed}${comparison}`
  )
}

/** Validates a parsed vLLM result and imports it; a wrong shape throws naming the field. */
export function parseVllmResult(value: unknown, options: BenchImportOptions): RunRecord {
  // vLLM always writes model_id; SGLang never does.
  if (looksLikeSglang(value) && !Object.hasOwn(value as object, 'model_id')) {
    throw new ServegateError(
      'FILE_INVALID',
      `${describeSource(options)}: field "model_id" is missing ` +
        "and the keys are SGLang's (*_e2e_latency_ms, total_output_tokens_retokenized); pass --from sglang",
    )
  }
  const result = VllmResult.safeParse(value)
  if (!result.success) throw invalidFieldError(result.error, value, describeSource(options), FIX)
  return importVllmResult(result.data, options)
}

/**
 * Imports a vLLM `--save-result` run. With `--save-detailed` lists, one request record per
 * request (seconds → ms) and servegate's own distributions over the ok ones; without them a
 * summary-only record: `requests` is empty and the distributions hold only vLLM's figures.
 */
function importVllmResult(input: VllmResult, options: BenchImportOptions): RunRecord {
  const detailed = PER_REQUEST_FIELDS.some((f) => input[f] !== undefined)
  const wallClockMs = input.duration * 1000
  const run = {
    format: VLLM_FORMAT_ID,
    runId: `vllm-${input.label ?? input.backend ?? 'bench'}-${input.date ?? 'undated'}`,
    engine: null,
    model: options.model ?? input.model_id,
    api: apiOf(input.backend),
    ...runSpan(parseVllmDate(input.date), wallClockMs),
    wallClockMs,
  }
  return assembleImport({ ...run, ...(detailed ? vllmPerRequest(input, options) : vllmSummaryOnly(input, options)) })
}

/** vLLM's own definitions, read from its benchmark client: the same for both shapes of file. */
const DEFINITIONS = {
  clock:
    "vLLM's client clock: time.perf_counter() in one asyncio process " +
    '(vllm/benchmarks/lib/endpoint_request_func.py; older benchmarks/backend_request_func.py)',
  requestStart:
    "vLLM's st = time.perf_counter() taken just before session.post(): before the request is on the socket, connection setup included",
  ttft:
    "vLLM's ttft: send to the first SSE chunk carrying `choices` " +
    '(recent versions count any such chunk, even an empty role or reasoning delta; older ones the first non-empty text/content)',
  timeToFirstOutput: 'the same number as ttft: vLLM does not time reasoning and content separately',
  itl: "vLLM's itl: gaps between consecutive chunks carrying `choices` (one chunk may hold several tokens)",
  completionTokens:
    "vLLM's output_lens: usage.completion_tokens where the server sent usage (recent vLLM requests stream_options.include_usage), " +
    'else vLLM re-tokenizes the generated text ' +
    '("may inflate the output token count slightly"; 1 without a tokenizer). ' +
    'The file does not say which, so the source is recorded as client-count: not attested by the server',
  effectivePrefill:
    'input_lens / time to first output; input_lens is usage.prompt_tokens where the server sent it (recent versions), ' +
    "else the dataset's planned prompt length",
  throughput: "total completion tokens of ok requests / vLLM's duration (first request created to the last one finished)",
  sendLag: 'not recorded by vLLM',
  warmup: "vLLM's --num-warmups is not recorded in the file; plan.warmupRequests is null",
  plan:
    'plan.maxTokens and plan.workload.seed are not recorded by vLLM (null); ' +
    "finishedAt is vLLM's date (the benchmark host's local time when the run ended, zone not recorded, read as UTC) " +
    'and startedAt that minus duration (both null without a date)',
}

function lineNote(options: BenchImportOptions): string {
  return options.line === undefined ? '' : ` (line ${options.line})`
}

/** vLLM's failed count: its own, else num_prompts − completed, else never recorded. */
function failedCount(input: VllmResult, requests: number): FailedCount {
  if (input.failed !== undefined && input.failed !== null) return { count: input.failed, from: "vLLM's failed count" }
  if (input.num_prompts === undefined || input.num_prompts === null) {
    return { count: null, why: 'this vLLM version writes neither failed nor num_prompts' }
  }
  return { count: Math.max(0, requests - input.completed), from: 'not written by this vLLM version; derived as num_prompts − completed' }
}

/** A file written without --save-detailed: vLLM's summaries, nothing per request. */
function vllmSummaryOnly(input: VllmResult, options: BenchImportOptions): Pick<ImportedRun, 'plan' | 'measure' | 'facts'> {
  const completed = input.completed
  const requests = positiveInt(input.num_prompts ?? completed + (input.failed ?? 0), 0)
  if (requests === 0) {
    throw new ServegateError(
      'FILE_INVALID',
      `${describeSource(options)}: field "num_prompts" is missing and "completed" is 0, so the run has no requests to import; ${FIX}`,
    )
  }
  const record = input as Record<string, unknown>
  const stats = {
    ttft: readNumpySummary(record, ['ttft']),
    tpot: readNumpySummary(record, ['tpot']),
    itl: readNumpySummary(record, ['itl']),
    e2e: readNumpySummary(record, ['e2el']),
    queueDelay: readNumpySummary(record, ['client_queue_time']),
  }
  const summary = summaryMetrics({
    stats,
    completed,
    totalInputTokens: input.total_input_tokens,
    totalOutputTokens: input.total_output_tokens,
    outputThroughput: input.output_throughput ?? null,
    requestThroughput: input.request_throughput ?? null,
    wallClockMs: input.duration * 1000,
    tokenSource: 'client-count',
  })
  return {
    plan: {
      concurrency: input.max_concurrency ?? requests,
      requests,
      maxTokens: null,
      promptTokens: positiveInt(completed > 0 ? input.total_input_tokens / completed : null, 1),
      promptTokensEstimator: 'vLLM total_input_tokens ÷ completed (mean actual prompt tokens; vLLM records no plan)',
    },
    measure: { perRequest: false, summary, completed, failed: failedCount(input, requests) },
    facts: {
      tool: 'vLLM',
      read: `a vLLM --save-result file written without --save-detailed${lineNote(options)}`,
      notes: [describeTraffic(input.request_rate, input.max_concurrency, input.burstiness)],
      definitions: {
        ...DEFINITIONS,
        e2e: "vLLM's e2el: send to the last chunk carrying `choices` (older versions: to [DONE])",
        queueDelay: "vLLM's client_queue_time summary where written (wait for the --max-concurrency semaphore); else not recorded",
      },
    },
  }
}

/** Checks a --save-detailed file's lists (all present, one entry per request); returns the request count. */
function checkVllmLists(input: VllmResult, source: string): number {
  for (const field of PER_REQUEST_FIELDS) {
    if (input[field] === undefined) {
      throw new ServegateError(
        'FILE_INVALID',
        `${source}: field "${field}" is missing; a --save-detailed file holds ${PER_REQUEST_FIELDS.join(', ')} together; ${FIX}`,
      )
    }
  }
  const { ttfts, itls, input_lens, output_lens, errors, latencies, start_times, queue_times } = input
  const n = checkListLengths({ ttfts, itls, input_lens, output_lens, errors, latencies, start_times, queue_times }, source, FIX)
  if (n === 0) throw new ServegateError('FILE_INVALID', `${source}: field "ttfts" is empty, so the run has no requests to import; ${FIX}`)
  return n
}

/** Checks the file's own `completed` against the lists: they disagree only in a cut or edited file. */
function checkCompleted(input: VllmResult, records: readonly RequestRecord[], source: string): void {
  const counted = records.filter((r) => r.status === 'ok').length + countEmptySuccesses(records)
  if (counted !== input.completed) {
    throw new ServegateError(
      'FILE_INVALID',
      `${source}: field "completed" is ${input.completed} but the per-request lists hold ${counted} requests with an empty errors[i]; ` +
        `the summary and the lists disagree, so the file was cut or edited; ${FIX}`,
    )
  }
}

/** A --save-detailed file: one record per request, servegate's own distributions. */
function vllmPerRequest(input: VllmResult, options: BenchImportOptions): Pick<ImportedRun, 'plan' | 'measure' | 'facts'> {
  const source = describeSource(options)
  const n = checkVllmLists(input, source)
  const records = buildRequests(
    {
      inputLens: input.input_lens ?? [],
      outputLens: input.output_lens ?? [],
      ttftsS: input.ttfts ?? [],
      itlsS: input.itls ?? [],
      errors: (input.errors ?? []).map((e) => e ?? ''),
      latenciesS: input.latencies ?? null,
      queueTimesS: input.queue_times ?? null,
      startTimesS: input.start_times ?? null,
    },
    'client-count',
  )
  checkCompleted(input, records, source)
  const inputs = input.input_lens ?? []
  const empties = countEmptySuccesses(records)
  return {
    plan: {
      concurrency: input.max_concurrency ?? n,
      requests: n,
      maxTokens: null,
      promptTokens: positiveInt(inputs.reduce((a, b) => a + b, 0) / inputs.length, 1),
      promptTokensEstimator: 'mean of vLLM input_lens (actual prompt tokens; vLLM records no plan)',
    },
    measure: { perRequest: true, records },
    facts: {
      tool: 'vLLM',
      read: `a vLLM --save-result --save-detailed file${lineNote(options)}`,
      notes: [describeTraffic(input.request_rate, input.max_concurrency, input.burstiness)],
      definitions: {
        ...DEFINITIONS,
        ...perRequestDefinitions(input),
        ...(empties === 0 ? {} : { emptySuccesses: emptySuccessNote(input, records, empties) }),
      },
      failureRule:
        'a request failed when errors[i] is non-empty ' +
        '(HTTP reason phrase, a Python traceback reduced to its last line, or "Never received a valid chunk"); ' +
        'the code is derived from that text; timings vLLM kept before the failure stay, outside every distribution',
    },
  }
}

/** What a --save-detailed file's lists define, by what this vLLM version kept. */
function perRequestDefinitions(input: VllmResult): Record<string, string> {
  return {
    e2e:
      input.latencies === undefined
        ? 'ttft + Σ itl: the arrival of the last chunk carrying `choices` ' +
          '(this vLLM version keeps no per-request latency; older versions measured theirs to [DONE])'
        : "vLLM's per-request latencies: send to the last chunk carrying `choices` (the trailing usage chunk and [DONE] excluded)",
    queueDelay:
      input.queue_times === undefined
        ? 'not recorded by this vLLM version'
        : "vLLM's queue_times (client_queue_time): the wait for the --max-concurrency semaphore",
    startOffset:
      input.start_times === undefined
        ? 'not recorded by this vLLM version'
        : "vLLM's start_times relative to the first send (vLLM's own benchmark start is not recorded)",
  }
}
