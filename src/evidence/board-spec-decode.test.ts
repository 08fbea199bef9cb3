import { describe, expect, test } from 'vitest'
import { testManifest } from '../../fixtures/manifest.ts'
import { computeCellMetrics } from '../metrics/cell-metrics.ts'
import { assembleRecord, cellPlan } from '../runner/run-record.ts'
import { resolveCellOptions } from '../runner/cell-options.ts'
import { nothingSent } from '../metrics/run-assembly.ts'
import type { RequestRecord, RunRecord, SpecDecodeMetrics } from '../schema/run.ts'
import type { DeclaredCell } from '../schema/task-meta.ts'
import { armSummary } from './arm-summary.ts'
import { boardFiles, renderBoard } from './board.ts'
import { buildEvidence } from './build.ts'

/** A record of `n` ok requests (the given ones cancelled), with the engine's draft acceptance as given. */
function record(specDecode: SpecDecodeMetrics | null, cancelled: number[] = []): RunRecord {
  const o = resolveCellOptions({ baseUrl: 'http://127.0.0.1:1', model: 'm', requests: 4 })
  const requests = Array.from({ length: 4 }, (_, index): RequestRecord => {
    const common = {
      index,
      queueDelayMs: 0,
      sendLagMs: 0,
      startOffsetMs: index * 10,
      scheduledOffsetMs: null,
      ttftMs: 20,
      timeToFirstOutputMs: 20,
      e2eMs: 100,
      generationMs: 80,
      tpotMs: 10,
      decodeTokPerS: 100,
      effectivePrefillTokPerS: 1000,
      promptTokens: 20,
      completionTokens: 9,
      completionTokenSource: 'usage' as const,
      reasoningChunks: 0,
      contentChunks: 9,
      itlMs: [10],
      itlPacked: null,
      finishReason: 'length',
      plannedPromptTokens: null,
      wireSha256: null,
      canary: null,
      outputAdherence: null,
      score: null,
      outputText: null,
      engineTimings: null,
      enginePrefillTokPerS: null,
      sendAttempts: 1,
      session: null,
      turn: null,
      usageRule: null,
      retokenizedTokens: null,
      reportedUsage: null,
    }
    return cancelled.includes(index)
      ? ({ status: 'cancelled', ...common } as RequestRecord)
      : ({ status: 'ok', ...common } as RequestRecord)
  })
  const metrics = { ...computeCellMetrics(requests, 1000), specDecode }
  const counts = { completed: 4 - cancelled.length, failed: 0, failures: {}, cancelled: cancelled.length }
  const now = new Date('2026-01-01T00:00:00Z')
  const r = assembleRecord({
    options: o,
    startedAt: now,
    finishedAt: now,
    target: 'http://127.0.0.1:1',
    plan: cellPlan(o, null, null, null, null),
    requests,
    counts,
    unsent: 0,
    metrics,
    harness: nothingSent(),
    manifest: testManifest(),
    cellFailure: null,
  })
  return r
}

const VLLM: SpecDecodeMetrics = {
  source: 'prometheus-counters',
  drafts: 100,
  draftTokens: 300,
  acceptedTokens: 210,
  acceptanceRate: 0.7,
  meanAcceptanceLength: 3.1,
  acceptanceRateByPosition: [0.9, 0.7, 0.5],
  note: null,
}

function board(baseline: RunRecord, candidate: RunRecord): string {
  const cell: DeclaredCell = {
    id: 'decode',
    kind: 'pair',
    required: true,
    ladder: null,
    engines: { baseline: 'vllm', candidate: 'vllm-eagle' },
    status: 'measured',
    error: null,
    records: { baseline: [baseline], candidate: [candidate] },
  }
  const { index } = buildEvidence([{ file: 'a.bench.ts', meta: { cells: [cell] } }], [], { suiteCommit: null, redact: false })
  return renderBoard(index, boardFiles(index))
}

/** The rows of the board's table under `heading`. */
function rowsUnder(md: string, heading: string): string[] {
  const lines = md.split('\n')
  const at = lines.findIndex((l) => l.startsWith(heading))
  expect(at).toBeGreaterThan(0)
  const rows: string[] = []
  for (const l of lines.slice(at + 2)) {
    if (!l.startsWith('|')) break
    rows.push(l)
  }
  return rows
}

describe('the board', () => {
  test('draws each arm’s draft acceptance where an engine reported one', () => {
    const md = board(record(null), record(VLLM))
    expect(rowsUnder(md, '## Speculative decoding')).toEqual([
      '| arm | acceptance | mean acceptance length | draft tokens | from |',
      '| --- | --- | --- | --- | --- |',
      '| decode · baseline | none reported | — | — | — |',
      '| decode · candidate | 70.0% | 3.10 | 300 | prometheus-counters |',
    ])
  })

  test('has no such section, and arm summaries no such field, where no engine drafted', () => {
    expect(board(record(null), record(null))).not.toContain('## Speculative decoding')
    expect(armSummary(record(null), 'baseline', 1, { path: 'a', bytes: 1, sha256: 'x' })).not.toHaveProperty('specDecode')
  })

  test('counts cancelled requests apart from failed ones', () => {
    const md = board(record(null, [1, 3]), record(null, [1, 3]))
    expect(md).toContain(
      ['| cell · arm | completed | failed | cancelled | cell failure |', '| --- | --- | --- | --- | --- |'].join('\n') +
        ['', '| decode · baseline | 2 | 0 | 2 |  |', '| decode · candidate | 2 | 0 | 2 |  |'].join('\n'),
    )
    expect(board(record(null), record(null))).not.toContain('| cancelled |')
  })
})
