import { z } from 'zod'
import { ServegateError } from '../errors.ts'
import type { Api, CompletionTokenSource, RunRecord } from '../schema/run.ts'
import {
  assembleRunRecord,
  type BenchImportOptions,
  buildRequests,
  checkListLengths,
  countEmptySuccesses,
  describeSource,
  describeTraffic,
  FAILED_UNKNOWN_KEY,
  invalidFieldError,
  positiveInt,
  readNumpySummary,
  runSpan,
  summaryMetrics,
  summaryOnlyMethodology,
} from './serving-bench.ts'

/** `importedFrom.schema` of a record imported from SGLang's `bench_serving` JSONL. */
export const SGLANG_FORMAT_ID = 'sglang.bench-serving'

const FIX = 'pass a line of the JSONL that `python -m sglang.bench_serving --output-file` appends, or pick another --from'

/**
 * Key spellings across SGLang versions, mapped to one canonical name before validation.
 * Read from `python/sglang/bench_serving.py` (`benchmark()`, the `result` dict appended to
 * `--output-file`) and its successor `python/sglang/benchmark/serving.py`; the variant that
 * dumps `BenchmarkMetrics.__dict__` is `save_results()` in `python/sglang/benchmark/metrics.py`.
 *
 * | canonical (servegate reads)        | other spelling                 | where the other spelling appears
 * |
 * | ---------------------------------- | ------------------------------ |
 * ------------------------------------------------------------------ |
 * | `total_input_tokens`               | `total_input`                  | `metrics.py` `save_results()` (`**metrics.__dict__`)
 * |
 * | `total_output_tokens`              | `total_output`                 | same
 * |
 * | `total_output_tokens_retokenized`  | `total_output_retokenized`     | same
 * |
 * | `<stat>_e2e_latency_ms`            | `<stat>_e2el_ms`               | vLLM's spelling; not seen in SGLang's source, accepted
 * defensively |
 * | top-level `input_lens`, `output_lens`, `ttfts`, `itls`, `errors` | the same under `details` | `metrics.py` `save_results()` with
 * `--output-details`   |
 *
 * Keys that only some versions write (all optional here): 2024 lines hold `backend`,
 * `dataset_name`, `request_rate`, token totals, `mean_/median_e2e_latency_ms`, `median_ttft_ms`,
 * `median_itl_ms`, `output_throughput`, `random_*`, `duration`, `completed` and nothing else;
 * later lines add `max_concurrency`, `request_throughput`, `input_throughput`,
 * `mean/median/std/p99` for `ttft`, `tpot`, `itl` (+ `p95_itl_ms`), `std/p99_e2e_latency_ms`,
 * `concurrency` (Σ e2e ÷ duration, the achieved mean), `accept_length`, and with
 * `--output-details` the per-request lists; recent lines add `tag`, `server_info`,
 * `total_input_text_tokens`, `total_input_vision_tokens`, `total_throughput`, `p90_*`/`p95_*`
 * for every metric, `max_output_tokens_per_s`, `max_concurrent_requests`, and `request_rate`
 * may be `"trace"`. `request_rate` is Python's bare `Infinity` when unlimited (not JSON;
 * {@link normalizePythonJson} reads it). SGLang writes no date and no model name.
 */
const KEY_ALIASES: ReadonlyArray<[canonical: string, alias: string]> = [
  ['total_input_tokens', 'total_input'],
  ['total_output_tokens', 'total_output'],
  ['total_output_tokens_retokenized', 'total_output_retokenized'],
]
const DETAIL_FIELDS = ['input_lens', 'output_lens', 'ttfts', 'itls', 'generated_texts', 'errors'] as const
const PER_REQUEST_FIELDS = ['input_lens', 'output_lens', 'ttfts', 'itls', 'errors'] as const

const num = z.number().nullable().optional()
const seconds = z.array(z.number())
const optionalInt = z.int().nullable().optional()

