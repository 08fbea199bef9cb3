import { expect, test } from 'vitest'
import type { GateDecision } from '../schema/gate.ts'
import { figureLine } from './figure-line.ts'

/** A decision with the fields a figure line reads; the rest as a gate fills them. */
function decision(fields: Partial<GateDecision> & Pick<GateDecision, 'gate' | 'outcome' | 'metric' | 'effect'>): GateDecision {
  return {
    kind: 'superiority',
    samples: { baseline: 128, candidate: 128, paired: 128 },
    rule: 'the rule',
    moreRequestsHint: null,
    warnings: [],
    ...fields,
  } as GateDecision
}

const win = decision({
  gate: 'toWinDecode',
  outcome: 'pass',
  metric: 'decodeTokPerS',
  effect: { estimate: 1.946, low: 1.71, high: 2.213, unit: 'ratio', confidence: 0.98, method: 'm' },
})

test('a win reads as the change with its interval against the margin, then the outcome and what it rests on', () => {
  expect(figureLine({ cell: 'c4', decision: win, options: { margin: 0.05 }, passed: true, isNot: false })).toBe(
    'toWinDecode c4: decode +94.6% [+71%, +121%] > +5%: pass (98% interval, 128 paired (128/128))',
  )
})

test('a .not that held reads as expected, a .not that did not as asserted', () => {
  const loss = { ...win, outcome: 'fail' as const, effect: { ...win.effect, estimate: 0.97, low: 0.95, high: 0.99 } }
  expect(figureLine({ cell: 'c4', decision: loss, options: { margin: 0 }, passed: false, isNot: true })).toBe(
    'toWinDecode c4: decode -3% [-5%, -1%] > 0%: fail, expected non-win ✓ (98% interval, 128 paired (128/128))',
  )
  expect(figureLine({ cell: 'c4', decision: win, options: { margin: 0 }, passed: true, isNot: true })).toMatch(/: pass \(asserted \.not\)/)
})

test('a latency hold, an SLO and an accuracy gap each name the bound of their own options', () => {
  const hold = decision({
    gate: 'toHoldLatency',
    kind: 'non-regression',
    outcome: 'inconclusive',
    metric: 'ttftMs p95',
    effect: { estimate: 1.04, low: 0.98, high: 1.12, unit: 'ratio', confidence: 0.98, method: 'm' },
  })
  expect(figureLine({ cell: 'c1', decision: hold, options: { notWorseThanPct: 10 }, passed: true, isNot: false })).toMatch(
    /^toHoldLatency c1: TTFT p95 \+4% \[-2%, \+12%\] ≤ \+10%: inconclusive \(/,
  )
  const bound = { ...hold, outcome: 'pass' as const, effect: { ...hold.effect, estimate: 180, low: 170, high: 190, unit: 'ms' as const } }
  expect(figureLine({ cell: 'c1', decision: bound, options: { atMostMs: 200 }, passed: true, isNot: false })).toMatch(
    /TTFT p95 180 ms \[170 ms, 190 ms\] ≤ 200 ms: pass/,
  )
  const slo = decision({
    gate: 'toMeetSLO',
    outcome: 'pass',
    metric: 'good fraction (TTFT ≤ 500 ms)',
    samples: { baseline: 0, candidate: 48, paired: 0 },
    effect: { estimate: 1, low: 0.93, high: 1, unit: 'fraction', confidence: 0.98, method: 'm' },
  })
  expect(figureLine({ cell: 'o', decision: slo, options: { percentile: 90 }, passed: true, isNot: false })).toBe(
    'toMeetSLO o: good share 100.0% [93.0%, 100.0%] ≥ 90%: pass (98% interval, 48 samples)',
  )
  const gap = decision({
    gate: 'toStayWithinAccuracyGap',
    kind: 'non-regression',
    outcome: 'pass',
    metric: 'accuracy',
    effect: { estimate: -0.5, low: -1.5, high: 0.5, unit: 'points', confidence: 0.98, method: 'm' },
  })
  expect(figureLine({ cell: 'q', decision: gap, options: { points: 2 }, passed: true, isNot: false })).toMatch(
    /accuracy -0\.5 pt \[-1\.5 pt, \+0\.5 pt\] > -2 pt: pass/,
  )
})

test('an effect that could not be estimated says so, with no interval', () => {
  const none = decision({
    gate: 'toWinDecode',
    outcome: 'inconclusive',
    metric: 'decodeTokPerS',
    samples: { baseline: 2, candidate: 2, paired: 2 },
    effect: { estimate: null, low: null, high: null, unit: 'ratio', confidence: null, method: 'not estimable' },
  })
  expect(figureLine({ cell: 'c', decision: none, options: {}, passed: false, isNot: false })).toBe(
    'toWinDecode c: decode not estimable > 0%: inconclusive (2 paired (2/2))',
  )
})
