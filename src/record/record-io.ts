import { readFile } from 'node:fs/promises'
import { basename, dirname, join } from 'node:path'
import { z } from 'zod'
import { ServegateError } from '../errors.ts'
import { ANVIL_SCHEMA_ID, AnvilRun, importAnvilRun } from '../import/anvil.ts'
import {
  AIPERF_RECORDS_FILE,
  importAiperfAggregate,
  importAiperfRecords,
  looksLikeAiperfAggregate,
  looksLikeAiperfRecord,
} from '../import/aiperf.ts'
import { describeKeys } from '../import/common.ts'
import { guidellmBenchmarks, importGuidellmBenchmark, looksLikeGuidellm } from '../import/guidellm.ts'
import { importLlmperfIndividual, importLlmperfSummary, looksLikeLlmperfIndividual, looksLikeLlmperfSummary } from '../import/llmperf.ts'
import { type BenchmarkLine, parseBenchmarkLines, pickLine } from '../import/result-file.ts'
import { looksLikeSglang, parseSglangResult } from '../import/sglang.ts'
import { looksLikeVllm, parseVllmResult } from '../import/vllm.ts'
import { RUN_SCHEMA_ID, type RunRecord, StoredRunRecord } from '../schema/run.ts'

/**
 * Parses a run record from JSON: a servegate record (one an older servegate wrote read into the
 * current shape, its packed gaps decoded into `itlMs`), an anvil-serving record imported. Corrupt
 * packed gaps are FILE_INVALID naming the request and the `itlPacked` field.
 */
export function parseRunRecord(value: unknown, source: string): RunRecord {
  const schema = (value as { schema?: unknown } | null)?.schema
  if (schema === RUN_SCHEMA_ID) {
    const result = StoredRunRecord.safeParse(value)
    if (!result.success) {
      throw new ServegateError(
        'FILE_INVALID',
        `${source}: not a valid ${RUN_SCHEMA_ID} record: ${z.prettifyError(result.error).split('\n').slice(0, 4).join('; ')}`,
      )
    }
    return result.data
  }
  if (schema === ANVIL_SCHEMA_ID) {
    const result = AnvilRun.safeParse(value)
    if (!result.success) {
      throw new ServegateError(
        'FILE_INVALID',
        `${source}: not a valid ${ANVIL_SCHEMA_ID} record: ${z.prettifyError(result.error).split('\n').slice(0, 4).join('; ')}`,
      )
    }
    return importAnvilRun(result.data)
  }
  throw new ServegateError(
    'FILE_INVALID',
    `${source}: field "schema" is ${JSON.stringify(schema)}; expected "${RUN_SCHEMA_ID}" or "${ANVIL_SCHEMA_ID}"`,
  )
}

/** The formats `readRunRecord` / `importRunFile` read; `auto` recognizes each by its shape. */
export const IMPORT_FORMATS = ['auto', 'vllm', 'sglang', 'anvil', 'aiperf', 'guidellm', 'llmperf'] as const
export type ImportFormat = (typeof IMPORT_FORMATS)[number]

export interface ReadRunRecordOptions {
  /**
   * The source format. `auto` reads servegate and anvil-serving records by their `schema`
   * field, and recognizes vLLM, SGLang, AIPerf, GuideLLM and llmperf results by their keys.
   * @default 'auto'
   */
  from?: ImportFormat | undefined
  /** 1-based run of a multi-run file (a JSON Lines line; a GuideLLM benchmark); default the last run. */
  line?: number | undefined
  /** Model name to record when the source names none (SGLang's JSONL does not). */
  model?: string | undefined
  /** Import every run of a multi-run file, not only the one `line` picks. @default false */
  all?: boolean | undefined
  /**
   * The text of the companion file a format keeps beside its main one (AIPerf's
   * `profile_export.jsonl` ↔ `profile_export_aiperf.json`, llmperf's `*_individual_responses.json`
   * ↔ `*_summary.json`); `readRunRecords` reads it when it exists.
   */
  companion?: { path: string; text: string } | null | undefined
}

/** One run of an imported file. */
export interface ImportedRunEntry {
  /** Its 1-based position: the line of a JSON Lines file, a GuideLLM benchmark's index. */
  position: number
  record: RunRecord
  /** True when the file marks the run as a warm-up (a tag or label saying so), null when it does not say. */
  warmup: boolean | null
}

