import { describe, expect, test } from 'vitest'
import { GateDecision } from '../schema/gate.ts'
import { normalQuantile, studentTQuantile } from '../stats/distributions.ts'
import { wilsonInterval } from '../stats/wilson.ts'
import { accuracyGapGate, clusteredQuestionsNeeded, pairedQuestionsNeeded } from './accuracy-gap.ts'
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

describe('accuracyGapGate: what each arm scored, what would settle it, and improvements', () => {
  const z98 = normalQuantile(0.99)
  /** n questions in blocks of 100: 40 right on both, 3 on the candidate only, 4 on the baseline only, 53 on neither. */
  const block = (n: number) => ({
    baseline: answers(n, (i) => i % 100 < 40 || (i % 100 >= 43 && i % 100 < 47)),
    candidate: answers(n, (i) => i % 100 < 43),
  })

  test("each arm's accuracy on the paired questions, with its Wilson interval at the gate's confidence", () => {
    const d = accuracyGapGate({ baseline: answers(200, (i) => i % 10 < 8), candidate: answers(200, (i) => i % 10 < 6) })
    const wb = wilsonInterval(160, 200, z98)
    const wc = wilsonInterval(120, 200, z98)
    expect(d.accuracy).toEqual({
      unit: 'request',
      confidence: 0.98,
      method: '98% Wilson interval of right answers over the paired questions',
      baseline: {
        correct: 160,
        scored: 200,
        rate: 0.8,
        low: expect.closeTo(wb.low as number, 12),
        high: expect.closeTo(wb.high as number, 12),
      },
      candidate: {
        correct: 120,
        scored: 200,
        rate: 0.6,
        low: expect.closeTo(wc.low as number, 12),
        high: expect.closeTo(wc.high as number, 12),
      },
      improved: false,
      questionsNeeded: null,
    })
    // The gap is the difference of the two accuracies, in points.
    expect(d.effect.estimate).toBeCloseTo(((d.accuracy?.candidate.rate as number) - (d.accuracy?.baseline.rate as number)) * 100, 10)
  })

  test('with repeated questions, each arm is scored per distinct question', () => {
    const cycled = (right: (q: number) => boolean): GateRecord => ({
      ...answers(810, (i) => right(i % 27)),
      plan: { sequential: null, workload: { dataset: { rows: 27 } } },
    })
    const d = accuracyGapGate({ baseline: cycled((q) => q < 20), candidate: cycled((q) => q < 18) })
    expect(d.accuracy).toMatchObject({
      unit: 'question',
      method: expect.stringMatching(/^98% Wilson interval over distinct questions, each question's share right counted as its outcome/),
      baseline: { correct: 20, scored: 27, rate: 20 / 27 },
      candidate: { correct: 18, scored: 27, rate: 18 / 27 },
    })
    expect(d.accuracy?.baseline.low).toBeCloseTo(wilsonInterval(20, 27, z98).low as number, 12)
  })

  test('inconclusive at 100 questions: the questions it names do decide it, and 80% of them do not', () => {
    const d = accuracyGapGate(block(100))
    expect(d.outcome).toBe('inconclusive')
    const needed = d.accuracy?.questionsNeeded as number
    expect(needed).toBe(3730)
    expect(d.warnings.at(-1)).toMatch(
      /; about 3,730 questions scored on both arms \(now 100\) would likely decide it if the observed -1\.0 pt and its spread held; passes/,
    )
    expect(accuracyGapGate(block(Math.ceil(needed / 100) * 100)).outcome).toBe('pass')
    expect(accuracyGapGate(block(Math.floor((needed * 0.8) / 100) * 100)).outcome).toBe('inconclusive')
  })

  test('inconclusive over 27 repeated questions: the distinct questions it names decide it, and fewer do not', () => {
    /** `blocks` × 27 questions, each asked twice, 20 of every 27 right on the baseline and 18 on the candidate. */
    const cycled = (blocks: number, right: number): GateRecord => ({
      ...answers(blocks * 27 * 2, (i) => (i % (blocks * 27)) % 27 < right),
      plan: { sequential: null, workload: { dataset: { rows: blocks * 27 } } },
    })
    const d = accuracyGapGate({ baseline: cycled(1, 20), candidate: cycled(1, 18) })
    expect(d.outcome).toBe('inconclusive')
    const needed = d.accuracy?.questionsNeeded as number
    expect(needed).toBeGreaterThan(27)
    expect(d.warnings.at(-1)).toContain(
      `about ${needed} distinct questions (now 27; more requests on the same questions do not help) would likely decide it`,
    )
    const enough = Math.ceil(needed / 27)
    expect(accuracyGapGate({ baseline: cycled(enough, 20), candidate: cycled(enough, 18) }).outcome).toBe('fail')
    const fewer = Math.floor((needed * 0.6) / 27)
    expect(accuracyGapGate({ baseline: cycled(fewer, 20), candidate: cycled(fewer, 18) }).outcome).toBe('inconclusive')
  })

  test('an estimate on the margin names no number of questions', () => {
    const d = accuracyGapGate({ baseline: answers(50, (i) => i % 2 === 0), candidate: answers(50, (i) => i % 2 === 0 && i !== 4) })
    expect(d.accuracy?.questionsNeeded).toBeNull()
    expect(d.warnings.at(-1)).toMatch(/the observed -2\.0 pt sits on the margin \(a drop of 2 pt\), so no practical number of questions/)
  })

  test('a confidently better candidate is reported as an improvement, in points, not only as within the gap', () => {
    const d = accuracyGapGate({ baseline: answers(400, (i) => i % 10 < 6), candidate: answers(400, (i) => i % 10 < 8) })
    expect(d.outcome).toBe('pass')
    expect(d.accuracy?.improved).toBe(true)
    const [estimate, low, high] = [d.effect.estimate, d.effect.low, d.effect.high].map((v) => (v as number).toFixed(1))
    expect(estimate).toBe('20.0')
    expect(d.warnings).toEqual([
      `the candidate improved accuracy by 20.0 pt [${low}, ${high}] (98% interval above 0): the arms do not answer alike; ` +
        'review what differs (sampling, chat template, quantization) before reading their speed as like for like',
    ])
    // Equal answers pass without a claim of improvement.
    const same = accuracyGapGate({ baseline: answers(400, (i) => i % 10 < 6), candidate: answers(400, (i) => i % 10 < 6) })
    expect(same.accuracy?.improved).toBe(false)
    expect(same.warnings).toEqual([])
  })

  test('nothing scored: the arms show 0 scored and no rate', () => {
    const d = accuracyGapGate({ baseline: { requests: [okRequest(0)] }, candidate: { requests: [okRequest(0)] } })
    expect(d.accuracy?.baseline).toEqual({ correct: 0, scored: 0, rate: null, low: null, high: null })
  })
})

describe('pairedQuestionsNeeded and clusteredQuestionsNeeded', () => {
  test('identical answers need only as many questions as tighten the interval; an estimate on the margin needs none', () => {
    expect(pairedQuestionsNeeded({ both: 40, firstOnly: 0, secondOnly: 0, neither: 10 }, 0.98, 2)).toBe(196)
    expect(pairedQuestionsNeeded({ both: 24, firstOnly: 0, secondOnly: 1, neither: 25 }, 0.98, 2)).toBeNull()
    expect(clusteredQuestionsNeeded([0, -0.04, 0.02, -0.06], 0.98, 2)).toBeNull()
  })

  test('per-question differences: t · sd / √Q clears the margin at the size it names', () => {
    const differences = [0, 0, 0, -1, 0, 0, 0.5, 0, 0, -0.5]
    const q = clusteredQuestionsNeeded(differences, 0.95, 2) as number
    const mean = -0.1
    const sd = Math.sqrt(differences.reduce((s, d) => s + (d - mean) ** 2, 0) / 9)
    const half = (n: number) => (studentTQuantile(0.975, n - 1) * sd) / Math.sqrt(n)
    expect(mean + half(q)).toBeLessThan(-0.02)
    expect(mean + half(q - 1)).toBeGreaterThanOrEqual(-0.02)
  })
})
