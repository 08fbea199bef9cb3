/**
 * `rederiveVerdicts` decides each gate and check again from the run records its entry names, in
 * the roles it names them: a matcher may judge a pair with its arms swapped, one arm of a pair, a
 * pair made of two cells' records or a stored baseline, and each verifies. What it still catches:
 * a record missing from the evidence, a stored baseline the evidence does not keep, a record
 * edited after the decision, and a decision (or the roles it judged) edited after the fact.
 */
import { beforeAll, describe, expect, test } from 'vitest'
import { around } from '../../fixtures/gate-fixture.ts'
import { measuredArm, testManifest } from '../../fixtures/manifest.ts'
import { checkAgain } from '../gates/checks.ts'
import { decideAgain, type GateInput } from '../gates/decide-again.ts'
import { passesUnder, resolveInconclusive } from '../gates/inconclusive-policy.ts'
import { storedBaselineFloor, storedBaselineWarning } from '../record/stored-baseline.ts'
import type { EvidenceIndex } from '../schema/evidence.ts'
import type { CheckName, GateName } from '../schema/gate.ts'
import type { RunRecord } from '../schema/run.ts'
import type { CheckMeta, DecisionMeta, DeclaredCell, JudgedRecords, TestMeta } from '../schema/task-meta.ts'
import { buildEvidence, type TestInput } from './build.ts'
import { type EvidenceRecord, rederiveVerdicts, STORED_BASELINE_CELL } from './rederive.ts'

/** A measured record under another run id, each ok request's decode rate set around `decodeTokPerS` (the same on every run). */
function withDecode(record: RunRecord, runId: string, decodeTokPerS: number): RunRecord {
  const rates = around(decodeTokPerS, record.requests.length)
  return {
    ...record,
    runId,
    requests: record.requests.map((r, i) => (r.status === 'ok' ? { ...r, decodeTokPerS: rates[i] ?? null } : r)),
  }
}

let slow: RunRecord
let fast: RunRecord

beforeAll(async () => {
  // One measured run, its decode rates set: the gates' outcomes do not wait on this machine's timing.
  const measured = await measuredArm(300)
  slow = withDecode(measured, 'slow', 300)
  fast = withDecode(measured, 'fast', 600)
}, 60_000)

/** What a matcher judged and read: records by role, as `judgedRecordsOf` and the gate function see them. */
interface Judging {
  judged: JudgedRecords
  input: Extract<GateInput, { kind: 'pair' | 'cell' }>
}

function pairOf(baseline: RunRecord[], candidate: RunRecord[], storedFile: string | null = null): Judging {
  const ids = (list: RunRecord[]) => list.map((r) => r.runId)
  return {
    judged: {
      kind: 'pair',
      baseline: ids(baseline),
      candidate: ids(candidate),
      storedBaseline: storedFile === null ? null : { file: storedFile },
    },
    input: { kind: 'pair', baseline, candidate },
  }
}

function armOf(records: RunRecord[]): Judging {
  return { judged: { kind: 'cell', records: records.map((r) => r.runId) }, input: { kind: 'cell', records } }
}

/** The decision a gate matcher records on `cell`, under the default policy of its kind. */
function decided(
  cell: string,
  { judged, input }: Judging,
  options: Record<string, unknown> & { gate: GateName },
  isNot = false,
  warnings: readonly string[] = [],
): DecisionMeta {
  const d = decideAgain(options.gate, input, options)
  const decision = { ...d, warnings: [...d.warnings, ...warnings] }
  const policy = resolveInconclusive(decision.kind, undefined, undefined)
  return { cell, decision, judged, options, policy, passed: passesUnder(decision.outcome, policy), isNot }
}

/** The check a check matcher records on `cell`. */
function checked(cell: string, check: CheckName, { judged, input }: Judging, isNot = false): CheckMeta {
  const arms = input.kind === 'cell' ? { cell: input.records } : { baseline: input.baseline, candidate: input.candidate }
  return { cell, check, ...checkAgain(check, arms), judged, isNot }
}

function declared(id: string, records: DeclaredCell['records']): DeclaredCell {
  const kind = records.cell === undefined ? 'pair' : 'cell'
  const engines: Record<string, string> = kind === 'pair' ? { baseline: 'a', candidate: 'b' } : { cell: 'a' }
  return { id, kind, required: true, ladder: null, engines, status: 'measured', error: null, records }
}

/** One test per decision and check, passed when its assertion held (as vitest would have it). */
function testsOf(meta: Partial<TestMeta> & { decisions?: DecisionMeta[]; checks?: CheckMeta[] }): TestInput[] {
  const held = (e: { passed: boolean; isNot: boolean }): TestInput['state'] => (e.passed !== e.isNot ? 'passed' : 'failed')
  return [
    ...(meta.decisions ?? []).map((d, k) => ({
      file: 'a.bench.ts',
      name: `gate ${k + 1}`,
      state: held(d),
      meta: { decisions: [d], checks: [], storedBaselines: meta.storedBaselines ?? [] },
    })),
    ...(meta.checks ?? []).map((c, k) => ({
      file: 'a.bench.ts',
      name: `check ${k + 1}`,
      state: held(c),
      meta: { decisions: [], checks: [c] },
    })),
  ] satisfies TestInput[]
}