/** What a results file held and what was imported from it. */
export interface ImportedFile {
  /** The detected or given format (`vllm`, `guidellm`, … or `servegate`). */
  format: ImportFormat | 'servegate'
  /** How runs are counted in this file. */
  unit: 'line' | 'benchmark' | 'file'
  /** Every run's position in the file, in order. */
  positions: number[]
  /** The imported runs: the one picked, or all of them with `all`. */
  runs: ImportedRunEntry[]
  /** The companion file that was read, if any. */
  companion: string | null
}

const ANY_FIX =
  'pass a servegate.run/v1 or anvil-serving.benchmark/v1 record, a vLLM --save-result JSON, an SGLang bench_serving JSONL, ' +
  "AIPerf's profile_export_aiperf.json or profile_export.jsonl, GuideLLM's benchmarks.json, or llmperf's *_summary.json or " +
  '*_individual_responses.json; or name the format with --from'

const LOOKED_FOR =
  'looked for a "schema" field (servegate, anvil), vLLM keys (duration with mean_ttft_ms or *_e2el_ms, and model_id/date/backend), ' +
  'SGLang keys (*_e2e_latency_ms or total_output_tokens_retokenized), AIPerf metric objects ({ unit, avg } under time_to_first_token, ' +
  'request_latency…) or per-request lines ({ metadata, metrics, error }), a GuideLLM "benchmarks" array, and llmperf keys ' +
  '(results_ttft_s_mean) or an array of { ttft_s, end_to_end_latency_s }'

/** The run's warm-up mark: a `tag`/`label`/`name` that says warm-up; null when the file does not say. */
function warmupMark(value: unknown): boolean | null {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return null
  for (const key of ['tag', 'label', 'name', 'run_label'] as const) {
    const v = (value as Record<string, unknown>)[key]
    if (typeof v === 'string' && /warm[-_ ]?up/i.test(v)) return true
  }
  return null
}

function parseJsonFor(text: string, path: string, fix: string): unknown {
  return parseBenchmarkLines(text, path, fix).map((r) => r.value)
}

function benchmarkRun(run: BenchmarkLine, from: 'vllm' | 'sglang', path: string, runs: number, options: ReadRunRecordOptions): RunRecord {
  const line = runs > 1 || options.line !== undefined ? run.line : undefined
  const opts = { source: path, line, model: options.model }
  return from === 'vllm' ? parseVllmResult(run.value, opts) : parseSglangResult(run.value, opts)
}

function lineFile(format: 'vllm' | 'sglang', runs: BenchmarkLine[], path: string, options: ReadRunRecordOptions): ImportedFile {
  const picked = options.all === true ? runs : [pickLine(runs, path, options.line)]
  return {
    format,
    unit: runs.length > 1 ? 'line' : 'file',
    positions: runs.map((r) => r.line),
    runs: picked.map((r) => {
      const record = benchmarkRun(r, format, path, runs.length, options)
      const warmup = warmupMark(r.value)
      if (warmup === true) record.methodology.warmupRun = 'this run is marked warm-up in the source file (its tag or label says so)'
      return { position: r.line, record, warmup }
    }),
    companion: null,
  }
}

function single(format: ImportedFile['format'], record: RunRecord, companion: string | null = null): ImportedFile {
  return { format, unit: 'file', positions: [1], runs: [{ position: 1, record, warmup: null }], companion }
}

function refuseLine(options: ReadRunRecordOptions, path: string, what: string): void {
  if (options.line !== undefined && options.line !== 1) {
    throw new ServegateError('CONFIG_INVALID', `--line ${options.line}: ${path} is ${what}, one run; drop --line`)
  }
}

function companionValues(options: ReadRunRecordOptions, fix: string): unknown[] | null {
  const c = options.companion
  return c === null || c === undefined ? null : (parseJsonFor(c.text, c.path, fix) as unknown[])
}

function aiperfFile(values: unknown[], path: string, options: ReadRunRecordOptions): ImportedFile {
  const fix = 'pass the files of one aiperf profile artifact directory'
  const other = companionValues(options, fix)
  const opts = { source: path, model: options.model }
  if (values.length === 1 && looksLikeAiperfAggregate(values[0])) {
    refuseLine(options, path, "AIPerf's aggregate export")
    const records = other ?? undefined
    return single(
      'aiperf',
      importAiperfAggregate(values[0], { ...opts, records }),
      records === undefined ? null : (options.companion?.path ?? null),
    )
  }
  refuseLine(options, path, `AIPerf's ${AIPERF_RECORDS_FILE} (one line per request)`)
  const aggregate = other?.[0]
  return single(
    'aiperf',
    importAiperfRecords(values, { ...opts, aggregate }),
    aggregate === undefined ? null : (options.companion?.path ?? null),
  )
}