/** The fields of one SGLang `bench_serving` JSONL line that servegate reads (canonical spellings). */
export const SglangResult = z.looseObject({
  backend: z.string().min(1),
  tag: z.string().nullable().optional(),
  dataset_name: z.string().nullable().optional(),
  request_rate: z.union([z.number(), z.string()]).nullable().optional(),
  max_concurrency: z.int().positive().nullable().optional(),
  sharegpt_output_len: optionalInt,
  random_input_len: optionalInt,
  random_output_len: optionalInt,
  random_range_ratio: num,
  server_info: z.record(z.string(), z.unknown()).nullable().optional(),
  duration: z.number().positive(),
  completed: z.int().nonnegative(),
  total_input_tokens: z.int().nonnegative(),
  total_output_tokens: z.int().nonnegative(),
  total_output_tokens_retokenized: z.int().nonnegative().nullable().optional(),
  request_throughput: num,
  output_throughput: num,
  concurrency: num,
  accept_length: num,
  input_lens: z.array(z.int().nonnegative()).optional(),
  output_lens: z.array(z.int().nonnegative()).optional(),
  ttfts: seconds.optional(),
  itls: z.array(seconds).optional(),
  errors: z.array(z.string().nullable()).optional(),
})
export type SglangResult = z.infer<typeof SglangResult>

/**
 * Rewrites the spellings of {@link KEY_ALIASES} to their canonical names and lifts a nested
 * `details` object to the top level; returns which spellings it met (for the methodology).
 */
export function normalizeSglangKeys(value: unknown): { value: unknown; spellings: string[] } {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return { value, spellings: [] }
  const out: Record<string, unknown> = { ...(value as Record<string, unknown>) }
  const spellings: string[] = []
  for (const [canonical, alias] of KEY_ALIASES) {
    if (out[canonical] === undefined && out[alias] !== undefined) {
      out[canonical] = out[alias]
      spellings.push(`${alias} → ${canonical}`)
    }
  }
  for (const key of Object.keys(out)) {
    const m = /^(mean|median|std|max|p\d+(?:\.\d+)?)_e2el_ms$/.exec(key)
    const canonical = m === null ? null : `${m[1]}_e2e_latency_ms`
    if (canonical !== null && out[canonical] === undefined) {
      out[canonical] = out[key]
      if (!spellings.includes('*_e2el_ms → *_e2e_latency_ms')) spellings.push('*_e2el_ms → *_e2e_latency_ms')
    }
  }
  const details = out.details
  if (details !== null && typeof details === 'object' && !Array.isArray(details)) {
    let lifted = false
    for (const field of DETAIL_FIELDS) {
      const v = (details as Record<string, unknown>)[field]
      if (out[field] === undefined && v !== undefined) {
        out[field] = v
        lifted = true
      }
    }
    if (lifted) spellings.push('details.* → top level')
  }
  return { value: out, spellings }
}

/** True when a value has the shape of an SGLang `bench_serving` line: used by `--from auto`. */
export function looksLikeSglang(value: unknown): boolean {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return false
  const keys = Object.keys(value)
  return (
    keys.includes('total_output_tokens_retokenized') ||
    keys.includes('total_output_retokenized') ||
    keys.some((k) => /_e2e_latency_ms$/.test(k))
  )
}

/** vLLM writes these keys and SGLang never does; SGLang always writes a retokenized total. */
function isVllmShaped(value: unknown): boolean {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return false
  const keys = Object.keys(value)
  return !looksLikeSglang(value) && ['model_id', 'date', 'num_prompts', 'burstiness'].some((k) => keys.includes(k))
}

function apiOf(backend: string): Api | null {
  if (backend.endsWith('-chat')) return 'chat'
  if (['sglang-oai', 'vllm', 'lmdeploy'].includes(backend)) return 'completions'
  return null
}

function str(v: unknown): string | null {
  return typeof v === 'string' && v !== '' ? v : null
}

/** What a line's `server_info` says about the model and engine, and where it said it. */
export interface SglangServerFacts {
  model: string | null
  engine: string | null
  /** Where the model came from, for the methodology (e.g. `server_info.prefill[0].served_model_name`). */
  modelFrom: string | null
  /** Set for a prefill/decode-disaggregated router: its server counts. */
  disaggregated: { prefill: number; decode: number } | null
}

function serverEntries(v: unknown): Record<string, unknown>[] {
  return Array.isArray(v) ? v.filter((e): e is Record<string, unknown> => e !== null && typeof e === 'object' && !Array.isArray(e)) : []
}

/**
 * Reads model and engine version from `server_info`: a single server's flat dict, or a
 * prefill/decode-disaggregated router's `{ internal_states, prefill: [...], decode: [...] }`,
 * whose servers each carry their own `served_model_name` and `version` (they may differ).
 */
