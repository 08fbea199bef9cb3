import { describe, expect, test } from 'vitest'
import { failedRequest, okRequest } from '../../fixtures/gate-fixture.ts'
import type { GateRecord } from './arms.ts'
import { ScoredPairs } from './scored-pairs.ts'

/** A launch whose request i is right when right(i), `tokens` long (null: no usage). */
function launch(right: readonly boolean[], tokens: number | null = 100): GateRecord {
  return {
    requests: right.map((correct, i) => okRequest(i, { completionTokens: tokens, score: { correct, extracted: null, reason: 'test' } })),
  }
}

describe('ScoredPairs', () => {
  test('pairs by index: the table puts the candidate first; unscored and failed requests count on no side', () => {
    const pairs = new ScoredPairs(null)
    const baseline = launch([true, true, false, false])
    baseline.requests.push(okRequest(4), failedRequest(5))
    pairs.addLaunch(baseline, launch([true, false, true, false, true]))
    expect(pairs.table).toEqual({ both: 1, firstOnly: 1, secondOnly: 1, neither: 1 })
    expect(pairs.samples()).toEqual({ baseline: 4, candidate: 5, paired: 4 })
    expect(pairs.clustered).toBe(false)
    expect(pairs.shares()).toEqual({ baseline: [], candidate: [], differences: [] })
  })

  test('launches add up; questions asked more often than the dataset has rows make it clustered, each its own share', () => {
    const pairs = new ScoredPairs(2)
    // Requests 0 and 2 ask question 0; 1 and 3 ask question 1.
    pairs.addLaunch(launch([true, true, true, false]), launch([true, false, false, false]))
    expect(pairs.clustered).toBe(true)
    expect(pairs.shares()).toEqual({ baseline: [1, 0.5], candidate: [0.5, 0], differences: [-0.5, -0.5] })
    pairs.addLaunch(launch([true]), launch([true]))
    expect(pairs.samples().paired).toBe(5)
    expect(pairs.shares().baseline[0]).toBeCloseTo(1, 12)
    expect(pairs.shares().candidate[0]).toBeCloseTo(2 / 3, 12)
  })

  test('as many paired requests as rows is not clustered: each question once', () => {
    const pairs = new ScoredPairs(3)
    pairs.addLaunch(launch([true, false, true]), launch([true, true, true]))
    expect(pairs.clustered).toBe(false)
  })

  test('output lengths over the pairs that report both; none without usage or with an all-zero baseline', () => {
    const pairs = new ScoredPairs(null)
    pairs.addLaunch(launch([true, true], 100), launch([true, true], 120))
    pairs.addLaunch(launch([true], null), launch([true], 500))
    expect(pairs.outputLengths()).toEqual({ gap: expect.closeTo(0.2, 12), candidateMeanTokens: 120, baselineMeanTokens: 100, questions: 2 })
    const none = new ScoredPairs(null)
    none.addLaunch(launch([true], null), launch([true], 10))
    expect(none.outputLengths()).toBeNull()
    const zero = new ScoredPairs(null)
    zero.addLaunch(launch([true], 0), launch([true], 10))
    expect(zero.outputLengths()).toBeNull()
  })
})