function llmperfFile(value: unknown, path: string, options: ReadRunRecordOptions): ImportedFile {
  refuseLine(options, path, 'an llmperf result')
  const other = companionValues(options, 'pass the files of one llmperf run')?.[0]
  const opts = { source: path, model: options.model }
  const companion = other === undefined ? null : (options.companion?.path ?? null)
  if (looksLikeLlmperfSummary(value)) return single('llmperf', importLlmperfSummary(value, { ...opts, individual: other }), companion)
  return single('llmperf', importLlmperfIndividual(value, { ...opts, summary: other }), companion)
}

function guidellmFile(value: unknown, path: string, options: ReadRunRecordOptions): ImportedFile {
  const benchmarks = guidellmBenchmarks(value, path)
  if (benchmarks.length === 0)
    throw new ServegateError('FILE_INVALID', `${path}: field "benchmarks" is empty, so there is nothing to import; ${ANY_FIX}`)
  const runs: BenchmarkLine[] = benchmarks.map((b, i) => ({ line: i + 1, value: b }))
  let picked: BenchmarkLine[]
  if (options.all === true) picked = runs
  else {
    try {
      picked = [pickLine(runs, path, options.line)]
    } catch (err) {
      throw new ServegateError(
        'CONFIG_INVALID',
        `--line ${options.line}: ${path} holds ${runs.length} GuideLLM benchmark(s); pass --line 1 to ${runs.length}`,
        {
          cause: err,
        },
      )
    }
  }
  const count = runs.length
  return {
    format: 'guidellm',
    unit: count > 1 ? 'benchmark' : 'file',
    positions: runs.map((r) => r.line),
    runs: picked.map((r) => ({
      position: r.line,
      record: importGuidellmBenchmark(r.value as Record<string, unknown>, {
        source: path,
        line: count > 1 ? r.line : undefined,
        model: options.model,
        count,
      }),
      warmup: warmupMark(r.value),
    })),
    companion: null,
  }
}

function schemaOf(value: object): 'anvil' | 'servegate' {
  return (value as { schema?: unknown }).schema === ANVIL_SCHEMA_ID ? 'anvil' : 'servegate'
}

function schemaFile(value: unknown, path: string, options: ReadRunRecordOptions): ImportedFile {
  refuseLine(options, path, 'a run record')
  return single(schemaOf(value as object), parseRunRecord(value, path))
}

/**
 * Parses the text of a results file into servegate run records: the run `line` picks (default
 * the last), or every run with `all`. A file of the wrong shape for `from` throws `FILE_INVALID`
 * naming the missing field; `auto` names what it looked for and the keys the file has.
 */
export function parseRunFile(text: string, path: string, options: ReadRunRecordOptions = {}): ImportedFile {
  const from = options.from ?? 'auto'
  if (from === 'anvil') {
    const [value] = parseJsonFor(text, path, 'pass an anvil-serving.benchmark/v1 JSON file') as unknown[]
    const schema = (value as { schema?: unknown } | null)?.schema
    if (schema !== ANVIL_SCHEMA_ID) {
      throw new ServegateError(
        'FILE_INVALID',
        `${path}: field "schema" is ${JSON.stringify(schema)}; expected "${ANVIL_SCHEMA_ID}" for --from anvil`,
      )
    }
    return schemaFile(value, path, options)
  }
  if (from === 'vllm' || from === 'sglang') {
    const fix =
      from === 'vllm'
        ? 'pass the JSON that vllm bench serve --save-result writes'
        : 'pass the JSONL that sglang.bench_serving --output-file writes'
    return lineFile(from, parseBenchmarkLines(text, path, fix), path, options)
  }
  if (from === 'aiperf') {
    return aiperfFile(parseJsonFor(text, path, 'pass an aiperf profile export') as unknown[], path, options)
  }
  if (from === 'guidellm') {
    const [value] = parseJsonFor(text, path, 'pass the benchmarks.json that guidellm benchmark writes') as unknown[]
    return guidellmFile(value, path, options)
  }
  if (from === 'llmperf') {
    const [value] = parseJsonFor(text, path, "pass llmperf's *_summary.json or *_individual_responses.json") as unknown[]
    return llmperfFile(value, path, options)
  }
  const runs = parseBenchmarkLines(text, path, 'pass a run record JSON file')
  const value = (runs[0] as BenchmarkLine).value
  if (looksLikeAiperfRecord(value) || (runs.length === 1 && looksLikeAiperfAggregate(value))) {
    return aiperfFile(
      runs.map((r) => r.value),
      path,
      options,
    )
  }
  if (runs.length === 1 && looksLikeGuidellm(value)) return guidellmFile(value, path, options)
  if (runs.length === 1 && (looksLikeLlmperfSummary(value) || looksLikeLlmperfIndividual(value))) return llmperfFile(value, path, options)
  const probe = pickLine(runs, path, options.line).value
  if (probe !== null && typeof probe === 'object' && 'schema' in probe) {
    return { ...single(schemaOf(probe), parseRunRecord(probe, path)), positions: runs.map((r) => r.line) }
  }
  if (looksLikeSglang(probe)) return lineFile('sglang', runs, path, options)
  if (looksLikeVllm(probe)) return lineFile('vllm', runs, path, options)
  if (path.endsWith('.jsonl')) return lineFile('sglang', runs, path, options)
  throw new ServegateError(
    'FILE_INVALID',
    `${path}: not a format servegate recognizes: it ${LOOKED_FOR}, but the file holds ${describeKeys(probe)}` +
      `${runs.length > 1 ? ` (line ${runs[runs.length - 1]?.line} of ${runs.length} lines)` : ''}; ${ANY_FIX}`,
  )
}

