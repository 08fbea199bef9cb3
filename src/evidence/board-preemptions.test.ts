import { beforeAll, describe, expect, test } from 'vitest'
import { telemetryWithPreemptions } from '../../fixtures/engine-telemetry.ts'
import { decisionMeta } from '../../fixtures/judged-meta.ts'
import { measuredArm } from '../../fixtures/manifest.ts'
import type { EvidenceIndex } from '../schema/evidence.ts'
import { RunRecord } from '../schema/run.ts'
import type { DeclaredCell } from '../schema/task-meta.ts'
import { boardFiles, renderBoard } from './board.ts'
import { buildEvidence } from './build.ts'
import { renderPrComment } from './pr-comment.ts'
import { type EvidenceRecord, rederiveVerdicts } from './rederive.ts'

let baseline: RunRecord
let candidate: RunRecord
beforeAll(async () => {
  ;[baseline, candidate] = await Promise.all([measuredArm(300), measuredArm(600)])
}, 60_000)

/** One pair cell with a decode win and a TTFT hold, its arms' engines having counted these preemptions over 12 requests. */
function evidence(preempted: { baseline: number | null; candidate: number | null } | null): EvidenceIndex {
  return evidenceWithRecords(preempted).index
}

/** The same, with the run records as `servegate verify` reads them back from the evidence (JSON, parsed). */
function evidenceWithRecords(preempted: { baseline: number | null; candidate: number | null } | null): {
  index: EvidenceIndex
  records: EvidenceRecord[]
} {
  const arm = (r: RunRecord, n: number | null): RunRecord => (preempted === null ? r : { ...r, telemetry: telemetryWithPreemptions(n) })
  const pair = { baseline: [arm(baseline, preempted?.baseline ?? null)], candidate: [arm(candidate, preempted?.candidate ?? null)] }
  const cell: DeclaredCell = {
    id: 'c0',
    kind: 'pair',
    required: true,
    ladder: null,
    engines: { baseline: 'sim-300', candidate: 'sim-600' },
    status: 'measured',
    error: null,
    records: pair,
  }
  const win = decisionMeta('c0', pair, { gate: 'toWinDecode', launchNoise: 0 })
  const hold = decisionMeta('c0', pair, { gate: 'toHoldLatency', metric: 'ttft', percentile: 95, notWorseThanPct: 10 })
  const tests = [
    { file: 'a.bench.ts', name: 'c0 > wins decode', state: 'passed' as const, meta: { decisions: [win], checks: [] } },
    { file: 'a.bench.ts', name: 'c0 > holds TTFT', state: 'passed' as const, meta: { decisions: [hold], checks: [] } },
  ]
  const { index } = buildEvidence([{ file: 'a.bench.ts', meta: { cells: [cell] } }], tests, { suiteCommit: null, redact: false })
  const readBack = (record: RunRecord): RunRecord => RunRecord.parse(JSON.parse(JSON.stringify(record)))
  const records: EvidenceRecord[] = [
    { cell: 'c0', arm: 'baseline', launch: 0, record: readBack(pair.baseline[0] as RunRecord) },
    { cell: 'c0', arm: 'candidate', launch: 0, record: readBack(pair.candidate[0] as RunRecord) },
  ]
  return { index, records }
}

/** The gate table that starts with `head` in a Markdown text, as rows of cells. */
function tableAfter(markdown: string, head: string): string[][] {
  const lines = markdown.split('\n')
  const start = lines.findIndex((l) => l.startsWith(head))
  const rows: string[][] = []
  for (const line of lines.slice(start)) {
    if (!line.startsWith('| ')) break
    rows.push(line.slice(2, -2).split(' | '))
  }
  return rows
}

describe('preemptions beside the verdict in the evidence', () => {
  test('the decisions keep both arms; the uneven pair warns in its facts', () => {
    const index = evidence({ baseline: 0, candidate: 6 })
    for (const g of index.gates) {
      expect(g.decision.preemptions).toEqual({
        baseline: { count: 0, requests: 12, perRequest: 0, reason: null },
        candidate: { count: 6, requests: 12, perRequest: 0.5, reason: null },
        uneven: true,
      })
      expect(g.decision.warnings.join('\n')).toMatch(
        /^the arms preempted very differently \(baseline 0 in 12 requests \(0\.0%\), candidate 6/m,
      )
    }
  })

  test('the board and the PR comment gain a preemptions column, uneven marked', () => {
    const index = evidence({ baseline: 0, candidate: 6 })
    const board = tableAfter(renderBoard(index, boardFiles(index)), '| cell | gate | outcome |')
    expect(board[0]).toEqual([
      'cell',
      'gate',
      'outcome',
      'effect [interval]',
      'estimator',
      'samples',
      'preemptions (baseline / candidate)',
      'test',
    ])
    expect(board.slice(2).map((r) => r[6])).toEqual(['0 / 6 (uneven)', '0 / 6 (uneven)'])
    const comment = tableAfter(renderPrComment(index, { charts: '' }), '| cell | gate (metric) |')
    expect(comment[0]?.at(-1)).toBe('preemptions (baseline / candidate)')
    expect(comment.slice(2).map((r) => r.at(-1))).toEqual(['0 / 6 (uneven)', '0 / 6 (uneven)'])
  })

  test('servegate verify decides them again from the records read back: the same facts, no problem', () => {
    const { index, records } = evidenceWithRecords({ baseline: 0, candidate: 6 })
    expect(rederiveVerdicts(index, records)).toEqual([])
    // A count edited in a record is caught.
    const edited = records.map((r) =>
      r.arm === 'candidate' ? { ...r, record: { ...r.record, telemetry: telemetryWithPreemptions(1) } } : r,
    )
    expect(rederiveVerdicts(index, edited).join('\n')).toMatch(/preemptions/)
  })

  test('one arm not reported: — in its place; no engine reported any: no column at all', () => {
    const partial = evidence({ baseline: 3, candidate: null })
    const rows = tableAfter(renderBoard(partial, boardFiles(partial)), '| cell | gate | outcome |')
    expect(rows.slice(2).map((r) => r[6])).toEqual(['3 / —', '3 / —'])
    const none = evidence(null)
    expect(renderBoard(none, boardFiles(none))).not.toContain('preemptions')
    expect(renderPrComment(none, { charts: '' })).not.toContain('preemptions')
  })
})