export function sglangServerFacts(info: Record<string, unknown> | null): SglangServerFacts {
  if (info === null) return { model: null, engine: null, modelFrom: null, disaggregated: null }
  const prefill = serverEntries(info.prefill)
  const decode = serverEntries(info.decode)
  if (prefill.length === 0 && decode.length === 0) {
    const served = str(info.served_model_name)
    const version = str(info.version)
    return {
      model: served ?? str(info.model_path),
      engine: version === null ? null : `sglang ${version}`,
      modelFrom: served !== null ? 'server_info.served_model_name' : str(info.model_path) !== null ? 'server_info.model_path' : null,
      disaggregated: null,
    }
  }
  let model: string | null = null
  let modelFrom: string | null = null
  for (const [role, servers] of [
    ['prefill', prefill],
    ['decode', decode],
  ] as const) {
    for (const [i, server] of servers.entries()) {
      for (const key of ['served_model_name', 'model_path'] as const) {
        if (model === null && str(server[key]) !== null) {
          model = str(server[key])
          modelFrom = `server_info.${role}[${i}].${key}`
        }
      }
    }
  }
  const versions = (servers: Record<string, unknown>[]): string[] => [...new Set(servers.flatMap((e) => str(e.version) ?? []))]
  const pv = versions(prefill)
  const dv = versions(decode)
  const all = [...new Set([...pv, ...dv])]
  const engine =
    all.length === 0
      ? null
      : all.length === 1
        ? `sglang ${all[0]} (prefill/decode disaggregated)`
        : `sglang ${pv.join('/') || 'unknown'} prefill + ${dv.join('/') || 'unknown'} decode`
  return { model, engine, modelFrom, disaggregated: { prefill: prefill.length, decode: decode.length } }
}

/** The length range SGLang's random dataset draws from: `[max(⌊len × ratio⌋, 1), len]`, exact at ratio ≥ 1. */
export function randomLengthRange(len: number | null | undefined, ratio: number | null | undefined): [number, number] | null {
  if (len === null || len === undefined) return null
  if (ratio === null || ratio === undefined || ratio >= 1) return [len, len]
  return [Math.max(Math.floor(len * Math.max(ratio, 0)), 1), len]
}

/** Validates one parsed SGLang line (either key spelling) and imports it; a wrong shape throws naming the field. */
export function parseSglangResult(value: unknown, options: BenchImportOptions): RunRecord {
  if (isVllmShaped(value)) {
    throw new ServegateError(
      'FILE_INVALID',
      `${describeSource(options)}: field "total_output_tokens_retokenized" is missing ` +
        "and the keys are vLLM's (model_id, date, num_prompts); pass --from vllm",
    )
  }
  const normalized = normalizeSglangKeys(value)
  const result = SglangResult.safeParse(normalized.value)
  if (!result.success) throw invalidFieldError(result.error, normalized.value, describeSource(options), FIX)
  return importSglangResult(result.data, options, normalized.spellings)
}

/**
 * Imports one SGLang `bench_serving` run (one JSONL line, canonical keys). With
 * `--output-details` lists, one request record per request (seconds → ms) and servegate's
 * own distributions; without them a summary-only record holding only SGLang's figures.
 */