/**
 * Parses the text of a run file into one servegate run record, importing other formats: the
 * run `line` picks, default the last. See {@link parseRunFile} for every run.
 */
export function parseRunText(text: string, path: string, options: ReadRunRecordOptions = {}): RunRecord {
  return (parseRunFile(text, path, { ...options, all: false }).runs[0] as ImportedRunEntry).record
}

/** The companion a format keeps beside `path`, by its file name; null when the name says none. */
function companionPath(path: string): string | null {
  const dir = dirname(path)
  const base = basename(path)
  if (base === 'profile_export_aiperf.json') return join(dir, AIPERF_RECORDS_FILE)
  if (base === AIPERF_RECORDS_FILE) return join(dir, 'profile_export_aiperf.json')
  if (base.endsWith('_summary.json')) return join(dir, base.replace(/_summary\.json$/, '_individual_responses.json'))
  if (base.endsWith('_individual_responses.json')) return join(dir, base.replace(/_individual_responses\.json$/, '_summary.json'))
  return null
}

async function readText(path: string): Promise<string> {
  try {
    return await readFile(path, 'utf8')
  } catch (err) {
    const code = (err as { code?: string }).code
    const why = code === 'ENOENT' ? 'no such file' : code === 'EISDIR' ? 'it is a directory' : (code ?? 'unreadable')
    throw new ServegateError('FILE_INVALID', `cannot read ${path} (${why}); pass the path of a run record JSON file`, { cause: err })
  }
}

/**
 * Reads a results file and its companion (when the format keeps one beside it and it exists)
 * and imports the run `line` picks, or every run with `all`.
 * @example const file = await readRunRecords('sglang.jsonl', { all: true }) // one record per line
 */
export async function readRunRecords(path: string, options: ReadRunRecordOptions = {}): Promise<ImportedFile> {
  const text = await readText(path)
  let companion = options.companion
  const other = companion === undefined ? companionPath(path) : null
  if (other !== null) {
    companion = await readFile(other, 'utf8').then(
      (t) => ({ path: other, text: t }),
      () => null,
    )
  }
  return parseRunFile(text, path, { ...options, companion })
}

/**
 * Reads a run record file: a servegate or anvil-serving v1 record, or (with `from`, or
 * recognized by `auto`) another harness's results; the run `line` picks (default the last).
 */
export async function readRunRecord(path: string, options: ReadRunRecordOptions = {}): Promise<RunRecord> {
  return ((await readRunRecords(path, { ...options, all: false })).runs[0] as ImportedRunEntry).record
}

/**
 * Imports another harness's result file as a servegate run record.
 * @example await importRunFile('vllm-result.json', 'vllm')
 * @example await importRunFile('sglang.jsonl', 'sglang', { line: 2 })
 */
export function importRunFile(path: string, from: ImportFormat, options: Omit<ReadRunRecordOptions, 'from'> = {}): Promise<RunRecord> {
  return readRunRecord(path, { ...options, from })
}

/** Imports every run (with `all`) or the picked one of another harness's result file. */
export function importRunFileRuns(
  path: string,
  from: ImportFormat,
  options: Omit<ReadRunRecordOptions, 'from'> = {},
): Promise<ImportedFile> {
  return readRunRecords(path, { ...options, from })
}
