/**
 * The verdicts of an evidence index decided again from its run records, as `servegate verify`
 * does: every gate (its pure gate function on the records it judged, with the options it was
 * decided with), every pair check, each cell's disposition and the promotion. Each mismatch is a
 * problem naming the cell, the gate or check, and both values; an index whose verdict was edited
 * (with its statistics and SHA256SUMS made consistent again) is caught here.
 */
import { isDeepStrictEqual } from 'node:util'
import { withNoiseFloor } from '../gates/noise-floor.ts'
import { type CheckArms, checkAgain } from '../gates/checks.ts'
import { decideAgain, type GateInput } from '../gates/decide-again.ts'
import { passesUnder } from '../gates/inconclusive-policy.ts'
import { sloGate } from '../gates/slo.ts'
import type { CapacityInput } from '../gates/sustain-gate.ts'
import type { EvidenceCell, EvidenceIndex, GateEntry, PairCheck } from '../schema/evidence.ts'
import type { RunRecord } from '../schema/run.ts'
import type { GateDecision } from '../schema/gate.ts'
import { type StoredBaseline, storedBaselineFloor, storedBaselineWarning } from '../record/stored-baseline.ts'
import { DEFAULT_INCONCLUSIVE, type Judged, type JudgedRecords } from '../schema/task-meta.ts'
import { BLOCKED_PREFIX, cellDisposition, FAILED_TEST_REASON_PATTERN, promotionOf } from './build.ts'

/** The `cell` of a stored baseline's record: it is no cell of this run, and is found by its `runId` alone. */
export const STORED_BASELINE_CELL = ''

/** One parsed run record of the evidence, with where it sits. */
export interface EvidenceRecord {
  /** The cell that holds it, or `STORED_BASELINE_CELL` for a stored baseline. */
  cell: string
  arm: 'cell' | 'baseline' | 'candidate'
  launch: number
  record: RunRecord
}

/** A JSON value for a message, cut short. */
function shown(value: unknown): string {
  const text = JSON.stringify(value) ?? 'undefined'
  return text.length > 80 ? `${text.slice(0, 79)}…` : text
}

/** The value at a dotted path (as `firstDifference` gives it). */
function at(value: unknown, path: string): unknown {
  if (path === '(the value)') return value
  return path
    .split('.')
    .reduce<unknown>((v, k) => (typeof v === 'object' && v !== null ? (v as Record<string, unknown>)[k] : undefined), value)
}

/** The first differing field between two JSON values, as a dotted path; null when equal. */
export function firstDifference(a: unknown, b: unknown, path = ''): string | null {
  if (isDeepStrictEqual(a, b)) return null
  if (typeof a === 'object' && a !== null && typeof b === 'object' && b !== null && Array.isArray(a) === Array.isArray(b)) {
    // The hint is derived from the figures: a difference in them is the one to name.
    const keys = [...new Set([...Object.keys(a), ...Object.keys(b)])].sort(
      (x, y) => Number(x === 'decideHint') - Number(y === 'decideHint') || (x < y ? -1 : x > y ? 1 : 0),
    )
    for (const k of keys) {
      const d = firstDifference((a as Record<string, unknown>)[k], (b as Record<string, unknown>)[k], path === '' ? k : `${path}.${k}`)
      if (d !== null) return d
    }
  }
  return path === '' ? '(the value)' : path
}

/** "field is X in the index, Y from …" for the first field where the index and the value decided again differ; null when equal. */
function mismatch(stored: unknown, again: unknown, prefix: string, from: string): string | null {
  // Through JSON, as the index was written: -0 is 0 there, and undefined fields are dropped.
  const normalized: unknown = JSON.parse(JSON.stringify(again) ?? 'null')
  const path = firstDifference(stored, normalized)
  if (path === null) return null
  const field = path === '(the value)' ? prefix : `${prefix}${prefix === '' ? '' : '.'}${path}`
  return `${field} is ${shown(at(stored, path))} in the index, ${shown(at(normalized, path))} ${from}`
}

/** The records of the evidence by `runId`. */
function byRunId(records: readonly EvidenceRecord[]): Map<string, EvidenceRecord[]> {
  const map = new Map<string, EvidenceRecord[]>()
  for (const r of records) map.set(r.record.runId, [...(map.get(r.record.runId) ?? []), r])
  return map
}

/** A cell's records per arm, in launch order; null when one of its arms' records could not be read. */
function cellRecords(cell: EvidenceCell, records: readonly EvidenceRecord[]): Record<EvidenceRecord['arm'], RunRecord[]> | null {
  const own = records.filter((r) => r.cell === cell.id)
  if (own.length !== cell.arms.length) return null
  const arm = (name: EvidenceRecord['arm']) =>
    own
      .filter((r) => r.arm === name)
      .sort((a, b) => a.launch - b.launch)
      .map((r) => r.record)
  return { cell: arm('cell'), baseline: arm('baseline'), candidate: arm('candidate') }
}

