import { describe, expect, test } from 'vitest'
import { EvidenceIndex } from '../schema/evidence.ts'
import { SAMPLE_ENGINES, sampleEvidence } from './fixture.ts'

describe('sampleEvidence', () => {
  test('is a valid evidence index, the same on every call', () => {
    const index = sampleEvidence()
    expect(EvidenceIndex.parse(index)).toEqual(index)
    expect(sampleEvidence()).toEqual(index)
  })

  test('two workloads × concurrency 1, 4, 16 of vLLM against photon, with a failed and a pending cell', () => {
    const { cells } = sampleEvidence()
    expect(cells.map((c) => [c.plan?.promptTokens, c.plan?.concurrency, c.disposition])).toEqual([
      [1024, 1, 'accepted'],
      [1024, 4, 'accepted'],
      [1024, 16, 'accepted'],
      [8192, 1, 'accepted'],
      [8192, 4, 'accepted'],
      [8192, 16, 'failed'],
      [8192, 64, 'pending'],
    ])
    expect(cells.every((c) => c.engines.baseline === SAMPLE_ENGINES.baseline && c.engines.candidate === SAMPLE_ENGINES.candidate)).toBe(
      true,
    )
    const failed = cells[5]?.arms.find((a) => a.arm === 'candidate')
    expect(failed).toMatchObject({ completed: 0, outputThroughputTokPerS: null })
    expect(failed?.cellFailure).toMatch(/out of memory/)
    expect(cells[6]?.arms).toEqual([])
  })

  test('statistics, findings and promotion follow from the cells and gates', () => {
    const index = sampleEvidence()
    expect(index.statistics).toEqual({
      planned: 7,
      required: 7,
      accepted: 5,
      failed: 1,
      blocked: 0,
      pending: 1,
      matchedPairs: 5,
      gates: { pass: 7, fail: 1, inconclusive: 2 },
    })
    expect(index.gates.map((g) => `${g.decision.gate} ${g.decision.outcome} ${g.testPassed}`)).toContain('toHoldLatency inconclusive true')
    expect(index.gates.map((g) => `${g.decision.gate} ${g.decision.outcome} ${g.testPassed}`)).toContain('toWinDecode fail false')
    expect(new Set(index.findings.map((f) => f.kind))).toEqual(
      new Set(['non-win', 'inconclusive', 'descriptive-p99', 'check-failed', 'cell-not-accepted']),
    )
    expect(index.promotion.promotable).toBe(false)
    expect(index.promotion.reasons).toHaveLength(4)
  })
})
