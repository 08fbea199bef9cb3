/**
 * The cells and pairs the spec file in this worker declared, and what became of each: written by
 * the declarations (`declare/`), read by the matchers (a cell's chart and figures) and taken by
 * the plugin's setup file into the file's meta. Below both, it imports only schemas and errors,
 * so the matchers read it without loading the declarations, the runner or the engines.
 */
import { sanitizeMessage } from '../errors.ts'
import type { RunRecord } from '../schema/run.ts'
import { type DeclaredCell, type FileMeta, META_TAG } from '../schema/task-meta.ts'

/** The cells and pairs declared by the spec file running in this worker, in declaration order. */
const declared = new Map<string, DeclaredCell>()

/**
 * Declares a cell for the evidence (planned, pending until it runs). An id used twice in one
 * file is refused: evidence paths and gate entries are keyed by it.
 */
export function declareCell(
  cell: Pick<DeclaredCell, 'id' | 'kind' | 'required' | 'ladder' | 'engines'> & { maxFailedShare?: number | null },
): void {
  if (declared.has(cell.id)) {
    throw new TypeError(`servegate: the cell id "${cell.id}" is declared twice in this file; give each cell or pair its own \`id\``)
  }
  declared.set(cell.id, { ...cell, status: 'pending', error: null, records: {} })
}

/** Puts a declared cell on a sweep's ladder: the evidence keeps the ladder's cells together. */
export function joinLadder(id: string, ladder: string): void {
  const cell = declared.get(id)
  if (cell !== undefined) cell.ladder = ladder
}

/**
 * Replaces a declared capacity search by its probes once it ran: each probe a measured cell
 * `<id>-<suffix>` (the capacity declaration names each by its value: `<id>-r20`) on the search's
 * ladder, in the search's place.
 */
export function searchMeasured(id: string, probes: ReadonlyArray<{ suffix: string; record: RunRecord }>): void {
  const search = declared.get(id)
  if (search === undefined) return
  const entries = [...declared.entries()]
  declared.clear()
  for (const [key, cell] of entries) {
    if (key !== id) declared.set(key, cell)
    else
      for (const p of probes)
        declared.set(`${id}-${p.suffix}`, {
          ...search,
          id: `${id}-${p.suffix}`,
          ladder: id,
          status: 'measured',
          error: null,
          records: { cell: [p.record] },
        })
  }
}

/** Marks a declared cell measured, with its records per arm. */
export function cellMeasured(id: string, records: DeclaredCell['records']): void {
  const cell = declared.get(id)
  if (cell !== undefined) Object.assign(cell, { status: 'measured', error: null, records })
}

/** Marks a declared cell as having thrown before it had records. */
export function cellThrew(id: string, error: unknown): void {
  const cell = declared.get(id)
  if (cell !== undefined)
    Object.assign(cell, { status: 'threw', error: sanitizeMessage(error instanceof Error ? error.message : String(error)) })
}

/** Work on a measured cell's records that finishes before `await cell` gives them to the test. */
type MeasuredHook = (id: string, records: DeclaredCell['records']) => Promise<void>
const measuredHooks: MeasuredHook[] = []

/**
 * Runs `hook` on every cell this worker measures, before its result reaches the test (the
 * matchers draw the cell's chart here, so a test that fails at once still has it). A hook that
 * throws is ignored.
 */
export function onCellMeasured(hook: MeasuredHook): void {
  measuredHooks.push(hook)
}

/** Runs a cell's measurement, recording its outcome in the registry either way. */
export async function tracked<T>(id: string, work: () => Promise<T>, recordsOf: (result: T) => DeclaredCell['records']): Promise<T> {
  let result: T
  try {
    result = await work()
  } catch (error) {
    cellThrew(id, error)
    throw error
  }
  const records = recordsOf(result)
  cellMeasured(id, records)
  await Promise.all(measuredHooks.map((hook) => hook(id, records).catch(() => {})))
  return result
}

/** A declared cell of this file by id (its engines and whether it is required), or undefined. */
export function declaredCell(id: string): DeclaredCell | undefined {
  return declared.get(id)
}

/** The file's cells for its meta, tagged with this servegate's version, emptying the registry (the next file starts clean). */
export function takeFileMeta(): FileMeta {
  const cells = [...declared.values()]
  declared.clear()
  return { ...META_TAG, cells }
}