/** The index of these cells and tests, and its records as `verifyEvidence` reads them back from their files. */
function evidenceOf(cells: DeclaredCell[], tests: TestInput[]): { index: EvidenceIndex; records: EvidenceRecord[] } {
  const built = buildEvidence([{ file: 'a.bench.ts', meta: { cells } }], tests, { suiteCommit: null, redact: false })
  const read = (path: string) => JSON.parse(built.runs.find((r) => r.path === path)?.content ?? 'null') as RunRecord
  const records: EvidenceRecord[] = built.index.cells.flatMap((c) =>
    c.arms.map((a) => ({ cell: c.id, arm: a.arm, launch: a.launch, record: read(a.record.path) })),
  )
  for (const s of built.index.storedBaselines)
    records.push({ cell: STORED_BASELINE_CELL, arm: 'baseline', launch: 1, record: read(s.record.path) })
  return { index: built.index, records }
}

/** A copy of a record under another run id, as another launch or run would have it. */
function rerun(record: RunRecord, runId: string, over: Partial<RunRecord> = {}): RunRecord {
  return { ...record, runId, ...over }
}

const WIN = { gate: 'toWinDecode', margin: 0.1, launchNoise: 0 } as const
const SLO = { gate: 'toMeetSLO', ttftMs: 60_000, percentile: 90, confidence: 0.98 } as const

describe('a gate or check on any subject built from measured results verifies', () => {
  test('the arms swapped: a `.not` decode win and a matched-pair check on them verify, and the evidence is promotable', () => {
    const swapped = pairOf([fast], [slow])
    const gate = decided('pair', swapped, WIN, true)
    expect([gate.decision.outcome, gate.passed]).toEqual(['fail', false])
    const { index, records } = evidenceOf(
      [declared('pair', { baseline: [slow], candidate: [fast] })],
      testsOf({ decisions: [gate], checks: [checked('pair', 'toBeMatchedPair', swapped)] }),
    )
    expect(index.gates[0]?.testPassed).toBe(true)
    expect(index.promotion).toEqual({ promotable: true, reasons: [] })
    expect(rederiveVerdicts(index, records)).toEqual([])
  })

  test("one arm of a pair: a single-arm gate and a check on the candidate's records, named on the pair cell", () => {
    const candidate = armOf([fast])
    const { index, records } = evidenceOf(
      [declared('pair', { baseline: [slow], candidate: [fast] })],
      testsOf({ decisions: [decided('pair', candidate, SLO)], checks: [checked('pair', 'toPassCanaries', candidate)] }),
    )
    expect(index.gates[0]?.judged).toEqual({ kind: 'cell', records: [fast.runId] })
    expect(rederiveVerdicts(index, records)).toEqual([])
  })

  test("a pair assembled from two cells' records, named on either cell or on neither", () => {
    const a = rerun(slow, 'cell-a')
    const b = rerun(fast, 'cell-b')
    const assembled = pairOf([a], [b])
    const { index, records } = evidenceOf(
      [declared('a', { cell: [a] }), declared('b', { cell: [b] })],
      testsOf({ decisions: [decided('b', assembled, WIN), decided('a vs b', assembled, WIN)] }),
    )
    expect(index.gates.map((g) => g.decision.outcome)).toEqual(['pass', 'pass'])
    expect(rederiveVerdicts(index, records)).toEqual([])
  })

  test('a stored baseline the evidence keeps, against one arm of a pair', () => {
    const stored = { kind: 'stored-baseline' as const, file: 'main/c.json', record: rerun(slow, 'stored-main') }
    const judging = pairOf([stored.record], [fast], stored.file)
    const warning = storedBaselineWarning(stored, fast, storedBaselineFloor('toWinDecode', WIN))
    const { index, records } = evidenceOf(
      [declared('pair', { baseline: [slow], candidate: [fast] })],
      testsOf({
        decisions: [decided('pair', judging, WIN, false, [warning])],
        storedBaselines: [{ file: stored.file, record: stored.record }],
      }),
    )
    expect(index.storedBaselines.map((s) => s.runId)).toEqual(['stored-main'])
    expect(rederiveVerdicts(index, records)).toEqual([])
  })
})

