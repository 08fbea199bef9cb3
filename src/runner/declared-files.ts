import { statSync } from 'node:fs'
import { resolve } from 'node:path'
import { ServegateError } from '../errors.ts'
import { checkReplayable, loadTraceSync } from '../load/trace.ts'
import { checkTurns, loadConversationsSync, longestTurns } from '../workload/conversation-file.ts'
import { loadDatasetSync } from '../workload/dataset.ts'
import type { ResolvedCellPlan } from './cell-options.ts'

/**
 * What declarations read, by kind and absolute path, with the size and mtime the file had and the
 * facts a plan is checked against (never the content): the rungs of a sweep and the cells of a
 * file that name the same unchanged file read it once.
 */
const read = new Map<string, { size: number; mtimeMs: number; facts: unknown }>()

/** The facts `load` reads from a file, unless the same file, unchanged, was read before. */
function factsOf<T>(kind: string, path: string, load: () => T): T {
  const key = `${kind}\0${resolve(path)}`
  let stat: { size: number; mtimeMs: number } | null = null
  try {
    stat = statSync(path)
  } catch {
    // `load` reads it and says why it cannot.
  }
  const known = read.get(key)
  if (stat !== null && known !== undefined && known.size === stat.size && known.mtimeMs === stat.mtimeMs) return known.facts as T
  const facts = load()
  if (stat !== null) read.set(key, { size: stat.size, mtimeMs: stat.mtimeMs, facts })
  return facts
}

/** A reader's error, named by the option that gave the path: `pair "qa".workload.datasetPath: <path>:<line>: …`. */
function naming<T>(field: string, work: () => T): T {
  try {
    return work()
  } catch (error) {
    if (error instanceof ServegateError) throw new ServegateError(error.code, `${field}: ${error.message}`, { cause: error })
    throw error
  }
}

/**
 * Reads every file a cell's plan names, as its run will read them, when the cell is declared:
 * the dataset (every row, and the images it references), the conversations file, the trace
 * (histograms of sizes are read when the plan is resolved). A missing file or a bad line fails
 * here, naming the option, the path, the line, the field and the fix, before any engine starts,
 * and so does a plan the file cannot serve (more requests than a trace has rows, more turns than
 * any conversation has, images over the completions API).
 *
 * The run reads each file again and checks it again: the cell sends the bytes it read then, and
 * its record keeps their sha256, so a file changed after the declaration is checked as it is
 * then, never sent unchecked.
 * @param where how the declaration is named, e.g. `pair "qa"`
 * @throws ServegateError FILE_INVALID for a file that cannot be read or parsed; CONFIG_INVALID for a plan it cannot serve
 */
export function readDeclaredFiles(plan: ResolvedCellPlan, where: string): void {
  const w = plan.workload
  if (w.kind === 'dataset') {
    const path = w.datasetPath
    if (path === undefined) {
      throw new ServegateError(
        'CONFIG_INVALID',
        `${where}.workload.datasetPath: the dataset kind sends the prompts of a JSONL file; set datasetPath to its path`,
      )
    }
    const images = naming(`${where}.workload.datasetPath`, () =>
      factsOf('dataset', path, () => loadDatasetSync(path).rows.some((r) => r.images.length > 0)),
    )
    if (images && plan.api !== 'chat') {
      throw new ServegateError('CONFIG_INVALID', `${where}.api: the rows of ${path} have images, which need the chat API; set api: 'chat'`)
    }
  }
  const conversations = w.kind === 'conversation' ? w.conversations : undefined
  if (conversations !== undefined) {
    const field = `${where}.workload.conversations`
    const longest = naming(field, () => factsOf('conversations', conversations, () => longestTurns(loadConversationsSync(conversations))))
    naming(field, () => checkTurns(conversations, longest, w.turns ?? 1))
  }
  if (plan.arrival?.kind === 'trace') {
    const path = plan.arrival.path
    const rows = naming(`${where}.arrival.path`, () => factsOf('trace', path, () => loadTraceSync(path).rows.length))
    naming(where, () => checkReplayable(path, rows, plan.requests))
  }
}