/** Resolves what a gate or check judged to the evidence's run records, or says why it cannot. */
class Judgement {
  private readonly index: EvidenceIndex
  private readonly ids: Map<string, EvidenceRecord[]>

  constructor(index: EvidenceIndex, records: readonly EvidenceRecord[]) {
    this.index = index
    this.ids = byRunId(records)
  }

  /**
   * One run record by `runId`: the one in `cell` if it holds it, else the only one in the evidence;
   * with `stored`, only the evidence's stored baselines are searched.
   */
  private record(runId: string, cell: string, stored: boolean): RunRecord | string {
    const found = (this.ids.get(runId) ?? []).filter((r) => !stored || r.cell === STORED_BASELINE_CELL)
    const own = found.filter((r) => r.cell === cell)
    const one = own.length === 1 ? own[0] : found.length === 1 ? found[0] : undefined
    if (one !== undefined) return one.record
    return found.length === 0
      ? `it judged the run record ${runId}, which is not in this evidence (or could not be read)`
      : `it judged the run record ${runId}, which ${found.length} records of this evidence carry`
  }

  private list(runIds: readonly string[], cell: string, stored = false): RunRecord[] | string {
    const out: RunRecord[] = []
    for (const id of runIds) {
      const r = this.record(id, cell, stored)
      if (typeof r === 'string') return r
      out.push(r)
    }
    return out
  }

  /**
   * The records judged, in the roles and order the entry names them; a string saying why not. Any
   * records of the evidence may be judged, not only the cell's own in the cell's order: a matcher
   * may be handed a pair with its arms swapped, one arm of a pair, a pair made of two cells' records
   * or a stored baseline against a cell. A stored baseline must be one the evidence keeps.
   */
  arms(judged: JudgedRecords, cellId: string): CheckArms | string {
    if (judged.kind === 'cell') {
      const list = this.list(judged.records, cellId)
      return typeof list === 'string' ? list : { cell: list }
    }
    const stored = judged.storedBaseline !== null
    if (stored) {
      const unknown = judged.baseline.filter((id) => !this.index.storedBaselines.some((s) => s.runId === id))
      if (unknown.length > 0) return `it judged the stored baseline ${unknown.join(', ')}, which this evidence does not keep`
    }
    const baseline = this.list(judged.baseline, cellId, stored)
    if (typeof baseline === 'string') return baseline
    const candidate = this.list(judged.candidate, cellId)
    return typeof candidate === 'string' ? candidate : { baseline, candidate }
  }

  /** What a gate judged, resolved; a string saying why it cannot be. */
  input(judged: Judged, cellId: string): GateInput | string {
    if (judged.kind === 'capacity') return judged
    const arms = this.arms(judged, cellId)
    if (typeof arms === 'string') return arms
    return 'cell' in arms ? { kind: 'cell', records: arms.cell } : { kind: 'pair', ...arms }
  }

  /** The stored baseline a pair entry judged against (its file and record), or null when both arms were measured in this run. */
  storedBaseline(judged: Judged, baseline: readonly RunRecord[]): StoredBaseline | null {
    if (judged.kind !== 'pair' || judged.storedBaseline === null || baseline.length !== 1) return null
    return { kind: 'stored-baseline', file: judged.storedBaseline.file, record: baseline[0] as RunRecord }
  }

  /** The probes of a search whose SLO verdict differs from its run record's (probes whose record is in the evidence). */
  probeProblems(search: CapacityInput): string[] {
    const out: string[] = []
    search.probes.forEach((probe, k) => {
      const found = this.ids.get(probe.runId) ?? []
      if (found.length !== 1) return
      const d = sloGate((found[0] as EvidenceRecord).record, {
        ...search.slo,
        percentile: search.requiredFraction * 100,
        confidence: search.confidence,
        gate: 'capacity probe',
      })
      const again = { outcome: d.outcome, fraction: d.effect.estimate, low: d.effect.low, high: d.effect.high }
      const differs = mismatch(
        { outcome: probe.outcome, fraction: probe.fraction, low: probe.low, high: probe.high },
        again,
        '',
        'from its run record',
      )
      if (differs !== null) out.push(`search ${search.id} probe ${k + 1} (${probe.runId}): ${differs}`)
    })
    return out
  }
}

/** "the assertion held, so its test cannot have failed for it" and the like, for a gate or check entry. */
function testProblem(entry: { passed: boolean; isNot: boolean; testPassed: boolean }): string | null {
  const held = entry.passed !== entry.isNot
  if (held || !entry.testPassed) return null
  return `testPassed is true in the index, but its assertion (${entry.isNot ? '.not, ' : ''}passed ${entry.passed}) did not hold`
}

