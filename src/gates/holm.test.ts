import { describe, expect, test } from 'vitest'
import type { GateDecision } from '../schema/gate.ts'
import { holmAdjust } from './holm.ts'

/** A gate that is decisive (pass) at any confidence up to `limit`: its one-sided p is (1 − limit)/2. */
function gateDecisiveUpTo(limit: number, seen: number[] = []) {
  return (confidence: number): GateDecision => {
    seen.push(confidence)
    return {
      gate: 'toWinDecode',
      outcome: confidence <= limit ? 'pass' : 'inconclusive',
      kind: 'superiority',
      metric: 'decodeTokPerS',
      effect: { estimate: 1.1, low: 1.05, high: 1.15, unit: 'ratio', confidence, method: 'test' },
      samples: { baseline: 10, candidate: 10, paired: 10 },
      rule: 'pass if …',
      moreRequestsHint: null,
      decideHint: null,
      warnings: [],
    }
  }
}

describe('holmAdjust', () => {
  test('p-values: R p.adjust(c(0.01, 0.04, 0.03, 0.005), "holm") = c(0.03, 0.06, 0.06, 0.02)', () => {
    holmAdjust([0.01, 0.04, 0.03, 0.005]).forEach((p, i) => expect(p).toBeCloseTo([0.03, 0.06, 0.06, 0.02][i] as number, 15))
    expect(holmAdjust([])).toEqual([])
  })

  test('gates: the step-down on intervals decides what Holm on their p-values decides', () => {
    // Family 95%: one-sided p of each gate = (1 − limit)/2 → p = 0.002, 0.01, 0.02 (two-sided 0.004, 0.02, 0.04).
    const limits = [0.996, 0.98, 0.96]
    const decisions = holmAdjust(
      limits.map((l) => gateDecisiveUpTo(l)),
      0.95,
    )
    // Holm on two-sided p (0.004, 0.02, 0.04) at 0.05: 0.004 ≤ 0.05/3, 0.02 ≤ 0.05/2, 0.04 ≤ 0.05/1 → all rejected.
    expect(decisions.map((d) => d.outcome)).toEqual(['pass', 'pass', 'pass'])
    expect(decisions[0]?.rule).toMatch(
      /Holm-adjusted across 3 gates \(family 95%\): decided at step 1, 3 gate\(s\) open, confidence 98\.3%/,
    )
    expect(decisions[1]?.rule).toMatch(/decided at step 2, 2 gate\(s\) open, confidence 97\.5%/)
    expect(decisions[2]?.rule).toMatch(/decided at step 3, 1 gate\(s\) open, confidence 95%/)
    expect(holmAdjust([0.004, 0.02, 0.04]).every((p) => p <= 0.05)).toBe(true)
  })

  test('gates: the step-down stops at the first round that decides nothing', () => {
    // Two-sided p = 0.004, 0.04, 0.045: Holm rejects only the first (0.04 > 0.05/2).
    const decisions = holmAdjust([gateDecisiveUpTo(0.996), gateDecisiveUpTo(0.96), gateDecisiveUpTo(0.955)], 0.95)
    expect(decisions.map((d) => d.outcome)).toEqual(['pass', 'inconclusive', 'inconclusive'])
    expect(decisions[1]?.rule).toMatch(/undecided at step 2, 2 gate\(s\) open, confidence 97\.5%/)
    expect(holmAdjust([0.004, 0.04, 0.045]).map((p) => p <= 0.05)).toEqual([true, false, false])
  })

  test('refuses a mix of p-values and gates, and a bad family confidence', () => {
    // @ts-expect-error a mix is not a valid input
    expect(() => holmAdjust([0.1, gateDecisiveUpTo(0.9)])).toThrow(TypeError)
    expect(() => holmAdjust([gateDecisiveUpTo(0.9)], 1)).toThrow(/familyConfidence/)
  })
})
