import { z } from 'zod'
import { CAPACITY_SCHEMA_ID, type CapacitySearch } from '../schema/capacity-record.ts'
import type { CellResult, PairResult, SweepResult } from '../schema/results.ts'
import type { RunRecord } from '../schema/run.ts'
import { isStoredBaseline, type StoredBaseline } from '../record/stored-baseline.ts'

/** What a servegate matcher judges: a measured cell or pair (what `await cell(…)` or `await pair(…)` gives). */
export type Subject = CellResult | PairResult

function isRecordList(v: unknown): v is RunRecord[] {
  return (
    Array.isArray(v) && v.every((r) => typeof r === 'object' && r !== null && (r as { schema?: unknown }).schema === 'servegate.run/v1')
  )
}

/** A pair whose baseline arm is a stored run record and whose candidate is a cell measured now. */
interface StoredBaselinePair extends PairResult {
  readonly storedBaseline: StoredBaseline
}

/** The stored baseline of a pair made by `asPair` from `{ baseline: await storedBaseline(…), candidate }`; null for any other pair. */
export function storedBaselineOf(p: PairResult): StoredBaseline | null {
  const stored = (p as Partial<StoredBaselinePair>).storedBaseline
  return stored !== undefined && isStoredBaseline(stored) ? stored : null
}

/**
 * `{ baseline: await storedBaseline(path), candidate: await cell }` as a pair named after the
 * candidate cell (its decisions and checks attach to that cell in the evidence), or null when
 * `received` is not of that shape. A TypeError naming the matcher when only half of it is right.
 */
function storedBaselinePair(matcher: string, received: unknown): StoredBaselinePair | null {
  const s = received as { kind?: unknown; baseline?: unknown; candidate?: unknown } | null
  if (s === null || typeof s !== 'object' || s.kind !== undefined || !('baseline' in s) || !('candidate' in s)) return null
  const usage = '{ baseline: await storedBaseline(path), candidate: await cell(…) }'
  if (!isStoredBaseline(s.baseline))
    throw new TypeError(`${matcher}: expected ${usage}; its baseline is ${describe(s.baseline)}, not a stored baseline`)
  const c = s.candidate as Partial<CellResult> | null
  if (c?.kind !== 'cell' || !isRecordList(c.records) || c.records.length === 0)
    throw new TypeError(`${matcher}: expected ${usage}; its candidate is ${describe(s.candidate)}, not a measured cell`)
  if (c.records.length > 1)
    throw new TypeError(
      `${matcher}: the stored baseline ${s.baseline.file} is one launch and the cell ${String(c.id)} has ${c.records.length}; ` +
        'one launch against several cannot be judged: drop repeats on the cell, or measure both arms in this run with pair({ repeats })',
    )
  const cell = c as CellResult
  return {
    kind: 'pair',
    id: cell.id,
    ...(cell.ladder === undefined ? {} : { ladder: cell.ladder }),
    baseline: [s.baseline.record],
    candidate: cell.records,
    launchOrder: ['baseline', 'candidate'],
    storedBaseline: s.baseline,
  }
}

/**
 * Throws a TypeError naming the matcher when `received` is not a measured pair. Its launch order
 * is not checked: no matcher reads it. `{ baseline: await storedBaseline(path), candidate: await
 * cell }` is a pair too (see `StoredBaselinePair`).
 */
export function asPair(matcher: string, received: unknown): PairResult {
  const stored = storedBaselinePair(matcher, received)
  if (stored !== null) return stored
  const p = received as Partial<PairResult> | null
  if (
    p?.kind !== 'pair' ||
    !isRecordList(p.baseline) ||
    !isRecordList(p.candidate) ||
    p.baseline.length === 0 ||
    p.candidate.length === 0
  ) {
    throw new TypeError(`${matcher}: expected a measured pair (await pair({ baseline, candidate, … })), received ${describe(received)}`)
  }
  return p as PairResult
}

/** Throws a TypeError naming the matcher when `received` is neither a measured cell nor pair. */
export function asSubject(matcher: string, received: unknown): Subject {
  const stored = storedBaselinePair(matcher, received)
  if (stored !== null) return stored
  const s = received as Partial<Subject> | null
  if (s?.kind === 'pair') return asPair(matcher, received)
  if (s?.kind === 'cell' && isRecordList(s.records)) return s as CellResult
  throw new TypeError(`${matcher}: expected a measured cell or pair (await cell(…) or pair(…)), received ${describe(received)}`)
}

