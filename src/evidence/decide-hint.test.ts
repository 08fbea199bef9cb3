import { beforeAll, expect, test } from 'vitest'
import { measuredArm } from '../../fixtures/manifest.ts'
import { decideAgain } from '../gates/decide-again.ts'
import { passesUnder, resolveInconclusive } from '../gates/inconclusive-policy.ts'
import type { RunRecord } from '../schema/run.ts'
import { boardFiles, renderBoard } from './board.ts'
import { buildEvidence } from './build.ts'
import { renderHtml } from './html.ts'
import { renderPrComment } from './pr-comment.ts'

let record: RunRecord

beforeAll(async () => {
  // 12 requests the client sent 11.13 ms late at p99: not judged, and too few to show p90 anyway.
  const measured = await measuredArm(400)
  record = {
    ...measured,
    harness: {
      ...measured.harness,
      harnessLimited: true,
      reasons: ['send lag p99 11.13 ms > 5 ms'],
      exceeded: [{ option: 'sendLagLimitMs', limit: 5, value: 11.13, thread: 'cell' }],
    },
  }
}, 60_000)

test("an undecided gate's hint reaches the board, the page and the PR comment in the same words", () => {
  const options = { gate: 'toMeetSLO' as const, ttftMs: 5000, percentile: 90 }
  const decision = decideAgain('toMeetSLO', { kind: 'cell', records: [record] }, options)
  const hint = decision.decideHint?.text as string
  expect(hint).toMatch(/^to decide it, set sendLagLimitMs: 20 \(.*\) and requests: 49 \(12 requests cannot show 90% good/)
  const policy = resolveInconclusive(decision.kind, undefined, undefined)
  const meta = {
    decisions: [
      {
        cell: 'c4',
        decision,
        judged: { kind: 'cell' as const, records: [record.runId] },
        options,
        policy,
        passed: passesUnder('inconclusive', policy),
        isNot: false,
      },
    ],
    checks: [],
  }
  const cell = {
    id: 'c4',
    kind: 'cell' as const,
    required: true,
    ladder: null,
    engines: { cell: 'sim-400' },
    status: 'measured' as const,
    error: null,
    records: { cell: [record] },
  }
  const { index } = buildEvidence(
    [{ file: 'a.bench.ts', meta: { cells: [cell] } }],
    [{ file: 'a.bench.ts', name: 'c4 > meets its SLO', state: 'failed', meta }],
    { suiteCommit: null, redact: false },
  )
  const board = renderBoard(index, boardFiles(index), { charts: '' })
  const page = renderHtml(index, board, [])
  const comment = renderPrComment(index, { charts: '' })
  expect(board).toContain(hint)
  expect(comment).toContain(hint)
  expect(page.replaceAll('&#39;', "'").replaceAll('&quot;', '"')).toContain(hint)
  // Above the fold of the comment too: the reason the evidence is not promotable says it.
  expect(comment.slice(0, comment.indexOf('<details'))).toContain(hint)
})