function gateProblems(g: GateEntry, judgement: Judgement): string[] {
  const where = `index.json: gate ${g.decision.gate} on cell ${g.cell} ("${g.test}")`
  const out: string[] = []
  const input = judgement.input(g.judged, g.cell)
  if (typeof input === 'string') out.push(`${where}: cannot be decided again: ${input}`)
  else {
    let again: GateDecision | null = null
    try {
      // As the matcher: the floor it recorded, its warning, and under strict noise its outcome.
      again = withNoiseFloor(decideAgain(g.decision.gate, input, g.options), g.decision.noiseFloor ?? null)
      // Against a stored baseline the matcher added where the baseline came from; so does verify.
      const stored = input.kind === 'pair' ? judgement.storedBaseline(g.judged, input.baseline) : null
      if (stored !== null && input.kind === 'pair') {
        const floor = storedBaselineFloor(g.decision.gate, g.options)
        again = {
          ...again,
          // As the matcher: one stored launch cannot be repeated, so no launches are hinted.
          decideHint: again.decideHint?.set.repeats === undefined ? again.decideHint : null,
          warnings: [...again.warnings, storedBaselineWarning(stored, input.candidate[0] as RunRecord, floor)],
        }
      }
    } catch (error) {
      out.push(`${where}: cannot be decided again from its run records: ${(error as Error).message.split('\n')[0]}`)
    }
    const differs = again === null ? null : mismatch(g.decision, again, 'decision', 'from the run records')
    if (differs !== null) out.push(`${where}: ${differs}`)
    if (input.kind === 'capacity')
      for (const s of [input.candidate, input.baseline]) for (const p of judgement.probeProblems(s)) out.push(`${where}: ${p}`)
  }
  const passed = passesUnder(g.decision.outcome, g.policy)
  if (passed !== g.passed)
    out.push(
      `${where}: passed is ${g.passed} in the index, ${passed} from its outcome ${g.decision.outcome} under inconclusive '${g.policy.inconclusive}'`,
    )
  const kindDefault = DEFAULT_INCONCLUSIVE[g.decision.kind]
  if (g.policy.from === 'default' && g.policy.inconclusive !== kindDefault)
    out.push(
      `${where}: policy.inconclusive is '${g.policy.inconclusive}' in the index, '${kindDefault}' by default for a ${g.decision.kind} claim`,
    )
  const test = testProblem(g)
  if (test !== null) out.push(`${where}: ${test}`)
  return out
}

function checkProblems(cell: EvidenceCell, k: PairCheck, judgement: Judgement): string[] {
  const where = `index.json: check ${k.check} on cell ${cell.id} ("${k.test}")`
  const out: string[] = []
  const arms = judgement.arms(k.judged, cell.id)
  if (typeof arms === 'string') out.push(`${where}: cannot be checked again: ${arms}`)
  else {
    try {
      const differs = mismatch({ passed: k.passed, findings: k.findings }, checkAgain(k.check, arms), '', 'from the run records')
      if (differs !== null) out.push(`${where}: ${differs}`)
    } catch (error) {
      out.push(`${where}: cannot be checked again: ${(error as Error).message}`)
    }
  }
  const test = testProblem(k)
  if (test !== null) out.push(`${where}: ${test}`)
  return out
}

/** A cell's disposition and reason decided again from its records and checks; null when its records could not all be read. */
function dispositionProblem(cell: EvidenceCell, records: readonly EvidenceRecord[]): string | null {
  const own = cellRecords(cell, records)
  if (own === null) return null
  // With no records the index alone says whether it never ran or threw (the error is in its reason).
  const status =
    cell.arms.length > 0 ? 'measured' : cell.disposition === 'pending' ? 'pending' : cell.disposition === 'blocked' ? 'threw' : 'measured'
  const error = status === 'threw' && cell.reason?.startsWith(BLOCKED_PREFIX) === true ? cell.reason.slice(BLOCKED_PREFIX.length) : null
  const again = cellDisposition({ status, error, records: own, required: cell.required, maxFailedShare: cell.maxFailedShare }, cell.checks)
  const differs = mismatch({ disposition: cell.disposition, reason: cell.reason }, again, '', 'from its run records and checks')
  return differs === null ? null : `index.json: cell ${cell.id}: ${differs}`
}

/**
 * Every verdict of the index decided again from its run records (`records`: those that could be
 * read; a record that could not is already a problem, and what rests on it is not judged again).
 * Returns every mismatch, each naming the cell, the gate or check, and both values.
 */
export function rederiveVerdicts(index: EvidenceIndex, records: readonly EvidenceRecord[]): string[] {
  const judgement = new Judgement(index, records)
  const problems: string[] = []
  for (const cell of index.cells) {
    for (const k of cell.checks) problems.push(...checkProblems(cell, k, judgement))
    const disposition = dispositionProblem(cell, records)
    if (disposition !== null) problems.push(disposition)
  }
  for (const g of index.gates) problems.push(...gateProblems(g, judgement))
  // Failed tests that made no servegate assertion are not in the index: their reasons are taken as given (they only forbid).
  const failedTests = index.promotion.reasons.filter((r) => FAILED_TEST_REASON_PATTERN.test(r))
  const promotion = mismatch(
    index.promotion,
    promotionOf(index.cells, index.gates, failedTests, index.partial),
    'promotion',
    'from the cells, gates and checks',
  )
  if (promotion !== null) problems.push(`index.json: ${promotion}`)
  return problems
}