/** Throws a TypeError naming the matcher when `received` is not a capacity search (`servegate.capacity/v1`). */
export function asCapacity(matcher: string, received: unknown, what = 'received'): CapacitySearch {
  const s = received as Partial<CapacitySearch> | null
  if (s?.schema !== CAPACITY_SCHEMA_ID || !Array.isArray(s.probes) || !Array.isArray(s.records) || typeof s.bracket !== 'object') {
    throw new TypeError(
      `${matcher}: expected a capacity search (await capacity({ … }), or a servegate.capacity/v1 record) as ${what}, ` +
        `received ${describe(received)}`,
    )
  }
  return s as CapacitySearch
}

/** Where on a ladder or search to judge: the step or probe at this rate (requests/s) or concurrency. */
export const At = z.object({ atRate: z.number().positive().optional(), atConcurrency: z.int().positive().optional() })
export type At = z.infer<typeof At>

const same = (a: number, b: number): boolean => Math.abs(a - b) <= 1e-9 * Math.max(1, Math.abs(b))

/** The value asked for on an axis, or a TypeError naming the matcher and the values there are. */
function pick<T>(
  matcher: string,
  axis: 'rate' | 'concurrency',
  at: At,
  items: readonly T[],
  valueOf: (item: T) => number,
  where: string,
): T {
  const wanted = axis === 'rate' ? at.atRate : at.atConcurrency
  const option = axis === 'rate' ? 'atRate' : 'atConcurrency'
  const values = items.map((i) => valueOf(i)).join(', ')
  if (wanted === undefined) {
    if (items.length === 1) return items[0] as T
    throw new TypeError(`${matcher}: ${where} has several ${axis === 'rate' ? 'rates' : 'concurrencies'}; pass ${option}: one of ${values}`)
  }
  const found = items.find((i) => same(valueOf(i), wanted))
  if (found === undefined) throw new TypeError(`${matcher}: ${where} has no ${option} ${wanted}; pass one of ${values}`)
  return found
}

/**
 * The measured cell a single-arm gate judges: a cell (every launch), a pair's candidate, the step
 * of a sweep, or the probe of a capacity search, at `atRate` / `atConcurrency` where there are several.
 */
export function singleArm(matcher: string, received: unknown, at: At): CellResult {
  const kind = (received as { kind?: unknown } | null)?.kind
  if ((received as { schema?: unknown } | null)?.schema === CAPACITY_SCHEMA_ID) {
    const search = asCapacity(matcher, received)
    const index = search.probes.indexOf(pick(matcher, search.axis, at, search.probes, (p) => p.value, `capacity search ${search.id}`))
    const record = search.records[index] as RunRecord
    return { kind: 'cell', id: `${search.id} probe ${index + 1}`, record, records: [record] }
  }
  if (kind === 'sweep') {
    const sweep = received as SweepResult<CellResult | PairResult>
    const step = pick(matcher, sweep.axis, at, sweep.steps, (s) => s.value, `sweep ${sweep.id}`)
    return singleArm(matcher, step.result, {})
  }
  const s = asSubject(matcher, received)
  if (s.kind === 'pair') return { kind: 'cell', id: `${s.id} candidate`, record: s.candidate[0] as RunRecord, records: s.candidate }
  const rate = s.record.plan.arrival?.ratePerS ?? null
  if (at.atRate !== undefined && (rate === null || !same(rate, at.atRate))) {
    const ran = rate === null ? 'without a rate (closed loop or trace)' : `at ${rate} req/s`
    throw new TypeError(`${matcher}: the cell ${s.id} ran ${ran}, not atRate ${at.atRate}; drop atRate or pass the cell that ran at it`)
  }
  return s
}

/** Every record of a subject, labelled by arm and launch. */
export function recordsOf(s: Subject): Array<{ label: string; record: RunRecord }> {
  if (s.kind === 'cell') return s.records.map((record, i) => ({ label: s.records.length > 1 ? `launch ${i + 1}` : 'cell', record }))
  const label = (arm: string, i: number, n: number) => (n > 1 ? `${arm} launch ${i + 1}` : arm)
  return [
    ...s.baseline.map((record, i) => ({ label: label('baseline', i, s.baseline.length), record })),
    ...s.candidate.map((record, i) => ({ label: label('candidate', i, s.candidate.length), record })),
  ]
}

function describe(v: unknown): string {
  if (v === null) return 'null'
  if (typeof v !== 'object') return typeof v
  if (typeof (v as { then?: unknown }).then === 'function') return 'a Promise (add await)'
  const kind = (v as { kind?: unknown }).kind
  return typeof kind === 'string' ? `an object of kind "${kind}"` : 'an object that is not a servegate result'
}

/** The failed cells of a subject, as lines "label: CODE: message"; empty when every cell ran. */
export function cellFailures(s: Subject): string[] {
  return recordsOf(s).flatMap(({ label, record }) =>
    record.cellFailure === null ? [] : [`${label}: ${record.cellFailure.code}: ${record.cellFailure.message.split('\n')[0]}`],
  )
}
