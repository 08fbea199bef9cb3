/**
 * Reading another harness's results file: Python's JSON (NaN, Infinity), one document or JSON
 * Lines (one run a line), and the run a `--line` picks.
 */
import { ServegateError } from '../errors.ts'

/** Options of an import from a results file. */
export interface BenchImportOptions {
  /** The file (or label) named in errors. */
  source: string
  /** The line the run came from, when the file held several (JSON Lines). */
  line?: number | undefined
  /** Model name to record when the file names none. */
  model?: string | undefined
}

/** Names the file, and the line when the run came from a JSON Lines file, for messages. */
export function describeSource(options: BenchImportOptions): string {
  return options.line === undefined ? options.source : `${options.source} line ${options.line}`
}

/** One run read from a results file: the 1-based line it came from and its parsed value. */
export interface BenchmarkLine {
  line: number
  value: unknown
}

/**
 * Python's `json.dumps` writes `NaN`, `Infinity` and `-Infinity` (SGLang's default
 * `request_rate` is `inf`; an all-failed run has a `NaN` mean). Outside strings they become
 * `null` and the strings `"Infinity"` / `"-Infinity"`, so `JSON.parse` can read the text.
 */
export function normalizePythonJson(text: string): string {
  let out = ''
  let i = 0
  let inString = false
  while (i < text.length) {
    const c = text[i] as string
    if (inString) {
      out += c
      if (c === '\\') {
        out += text[i + 1] ?? ''
        i += 2
        continue
      }
      if (c === '"') inString = false
      i++
      continue
    }
    if (c === '"') {
      inString = true
      out += c
      i++
      continue
    }
    if (text.startsWith('NaN', i)) {
      out += 'null'
      i += 3
    } else if (text.startsWith('-Infinity', i)) {
      out += '"-Infinity"'
      i += 9
    } else if (text.startsWith('Infinity', i)) {
      out += '"Infinity"'
      i += 8
    } else {
      out += c
      i++
    }
  }
  return out
}

/**
 * Reads a results file as one JSON document (a `--save-result` file, pretty-printed or not)
 * or as JSON Lines (SGLang's `--output-file`, vLLM's `--append-result`): one run per line.
 * A line that is not JSON throws naming its line number.
 */
export function parseBenchmarkLines(text: string, source: string, fix: string): BenchmarkLine[] {
  try {
    return [{ line: 1, value: JSON.parse(text) as unknown }]
  } catch {
    // Python's NaN/Infinity, or several documents: normalize, then read as JSON Lines below.
  }
  const normalized = normalizePythonJson(text)
  try {
    return [{ line: 1, value: JSON.parse(normalized) as unknown }]
  } catch {
    // Not one document: read it as JSON Lines below.
  }
  const lines = normalized.split(/\r?\n/)
  const runs: BenchmarkLine[] = []
  let firstNonEmpty = true
  for (const [i, raw] of lines.entries()) {
    if (raw.trim() === '') continue
    try {
      runs.push({ line: i + 1, value: JSON.parse(raw) as unknown })
    } catch (err) {
      const why = (err as Error).message
      const where = firstNonEmpty ? `${source} is not JSON` : `${source}: line ${i + 1} is not JSON`
      throw new ServegateError('FILE_INVALID', `${where} (${why}); ${fix}`, { cause: err })
    }
    firstNonEmpty = false
  }
  if (runs.length === 0) throw new ServegateError('FILE_INVALID', `${source} is empty; ${fix}`)
  return runs
}

/** Picks the run on a 1-based line (default: the last run, the most recent append). */
export function pickLine(runs: readonly BenchmarkLine[], source: string, line: number | undefined): BenchmarkLine {
  if (line === undefined) return runs[runs.length - 1] as BenchmarkLine
  const found = runs.find((r) => r.line === line)
  if (found !== undefined) return found
  const lines = runs.map((r) => r.line)
  const which = runs.length === 1 ? `it holds one run, on line ${lines[0]}` : `its runs are on lines ${lines.join(', ')}`
  throw new ServegateError('CONFIG_INVALID', `--line ${line}: ${source} has no run on that line (${which}); pass one of those line numbers`)
}
