import { describe, expect, test } from 'vitest'
import { GateDecision } from '../schema/gate.ts'
import { accuracyGapGate } from './accuracy-gap.ts'
import type { GateRecord } from './arms.ts'
import { failedRequest, okRequest } from '../../fixtures/gate-fixture.ts'

/** A launch that answered question i right when right(i); every reply `tokens` long. */
function answers(n: number, right: (i: number) => boolean, tokens = 100): GateRecord {
  return {
    requests: Array.from({ length: n }, (_, i) =>
      okRequest(i, { completionTokens: tokens, score: { correct: right(i), extracted: null, reason: 'test' } }),
    ),
  }
}

describe('accuracyGapGate', () => {
  test('a candidate 20 points worse on the same 200 questions fails (McNemar and the interval agree)', () => {
    const baseline = answers(200, (i) => i % 10 < 8)
    const candidate = answers(200, (i) => i % 10 < 6)
    const d = accuracyGapGate({ baseline, candidate })
    expect(GateDecision.parse(d)).toEqual(d)
    expect(d).toMatchObject({
      gate: 'toStayWithinAccuracyGap',
      outcome: 'fail',
      kind: 'non-regression',
      metric: 'accuracy',
      moreRequestsHint: null,
    })
    expect(d.effect.estimate).toBeCloseTo(-20, 10)
    expect(d.effect.high as number).toBeLessThan(-2)
    expect(d.effect.unit).toBe('points')
    expect(d.effect.method).toMatch(
      /paired difference over 200 questions \(0 right on the candidate only, 40 on the baseline only\): Newcombe's hybrid score interval \(method 10\), exact McNemar p = /,
    )
    expect(d.samples).toEqual({ baseline: 200, candidate: 200, paired: 200 })
  })

  test('identical answers on many questions pass; a small set is inconclusive, with a warning', () => {
    expect(accuracyGapGate({ baseline: answers(2000, (i) => i % 3 > 0), candidate: answers(2000, (i) => i % 3 > 0) }).outcome).toBe('pass')
    const d = accuracyGapGate({ baseline: answers(50, (i) => i % 2 === 0), candidate: answers(50, (i) => i % 2 === 0 && i !== 4) })
    expect(d.outcome).toBe('inconclusive')
    expect(d.warnings.join(' ')).toMatch(/includes a drop of 2 points or more/)
  })

  test('a 20% longer output is a warning, never a failure on its own', () => {
    const d = accuracyGapGate(
      { baseline: answers(2000, () => true, 100), candidate: answers(2000, () => true, 120) },
      { outputLengthPct: 10 },
    )
    expect(d.outcome).toBe('pass')
    expect(d.warnings.join(' ')).toMatch(
      /mean output length differs by 20\.0% \(candidate 120\.0 vs baseline 100\.0 completion tokens over 2000 paired questions\)/,
    )
    expect(accuracyGapGate({ baseline: answers(2000, () => true, 100), candidate: answers(2000, () => true, 105) }).warnings).toEqual([])
  })

  test('pairs scored questions by index; unscored and failed requests are left out', () => {
    const baseline = { requests: [...answers(10, () => true).requests, okRequest(10), failedRequest(11)] }
    const candidate = answers(12, () => true)
    expect(accuracyGapGate({ baseline, candidate }).samples).toEqual({ baseline: 10, candidate: 12, paired: 10 })
  })

  test('no question scored on both arms: a failure that names the misconfiguration, not estimable', () => {
    const d = accuracyGapGate({ baseline: { requests: [okRequest(0)] }, candidate: { requests: [okRequest(0)] } })
    expect(d.outcome).toBe('fail')
    expect(d.effect.estimate).toBeNull()
    expect(d.warnings.join('\n')).toMatch(/accuracy was not measured: give the cell a dataset workload/)
  })

  test('repeats pair the i-th launch of each arm and say so', () => {
    const d = accuracyGapGate({
      baseline: [answers(100, () => true), answers(100, () => true)],
      candidate: [answers(100, () => true), answers(100, () => true)],
    })
    expect(d.samples.paired).toBe(200)
    expect(d.warnings.join(' ')).toMatch(/2 launches per arm pooled/)
  })

  test('a points threshold that is not positive is refused, naming the gate', () => {
    expect(() => accuracyGapGate({ baseline: answers(2, () => true), candidate: answers(2, () => true) }, { points: 0 })).toThrow(
      /toStayWithinAccuracyGap: invalid options[\s\S]*points/,
    )
  })
})

describe('accuracyGapGate: a dataset cycled over more requests than it has questions', () => {
  /** 810 requests over 27 questions, question i % 27 answered right when right(question). */
  const cycled = (right: (question: number) => boolean): GateRecord => ({
    ...answers(810, (i) => right(i % 27)),
    plan: { sequential: null, workload: { dataset: { rows: 27 } } },
  })

  test('27 questions asked 30 times are 27 units, not 810 independent pairs: two questions lost is not a confident drop', () => {
    const baseline = cycled((q) => q < 20)
    const candidate = cycled((q) => q < 18)
    // As 810 independent pairs the same answers look like a confident 7.4-point drop.
    const asPairs = accuracyGapGate({ baseline: { requests: baseline.requests }, candidate: { requests: candidate.requests } })
    expect(asPairs.outcome).toBe('fail')
    const d = accuracyGapGate({ baseline, candidate })
    expect(GateDecision.parse(d)).toEqual(d)
    expect(d.outcome).toBe('inconclusive')
    expect(d.effect.estimate).toBeCloseTo(-7.41, 1)
    expect(d.effect.low as number).toBeLessThan(-15)
    expect(d.effect.method).toMatch(/^mean of per-question accuracy differences over 27 distinct questions \(810 paired requests\)/)
    expect(d.warnings[0]).toBe(
      '810 paired requests asked only 27 distinct questions: judged per question, not as independent pairs; ' +
        'more distinct questions, not more requests, narrow the interval',
    )
  })

  test('judged per question, it still warns of an output-length gap', () => {
    const longer: GateRecord = { ...answers(810, (i) => i % 27 < 20, 130), plan: { sequential: null, workload: { dataset: { rows: 27 } } } }
    const d = accuracyGapGate({ baseline: cycled((q) => q < 20), candidate: longer })
    expect(d.warnings[0]).toMatch(/^810 paired requests asked only 27 distinct questions/)
    expect(d.warnings).toContain(
      'mean output length differs by 30.0% (candidate 130.0 vs baseline 100.0 completion tokens over 810 paired questions), ' +
        'at or beyond 10%: review verbosity or truncation',
    )
  })

  test('the same answers on both arms pass, with an interval of exactly zero', () => {
    const d = accuracyGapGate({ baseline: cycled((q) => q % 3 > 0), candidate: cycled((q) => q % 3 > 0) })
    expect(d).toMatchObject({ outcome: 'pass', effect: { estimate: 0, low: 0, high: 0 } })
  })
})
