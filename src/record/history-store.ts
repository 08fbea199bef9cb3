/**
 * The history of main: a plain JSONL file, one `servegate.history/v1` line a run of the suite on
 * the main branch, kept with the user's repository or in its CI cache (no server). Runs append
 * to it; gates learn launch noise from it (`historySpread`) and the evidence draws its trend.
 */
import { appendFile, mkdir, readFile } from 'node:fs/promises'
import { dirname, resolve } from 'node:path'
import { z } from 'zod'
import { ServegateError } from '../errors.ts'
import { HistoryRun } from '../schema/noise.ts'

/** The arm of a cell a history figure belongs to. */
export type HistoryArm = 'cell' | 'baseline' | 'candidate'

/**
 * The name a cell's arm has in the history: the cell's id for a single-arm cell, `<id>/<arm>` for
 * an arm of a pair (the two arms are two engines, each with its own figures and launch noise).
 * @example historyCellKey('decode-c8', 'candidate') // 'decode-c8/candidate'
 */
export function historyCellKey(cell: string, arm: HistoryArm): string {
  return arm === 'cell' ? cell : `${cell}/${arm}`
}

/**
 * Every run of the history store at `path`, oldest first. A missing file is an empty history;
 * a line that is not a history run is an error naming the file, the line and the field.
 * @throws ServegateError FILE_INVALID on a line that is not JSON or not `servegate.history/v1`
 * @example const runs = await readHistory('bench-history/main.jsonl')
 */
export async function readHistory(path: string): Promise<HistoryRun[]> {
  let text: string
  try {
    text = await readFile(path, 'utf8')
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code
    // No such file, or a folder on its path is a file: there is no history yet.
    if (code === 'ENOENT' || code === 'ENOTDIR') return []
    throw new ServegateError('FILE_INVALID', `cannot read the history of main ${path}: ${(error as Error).message}`, { cause: error })
  }
  return parseHistory(text, path)
}

/** The runs of a history store's text; `path` names the file in errors. */
export function parseHistory(text: string, path: string): HistoryRun[] {
  const runs: HistoryRun[] = []
  const fix = 'remove the line, or restore the file from the branch or cache it came from'
  text.split('\n').forEach((line, i) => {
    if (line.trim() === '') return
    let json: unknown
    try {
      json = JSON.parse(line)
    } catch (error) {
      throw new ServegateError('FILE_INVALID', `${path}:${i + 1} is not a JSON line of the history of main; ${fix}`, { cause: error })
    }
    const parsed = HistoryRun.safeParse(json)
    if (!parsed.success)
      throw new ServegateError(
        'FILE_INVALID',
        `${path}:${i + 1} is not a servegate.history/v1 run: ${z.prettifyError(parsed.error).replace(/\n/g, ' ')}; ${fix}`,
      )
    runs.push(parsed.data)
  })
  return runs
}

/**
 * Appends one run to the history store at `path` as one line, creating the file (and its
 * folder) when missing. The run is checked against the schema first, so a bad run never
 * reaches the file.
 * @example await appendHistory('bench-history/main.jsonl', run)
 */
export async function appendHistory(path: string, run: HistoryRun): Promise<void> {
  const line = `${JSON.stringify(HistoryRun.parse(run))}\n`
  await mkdir(dirname(resolve(path)), { recursive: true })
  // One write of a whole line: a reader never sees half of it unless the write itself fails.
  await appendFile(path, line, 'utf8')
  cache.delete(resolve(path))
}

const cache = new Map<string, Promise<HistoryRun[]>>()

/**
 * The history store at `path`, read once per process (every gate of a run reads the same
 * history; the runs a worker appends itself are not among them, since only the reporter
 * appends, after the run). Use with `historySpread` for a gate's launch-noise floor.
 * @example
 * const runs = await historyFor(noise.history)
 * const spread = historySpread(runs, historyCellKey(cell, 'candidate'), metric, testbed)
 * resolveNoiseFloor({ metric, testbed, history: { path: noise.history, spread } })
 */
export function historyFor(path: string): Promise<HistoryRun[]> {
  const key = resolve(path)
  let runs = cache.get(key)
  if (runs === undefined) {
    runs = readHistory(path)
    // A failed read is not kept: the next call reads again (and reports the error again).
    runs.catch(() => cache.delete(key))
    cache.set(key, runs)
  }
  return runs
}
