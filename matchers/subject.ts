import type { RunRecord } from '../src/schema/run.ts'

/** What a servegate matcher receives: a measured cell or pair (what `await cell(...)` gives). */
export type CellSubject = { kind: 'cell'; id: string; record: RunRecord; records: readonly RunRecord[] }
export type PairSubject = {
  kind: 'pair'
  id: string
  baseline: readonly RunRecord[]
  candidate: readonly RunRecord[]
  launchOrder?: ReadonlyArray<'baseline' | 'candidate'>
}
export type Subject = CellSubject | PairSubject

function isRecordList(v: unknown): v is RunRecord[] {
  return Array.isArray(v) && v.every((r) => typeof r === 'object' && r !== null && (r as { schema?: unknown }).schema === 'servegate.run/v1')
}

/** Throws a TypeError naming the matcher when `received` is not a measured pair. */
export function asPair(matcher: string, received: unknown): PairSubject {
  const p = received as Partial<PairSubject> | null
  if (p?.kind !== 'pair' || !isRecordList(p.baseline) || !isRecordList(p.candidate) || p.baseline.length === 0 || p.candidate.length === 0) {
    throw new TypeError(`${matcher}: expected a measured pair (await pair({ baseline, candidate, … })), received ${describe(received)}`)
  }
  return p as PairSubject
}

/** Throws a TypeError naming the matcher when `received` is neither a measured cell nor pair. */
export function asSubject(matcher: string, received: unknown): Subject {
  const s = received as Partial<Subject> | null
  if (s?.kind === 'pair') return asPair(matcher, received)
  if (s?.kind === 'cell' && isRecordList((s as CellSubject).records)) return s as CellSubject
  throw new TypeError(`${matcher}: expected a measured cell or pair (await cell(…) or pair(…)), received ${describe(received)}`)
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
  const kind = (v as { kind?: unknown }).kind
  return typeof kind === 'string' ? `an object of kind "${kind}"` : 'an object that is not a servegate result'
}

/** The failed cells of a subject, as lines "label: CODE: message"; empty when every cell ran. */
export function cellFailures(s: Subject): string[] {
  return recordsOf(s).flatMap(({ label, record }) =>
    record.cellFailure === null ? [] : [`${label}: ${record.cellFailure.code}: ${record.cellFailure.message.split('\n')[0]}`],
  )
}
