import { mkdir, readFile, rename, writeFile } from 'node:fs/promises'
import { dirname } from 'node:path'
import { z } from 'zod'
import { ServegateError } from '../errors.ts'
import { ANVIL_SCHEMA_ID, AnvilRun, importAnvilRun } from '../import/anvil.ts'
import { type BenchmarkLine, parseBenchmarkLines, pickLine } from '../import/serving-bench.ts'
import { looksLikeSglang, parseSglangResult } from '../import/sglang.ts'
import { looksLikeVllm, parseVllmResult } from '../import/vllm.ts'
import { RUN_SCHEMA_ID, RunRecord } from '../schema/run.ts'
import { scrubDeep } from '../secrets.ts'

/**
 * Writes JSON atomically: a temp file beside the target, then a rename, so a crash mid-write
 * leaves the previous file intact. Every string in it is scrubbed of the registered secrets.
 */
export async function writeJsonAtomic(path: string, value: unknown): Promise<void> {
  await mkdir(dirname(path), { recursive: true })
  const tmp = `${path}.${process.pid}.${Date.now()}.tmp`
  await writeFile(tmp, `${JSON.stringify(scrubDeep(value), null, 2)}\n`)
  await rename(tmp, path)
}

/** Parses a run record from JSON: a servegate record as is, an anvil-serving record imported. */
export function parseRunRecord(value: unknown, source: string): RunRecord {
  const schema = (value as { schema?: unknown } | null)?.schema
  if (schema === RUN_SCHEMA_ID) {
    const result = RunRecord.safeParse(value)
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
export const IMPORT_FORMATS = ['auto', 'vllm', 'sglang', 'anvil'] as const
export type ImportFormat = (typeof IMPORT_FORMATS)[number]

export interface ReadRunRecordOptions {
  /**
   * The source format. `auto` reads servegate and anvil-serving records by their `schema`
   * field, and recognizes a vLLM `--save-result` JSON or an SGLang `bench_serving` JSONL by
   * their keys.
   * @default 'auto'
   */
  from?: ImportFormat | undefined
  /** 1-based line of a JSON Lines file (one run per line); default the last run. */
  line?: number | undefined
  /** Model name to record when the source names none (SGLang's JSONL does not). */
  model?: string | undefined
}

const ANY_FIX = 'pass a servegate.run/v1 or anvil-serving.benchmark/v1 record, a vLLM --save-result JSON or an SGLang bench_serving JSONL'

function parseBenchmarkRun(
  run: BenchmarkLine,
  from: 'vllm' | 'sglang',
  path: string,
  runs: number,
  options: ReadRunRecordOptions,
): RunRecord {
  const line = runs > 1 || options.line !== undefined ? run.line : undefined
  const opts = { source: path, line, model: options.model }
  return from === 'vllm' ? parseVllmResult(run.value, opts) : parseSglangResult(run.value, opts)
}

/**
 * Parses the text of a run file into a servegate run record, importing other formats.
 * A file of the wrong shape for `from` throws `FILE_INVALID` naming the missing field.
 */
export function parseRunText(text: string, path: string, options: ReadRunRecordOptions = {}): RunRecord {
  const from = options.from ?? 'auto'
  if (from === 'anvil') {
    let value: unknown
    try {
      value = JSON.parse(text)
    } catch (err) {
      throw new ServegateError(
        'FILE_INVALID',
        `${path} is not JSON (${(err as Error).message}); pass an anvil-serving.benchmark/v1 JSON file`,
        { cause: err },
      )
    }
    const schema = (value as { schema?: unknown } | null)?.schema
    if (schema !== ANVIL_SCHEMA_ID) {
      throw new ServegateError(
        'FILE_INVALID',
        `${path}: field "schema" is ${JSON.stringify(schema)}; expected "${ANVIL_SCHEMA_ID}" for --from anvil`,
      )
    }
    return parseRunRecord(value, path)
  }
  if (from === 'vllm' || from === 'sglang') {
    const fix =
      from === 'vllm'
        ? 'pass the JSON that vllm bench serve --save-result writes'
        : 'pass the JSONL that sglang.bench_serving --output-file writes'
    const runs = parseBenchmarkLines(text, path, fix)
    return parseBenchmarkRun(pickLine(runs, path, options.line), from, path, runs.length, options)
  }
  const runs = parseBenchmarkLines(text, path, 'pass a run record JSON file')
  const run = pickLine(runs, path, options.line)
  const value = run.value
  if (value !== null && typeof value === 'object' && 'schema' in value) return parseRunRecord(value, path)
  if (looksLikeSglang(value)) return parseBenchmarkRun(run, 'sglang', path, runs.length, options)
  if (looksLikeVllm(value)) return parseBenchmarkRun(run, 'vllm', path, runs.length, options)
  if (path.endsWith('.jsonl')) return parseBenchmarkRun(run, 'sglang', path, runs.length, options)
  throw new ServegateError('FILE_INVALID', `${path}: no "schema" field and not the shape of a vLLM or SGLang benchmark result; ${ANY_FIX}`)
}

/**
 * Reads a run record file: a servegate or anvil-serving v1 record, or (with `from`, or
 * recognized by `auto`) a vLLM `--save-result` JSON or an SGLang `bench_serving` JSONL.
 */
export async function readRunRecord(path: string, options: ReadRunRecordOptions = {}): Promise<RunRecord> {
  let text: string
  try {
    text = await readFile(path, 'utf8')
  } catch (err) {
    const code = (err as { code?: string }).code
    const why = code === 'ENOENT' ? 'no such file' : code === 'EISDIR' ? 'it is a directory' : (code ?? 'unreadable')
    throw new ServegateError('FILE_INVALID', `cannot read ${path} (${why}); pass the path of a run record JSON file`, { cause: err })
  }
  return parseRunText(text, path, options)
}

/**
 * Imports another harness's result file as a servegate run record.
 * @example await importRunFile('vllm-result.json', 'vllm')
 * @example await importRunFile('sglang.jsonl', 'sglang', { line: 2 })
 */
export function importRunFile(path: string, from: ImportFormat, options: Omit<ReadRunRecordOptions, 'from'> = {}): Promise<RunRecord> {
  return readRunRecord(path, { ...options, from })
}