describe('what verify still catches', () => {
  test('a record the decision names that is missing from the evidence, or that the evidence could not read', () => {
    const elsewhere = rerun(slow, 'not-kept')
    const { index, records } = evidenceOf(
      [declared('pair', { baseline: [slow], candidate: [fast] })],
      testsOf({ decisions: [decided('pair', pairOf([elsewhere], [fast]), WIN)] }),
    )
    expect(rederiveVerdicts(index, records)).toEqual([
      'index.json: gate toWinDecode on cell pair ("gate 1"): cannot be decided again: it judged the run record not-kept, ' +
        'which is not in this evidence (or could not be read)',
    ])
    const swapped = evidenceOf(
      [declared('pair', { baseline: [slow], candidate: [fast] })],
      testsOf({ decisions: [decided('pair', pairOf([fast], [slow]), WIN, true)] }),
    )
    const unread = swapped.records.filter((r) => r.record.runId !== fast.runId)
    expect(rederiveVerdicts(swapped.index, unread)).toContain(
      `index.json: gate toWinDecode on cell pair ("gate 1"): cannot be decided again: it judged the run record ${fast.runId}, ` +
        'which is not in this evidence (or could not be read)',
    )
  })

  test('a stored baseline the evidence does not keep, or a record of this run passed off as one, is refused', () => {
    const stored = { kind: 'stored-baseline' as const, file: 'main/c.json', record: rerun(slow, 'stored-main') }
    const warning = storedBaselineWarning(stored, fast, storedBaselineFloor('toWinDecode', WIN))
    const cells = [declared('pair', { baseline: [slow], candidate: [fast] })]
    const unkept = evidenceOf(
      cells,
      testsOf({ decisions: [decided('pair', pairOf([stored.record], [fast], stored.file), WIN, false, [warning])] }),
    )
    expect(rederiveVerdicts(unkept.index, unkept.records)).toEqual([
      'index.json: gate toWinDecode on cell pair ("gate 1"): cannot be decided again: ' +
        'it judged the stored baseline stored-main, which this evidence does not keep',
    ])
    const own = evidenceOf(cells, testsOf({ decisions: [decided('pair', pairOf([slow], [fast], stored.file), WIN, false, [warning])] }))
    expect(rederiveVerdicts(own.index, own.records)).toEqual([
      'index.json: gate toWinDecode on cell pair ("gate 1"): cannot be decided again: ' +
        `it judged the stored baseline ${slow.runId}, which this evidence does not keep`,
    ])
  })

  test('a record edited after the decision: the decision from the edited record differs', () => {
    const { index, records } = evidenceOf(
      [declared('pair', { baseline: [slow], candidate: [fast] })],
      testsOf({ decisions: [decided('pair', pairOf([fast], [slow]), WIN, true)] }),
    )
    // The swapped baseline (the fast record) made as slow as the candidate: no longer a confident loss.
    const edited = records.map((r) => (r.record.runId === fast.runId ? { ...r, record: { ...slow, runId: fast.runId } } : r))
    expect(rederiveVerdicts(index, edited)).toEqual([
      'index.json: gate toWinDecode on cell pair ("gate 1"): decision.effect.estimate is 0.5 in the index, 1 from the run records',
    ])
  })

  test('a decision edited after the fact, or the roles it judged put back in the cell order, is named with both values', () => {
    const swapped = pairOf([fast], [slow])
    const { index, records } = evidenceOf(
      [declared('pair', { baseline: [slow], candidate: [fast] })],
      testsOf({ decisions: [decided('pair', swapped, WIN, true)] }),
    )
    const outcome = structuredClone(index)
    Object.assign((outcome.gates[0] as EvidenceIndex['gates'][number]).decision, { outcome: 'pass' })
    expect(rederiveVerdicts(outcome, records)).toContain(
      'index.json: gate toWinDecode on cell pair ("gate 1"): decision.outcome is "pass" in the index, "fail" from the run records',
    )
    const roles = structuredClone(index)
    Object.assign(roles.gates[0] as object, { judged: pairOf([slow], [fast]).judged })
    // The decode ratio of the arms it named, 0.5, is 2 in the cell's order.
    expect(rederiveVerdicts(roles, records)).toEqual([
      'index.json: gate toWinDecode on cell pair ("gate 1"): decision.effect.estimate is 0.5 in the index, 2 from the run records',
    ])
  })

  test("a pair check on swapped arms is found again in its roles: each finding names the judged baseline's value first", () => {
    const m = testManifest()
    const other = rerun(fast, 'other-revision', { manifest: { ...m, model: { ...m.model, revision: 'def' } } })
    const swapped = pairOf([other], [slow])
    const check = checked('pair', 'toBeMatchedPair', swapped, true)
    expect(check.passed).toBe(false)
    const { index, records } = evidenceOf([declared('pair', { baseline: [slow], candidate: [other] })], testsOf({ checks: [check] }))
    expect(rederiveVerdicts(index, records)).toEqual([])
    const roles = structuredClone(index)
    Object.assign(roles.cells[0]?.checks[0] as object, { judged: pairOf([slow], [other]).judged })
    expect(rederiveVerdicts(roles, records)).toEqual([
      expect.stringMatching(
        /^index\.json: check toBeMatchedPair on cell pair \("check 1"\): findings\.0 is .+ in the index, .+ from the run records$/,
      ),
    ])
  })
})