export function importSglangResult(input: SglangResult, options: BenchImportOptions, spellings: readonly string[] = []): RunRecord {
  const source = describeSource(options)
  const info = input.server_info ?? null
  const facts = sglangServerFacts(info)
  const model = options.model ?? facts.model ?? 'unknown'
  const native = input.backend === 'sglang' || input.backend === 'sglang-native'
  // Recent native clients take meta_info.completion_tokens from the server; the versions that
  // write server_info are such versions. Otherwise output_lens may be the requested length.
  const tokenSource: CompletionTokenSource = native && info !== null ? 'usage' : 'client-count'
  const wallClockMs = input.duration * 1000
  const random = (input.dataset_name ?? '').startsWith('random')
  // The range ratio applies to both lengths; a line without it (older versions) leaves the range unknown.
  const ratioKnown = input.random_range_ratio !== undefined && input.random_range_ratio !== null
  const inputRange = random && ratioKnown ? randomLengthRange(input.random_input_len, input.random_range_ratio) : null
  const outputRange = random && ratioKnown ? randomLengthRange(input.random_output_len, input.random_range_ratio) : null
  const exact = (r: [number, number] | null): number | null => (r !== null && r[0] === r[1] ? r[0] : null)
  const plannedOutput = random ? exact(outputRange) : input.dataset_name === 'sharegpt' ? input.sharegpt_output_len : null
  const plannedInput = random ? exact(inputRange) : null
  const rangeText = (r: [number, number] | null, key: string): string =>
    r === null
      ? `${key} ${String(input[key as 'random_input_len'] ?? 'not recorded')} with no random_range_ratio in the line, so the range is unknown`
      : `drawn uniformly from [${r[0]}, ${r[1]}] (${key} ${r[1]}, random_range_ratio ${input.random_range_ratio})`
  const inputEstimator = (meanOf: string): string =>
    plannedInput !== null
      ? `SGLang random_input_len ${plannedInput} (random_range_ratio ${input.random_range_ratio}: every prompt that long)`
      : random
        ? `${meanOf}: SGLang random prompt lengths ${rangeText(inputRange, 'random_input_len')}, so no single planned size`
        : meanOf
  const traffic = describeTraffic(input.request_rate, input.max_concurrency)
  const lineNote = options.line === undefined ? '' : ` line ${options.line}`
  const spellingNote = spellings.length === 0 ? '' : `; key spellings mapped: ${spellings.join(', ')}`
  const retokenized = input.total_output_tokens_retokenized
  const common = {
    format: SGLANG_FORMAT_ID,
    runId: `sglang-${input.tag ?? input.backend}${options.line === undefined ? '' : `-line${options.line}`}`,
    engine: facts.engine,
    model,
    api: apiOf(input.backend),
    ...runSpan(null, wallClockMs),
    wallClockMs,
  }
  const methodology: Record<string, string> = {
    clock:
      "SGLang's client clock: time.perf_counter() in one asyncio process " +
      '(python/sglang/bench_serving.py, later python/sglang/benchmark/serving.py)',
    requestStart:
      "SGLang's st = time.perf_counter() taken just before session.post(): before the request is on the socket, connection setup included",
    ttft:
      "SGLang's ttft: send to the first chunk with non-empty text " +
      '(native /generate: cumulative text; OpenAI chat: delta.content, recent versions also reasoning_content)',
    timeToFirstOutput:
      'the same number as ttft: SGLang does not time reasoning and content separately ' +
      '(older chat clients ignore reasoning deltas, so there it is the first content)',
    itl:
      "SGLang's itl: gaps between chunks with non-empty text; " +
      "for the native backend a chunk's gap is divided evenly over the tokens it added (meta_info.completion_tokens)",
    completionTokens:
      "SGLang's output_lens: native backends take meta_info.completion_tokens " +
      '(recorded as usage when the line carries server_info, i.e. a recent client); ' +
      'OpenAI backends take usage.completion_tokens when the server put usage in a chunk ' +
      'and otherwise keep the requested max tokens; trt and truss always the requested length. ' +
      `This line is recorded as ${tokenSource}; total_output_tokens_retokenized` +
      (retokenized === undefined || retokenized === null ? ' (not in this line)' : ` = ${retokenized}`) +
      " is SGLang's re-tokenized cross-check",
    effectivePrefill:
      "input_lens / time to first output; input_lens is the dataset's planned prompt length " +
      "(recent versions: the server's prompt_tokens when reported)",
    throughput:
      "total completion tokens of ok requests / SGLang's duration " +
      '(from the first request to the end, recent versions including the post-run /server_info request)',
    queueDelay: 'not recorded by SGLang',
    sendLag: 'not recorded by SGLang',
    startOffset: 'not recorded by SGLang',
    warmup: "SGLang's --warmup-requests is not recorded in the line; plan.warmupRequests is null",
    failures:
      'a request failed when errors[i] is non-empty (HTTP reason phrase and body, or a Python traceback reduced to its last line); ' +
      'the code is derived from that text; timings SGLang kept before the failure stay, outside every distribution',
    plan:
      'plan.model ' +
      (options.model !== undefined
        ? 'given on import'
        : facts.modelFrom !== null
          ? `from ${facts.modelFrom}` +
            (facts.disaggregated === null
              ? ''
              : ` (a prefill/decode-disaggregated router: ${facts.disaggregated.prefill} prefill and ${facts.disaggregated.decode} decode servers; engine names each side's version)`)
          : `is not recorded by SGLang${info === null ? '' : ' (server_info names no model)'} ("unknown"; pass --model)`) +
      '; ' +
      'plan.maxTokens ' +
      (plannedOutput
        ? `is the line's ${random ? 'random_output_len (random_range_ratio ≥ 1: every request asked for that many)' : 'sharegpt_output_len'}`
        : random
          ? `is null: output lengths ${rangeText(outputRange, 'random_output_len')}`
          : 'is not recorded (null)') +
      '; ' +
      'plan.workload.seed is not recorded (null); ' +
      'SGLang records no date, so startedAt and finishedAt are null (the duration is the wall clock)',
  }

  const detailed = PER_REQUEST_FIELDS.some((f) => input[f] !== undefined)
  if (!detailed) {
    const completed = input.completed
    if (completed === 0) {
      throw new ServegateError(
        'FILE_INVALID',
        `${source}: field "completed" is 0 and the line has no per-request lists, so there is nothing to import; ${FIX}`,
      )
    }
    const record = input as Record<string, unknown>
    return assembleRunRecord({
      ...common,
      concurrency: input.max_concurrency ?? completed,
      requests: completed,
      maxTokens: plannedOutput === null || plannedOutput === undefined ? null : positiveInt(plannedOutput, 1),
      promptTokens: positiveInt(plannedInput ?? input.total_input_tokens / completed, 1),
      promptTokensEstimator: inputEstimator('SGLang total_input_tokens ÷ completed (mean prompt tokens)'),
      records: null,
      summary: summaryMetrics({
        stats: {
          ttft: readNumpySummary(record, ['ttft']),
          tpot: readNumpySummary(record, ['tpot']),
          itl: readNumpySummary(record, ['itl']),
          e2e: readNumpySummary(record, ['e2e_latency']),
          queueDelay: null,
        },
        completed,
        totalInputTokens: input.total_input_tokens,
        totalOutputTokens: input.total_output_tokens,
        outputThroughput: input.output_throughput ?? null,
        requestThroughput: input.request_throughput ?? null,
        wallClockMs,
        tokenSource,
      }),
      completed,
      failed: 0,
      methodology: {
        ...methodology,
        ...summaryOnlyMethodology('SGLang'),
        e2e: "SGLang's e2e latency: send to the last chunk read, [DONE] included",
        failures: 'failure codes are unknown in a summary-only import, so failures is empty',
        [FAILED_UNKNOWN_KEY]:
          'unknown: SGLang lines without --output-details record no failed count (completed counts only the successes); ' +
          'failed is recorded as 0, which here means unknown',
        import:
          `summary-only import of SGLang bench_serving${lineNote} written without --output-details; ${traffic}; ` +
          'plan.requests is completed (SGLang records no request count); ' +
          `requests is empty and nothing per-request is invented${spellingNote}`,
      },
    })
  }

  for (const field of PER_REQUEST_FIELDS) {
    if (input[field] === undefined) {
      throw new ServegateError(
        'FILE_INVALID',
        `${source}: field "${field}" is missing; an --output-details line holds ${PER_REQUEST_FIELDS.join(', ')} together; ${FIX}`,
      )
    }
  }
  const n = checkListLengths(
    { ttfts: input.ttfts, itls: input.itls, input_lens: input.input_lens, output_lens: input.output_lens, errors: input.errors },
    `${source}`,
    FIX,
  )
  if (n === 0) throw new ServegateError('FILE_INVALID', `${source}: field "ttfts" is empty, so the run has no requests to import; ${FIX}`)
  const records = buildRequests(
    {
      inputLens: input.input_lens ?? [],
      outputLens: input.output_lens ?? [],
      ttftsS: input.ttfts ?? [],
      itlsS: input.itls ?? [],
      errors: (input.errors ?? []).map((e) => e ?? ''),
      latenciesS: null,
      queueTimesS: null,
      startTimesS: null,
    },
    tokenSource,
  )
  const completed = records.filter((r) => r.status === 'ok').length
  if (completed + countEmptySuccesses(records) !== input.completed) {
    throw new ServegateError(
      'FILE_INVALID',
      `${source}: field "completed" is ${input.completed} but the per-request lists hold ${completed} requests with an empty errors[i]; ` +
        `the summary and the lists disagree, so the line was cut or edited; ${FIX}`,
    )
  }
  const inputs = input.input_lens ?? []
  return assembleRunRecord({
    ...common,
    concurrency: input.max_concurrency ?? n,
    requests: n,
    maxTokens: plannedOutput === null || plannedOutput === undefined ? null : positiveInt(plannedOutput, 1),
    promptTokens: positiveInt(plannedInput ?? inputs.reduce((a, b) => a + b, 0) / inputs.length, 1),
    promptTokensEstimator: inputEstimator('mean of SGLang input_lens'),
    records,
    summary: null,
    completed,
    failed: n - completed,
    methodology: {
      ...methodology,
      e2e: "ttft + Σ itl: the arrival of the last chunk with text (SGLang's own per-request latency, to [DONE], is not in the line)",
      import:
        `imported from SGLang bench_serving --output-details${lineNote}; ${traffic}; per-request values converted seconds → ms, ` +
        `distributions recomputed by servegate's rules over the ok requests${spellingNote}`,
    },
  })
}
