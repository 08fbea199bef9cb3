import { z } from 'zod'
import { ServegateError } from '../errors.ts'
import type { Api, CompletionTokenSource, RunRecord } from '../schema/run.ts'
import { checkListLengths, invalidFieldError } from './field-check.ts'
import { assembleImport, type ImportedRun, positiveInt, runSpan } from './imported-record.ts'
import { type BenchImportOptions, describeSource } from './result-file.ts'
import { buildRequests, countEmptySuccesses, describeTraffic, readNumpySummary } from './serving-bench.ts'
import { summaryMetrics } from './summary-metrics.ts'

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
const SglangResult = z.looseObject({
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
type SglangResult = z.infer<typeof SglangResult>

/**
 * Rewrites the spellings of {@link KEY_ALIASES} to their canonical names and lifts a nested
 * `details` object to the top level; returns which spellings it met (for the methodology).
 */
function normalizeSglangKeys(value: unknown): { value: unknown; spellings: string[] } {
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
interface SglangServerFacts {
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
function sglangServerFacts(info: Record<string, unknown> | null): SglangServerFacts {
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
function randomLengthRange(len: number | null | undefined, ratio: number | null | undefined): [number, number] | null {
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
function importSglangResult(input: SglangResult, options: BenchImportOptions, spellings: readonly string[] = []): RunRecord {
  const facts = sglangServerFacts(input.server_info ?? null)
  const wallClockMs = input.duration * 1000
  const run = {
    format: SGLANG_FORMAT_ID,
    runId: `sglang-${input.tag ?? input.backend}${options.line === undefined ? '' : `-line${options.line}`}`,
    engine: facts.engine,
    model: options.model ?? facts.model ?? 'unknown',
    api: apiOf(input.backend),
    ...runSpan(null, wallClockMs),
    wallClockMs,
  }
  const line: SglangLine = { input, options, spellings, server: facts, lengths: plannedLengths(input) }
  const detailed = PER_REQUEST_FIELDS.some((f) => input[f] !== undefined)
  return assembleImport({ ...run, ...(detailed ? sglangPerRequest(line) : sglangSummaryOnly(line)) })
}

/** One validated line and what was read from it, shared by the steps of its import. */
interface SglangLine {
  input: SglangResult
  options: BenchImportOptions
  /** Key spellings mapped to the canonical ones (for the methodology). */
  spellings: readonly string[]
  server: SglangServerFacts
  lengths: PlannedLengths
}

/** The prompt and output lengths SGLang's dataset planned, as far as the line records them. */
interface PlannedLengths {
  random: boolean
  /** Null when the line records no range (no random_range_ratio) or the dataset is not random. */
  inputRange: [number, number] | null
  outputRange: [number, number] | null
  /** A length every request had; null when each drew its own, or unknown. */
  plannedInput: number | null
  plannedOutput: number | null
}

function plannedLengths(input: SglangResult): PlannedLengths {
  const random = (input.dataset_name ?? '').startsWith('random')
  // The range ratio applies to both lengths; a line without it (older versions) leaves the range unknown.
  const ratioKnown = input.random_range_ratio !== undefined && input.random_range_ratio !== null
  const inputRange = random && ratioKnown ? randomLengthRange(input.random_input_len, input.random_range_ratio) : null
  const outputRange = random && ratioKnown ? randomLengthRange(input.random_output_len, input.random_range_ratio) : null
  const exact = (r: [number, number] | null): number | null => (r !== null && r[0] === r[1] ? r[0] : null)
  const sharegpt = input.dataset_name === 'sharegpt' ? (input.sharegpt_output_len ?? null) : null
  return {
    random,
    inputRange,
    outputRange,
    plannedInput: random ? exact(inputRange) : null,
    plannedOutput: random ? exact(outputRange) : sharegpt,
  }
}

function rangeText(input: SglangResult, r: [number, number] | null, key: 'random_input_len' | 'random_output_len'): string {
  return r === null
    ? `${key} ${String(input[key] ?? 'not recorded')} with no random_range_ratio in the line, so the range is unknown`
    : `drawn uniformly from [${r[0]}, ${r[1]}] (${key} ${r[1]}, random_range_ratio ${input.random_range_ratio})`
}

/** The plan of a line: its lengths where SGLang planned them, else the mean actually sent (`meanInput`, described by `meanOf`). */
function sglangPlan(line: SglangLine, requests: number, meanInput: number, meanOf: string): ImportedRun['plan'] {
  const { input, lengths } = line
  const estimator =
    lengths.plannedInput !== null
      ? `SGLang random_input_len ${lengths.plannedInput} (random_range_ratio ${input.random_range_ratio}: every prompt that long)`
      : lengths.random
        ? `${meanOf}: SGLang random prompt lengths ${rangeText(input, lengths.inputRange, 'random_input_len')}, so no single planned size`
        : meanOf
  return {
    concurrency: input.max_concurrency ?? requests,
    requests,
    maxTokens: lengths.plannedOutput === null ? null : positiveInt(lengths.plannedOutput, 1),
    promptTokens: positiveInt(lengths.plannedInput ?? meanInput, 1),
    promptTokensEstimator: estimator,
  }
}

/** Where plan.model and plan.maxTokens came from, and what SGLang leaves unrecorded. */
function planDefinition(line: SglangLine): string {
  const { input, options, server, lengths } = line
  const model =
    options.model !== undefined
      ? 'given on import'
      : server.modelFrom !== null
        ? `from ${server.modelFrom}` +
          (server.disaggregated === null
            ? ''
            : ` (a prefill/decode-disaggregated router: ${server.disaggregated.prefill} prefill and ${server.disaggregated.decode} decode servers; engine names each side's version)`)
        : `is not recorded by SGLang${(input.server_info ?? null) === null ? '' : ' (server_info names no model)'} ("unknown"; pass --model)`
  const maxTokens = lengths.plannedOutput
    ? `is the line's ${lengths.random ? 'random_output_len (random_range_ratio ≥ 1: every request asked for that many)' : 'sharegpt_output_len'}`
    : lengths.random
      ? `is null: output lengths ${rangeText(input, lengths.outputRange, 'random_output_len')}`
      : 'is not recorded (null)'
  return (
    `plan.model ${model}; plan.maxTokens ${maxTokens}; plan.workload.seed is not recorded (null); ` +
    'SGLang records no date, so startedAt and finishedAt are null (the duration is the wall clock)'
  )
}

/**
 * Recent native clients take meta_info.completion_tokens from the server (the versions that write
 * server_info are such versions); otherwise output_lens may be the requested length.
 */
function tokenSourceOf(input: SglangResult): CompletionTokenSource {
  const native = input.backend === 'sglang' || input.backend === 'sglang-native'
  return native && (input.server_info ?? null) !== null ? 'usage' : 'client-count'
}

/** SGLang's own definitions, read from its benchmark client. */
function sglangDefinitions(line: SglangLine): Record<string, string> {
  const retokenized = line.input.total_output_tokens_retokenized
  return {
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
      `This line is recorded as ${tokenSourceOf(line.input)}; total_output_tokens_retokenized` +
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
    plan: planDefinition(line),
  }
}

/** The clauses of the import line: the traffic, then what the mode adds, then the key spellings mapped. */
function sglangNotes(line: SglangLine, ...more: string[]): string[] {
  const spellings = line.spellings.length === 0 ? [] : [`key spellings mapped: ${line.spellings.join(', ')}`]
  return [describeTraffic(line.input.request_rate, line.input.max_concurrency), ...more, ...spellings]
}

function lineNote(options: BenchImportOptions): string {
  return options.line === undefined ? '' : ` line ${options.line}`
}

/** A line written without --output-details: SGLang's summaries only, and no failed count. */
function sglangSummaryOnly(line: SglangLine): Pick<ImportedRun, 'plan' | 'measure' | 'facts'> {
  const { input, options } = line
  const completed = input.completed
  if (completed === 0) {
    throw new ServegateError(
      'FILE_INVALID',
      `${describeSource(options)}: field "completed" is 0 and the line has no per-request lists, so there is nothing to import; ${FIX}`,
    )
  }
  const record = input as Record<string, unknown>
  const summary = summaryMetrics({
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
    wallClockMs: input.duration * 1000,
    tokenSource: tokenSourceOf(input),
  })
  const why = 'SGLang lines without --output-details record no failed count (completed counts only the successes)'
  return {
    plan: sglangPlan(line, completed, input.total_input_tokens / completed, 'SGLang total_input_tokens ÷ completed (mean prompt tokens)'),
    measure: { perRequest: false, summary, completed, failed: { count: null, why } },
    facts: {
      tool: 'SGLang',
      read: `SGLang bench_serving${lineNote(options)} written without --output-details`,
      notes: sglangNotes(line, 'plan.requests is completed (SGLang records no request count)'),
      definitions: { ...sglangDefinitions(line), e2e: "SGLang's e2e latency: send to the last chunk read, [DONE] included" },
    },
  }
}

/** Checks an --output-details line's lists (all present, one entry per request); returns the request count. */
function checkSglangLists(input: SglangResult, source: string): number {
  for (const field of PER_REQUEST_FIELDS) {
    if (input[field] === undefined) {
      throw new ServegateError(
        'FILE_INVALID',
        `${source}: field "${field}" is missing; an --output-details line holds ${PER_REQUEST_FIELDS.join(', ')} together; ${FIX}`,
      )
    }
  }
  const { ttfts, itls, input_lens, output_lens, errors } = input
  const n = checkListLengths({ ttfts, itls, input_lens, output_lens, errors }, source, FIX)
  if (n === 0) throw new ServegateError('FILE_INVALID', `${source}: field "ttfts" is empty, so the run has no requests to import; ${FIX}`)
  return n
}

/** An --output-details line: one record per request, servegate's own distributions. */
function sglangPerRequest(line: SglangLine): Pick<ImportedRun, 'plan' | 'measure' | 'facts'> {
  const { input, options } = line
  const source = describeSource(options)
  const n = checkSglangLists(input, source)
  const lists = {
    inputLens: input.input_lens ?? [],
    outputLens: input.output_lens ?? [],
    ttftsS: input.ttfts ?? [],
    itlsS: input.itls ?? [],
    errors: (input.errors ?? []).map((e) => e ?? ''),
    latenciesS: null,
    queueTimesS: null,
    startTimesS: null,
  }
  const records = buildRequests(lists, tokenSourceOf(input))
  const completed = records.filter((r) => r.status === 'ok').length
  if (completed + countEmptySuccesses(records) !== input.completed) {
    throw new ServegateError(
      'FILE_INVALID',
      `${source}: field "completed" is ${input.completed} but the per-request lists hold ${completed} requests with an empty errors[i]; ` +
        `the summary and the lists disagree, so the line was cut or edited; ${FIX}`,
    )
  }
  const meanInput = lists.inputLens.reduce((a, b) => a + b, 0) / lists.inputLens.length
  return {
    plan: sglangPlan(line, n, meanInput, 'mean of SGLang input_lens'),
    measure: { perRequest: true, records },
    facts: {
      tool: 'SGLang',
      read: `SGLang bench_serving --output-details${lineNote(options)}`,
      notes: sglangNotes(line),
      definitions: {
        ...sglangDefinitions(line),
        e2e: "ttft + Σ itl: the arrival of the last chunk with text (SGLang's own per-request latency, to [DONE], is not in the line)",
      },
      failureRule:
        'a request failed when errors[i] is non-empty (HTTP reason phrase and body, or a Python traceback reduced to its last line); ' +
        'the code is derived from that text; timings SGLang kept before the failure stay, outside every distribution',
    },
  }
}
