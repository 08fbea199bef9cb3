import { describe, expect, test } from 'vitest'
import { okRequest } from '../../fixtures/gate-fixture.ts'
import { failureOf as messageOf } from '../../fixtures/matchers.ts'
import { failedCellRecord } from '../runner/run-record.ts'
import type { PairResult } from '../schema/results.ts'
import type { RunRecord } from '../schema/run.ts'

/** A record of `n` scored questions, question i answered right when right(i). */
function answered(n: number, right: (i: number) => boolean): RunRecord {
  const base = failedCellRecord(
    { baseUrl: 'http://127.0.0.1:1', model: 'm', requests: n },
    { code: 'INTERNAL', message: 'x', httpStatus: null, retryAfterS: null },
  )
  const requests = Array.from({ length: n }, (_, i) =>
    okRequest(i, { completionTokens: 50, score: { correct: right(i), extracted: 'x', reason: 'test' } }),
  )
  return { ...base, cellFailure: null, requests, completed: n }
}

const pairOf = (b: RunRecord, c: RunRecord): PairResult => ({
  kind: 'pair',
  id: 'p',
  baseline: [b],
  candidate: [c],
  launchOrder: ['baseline', 'candidate'],
})

/** The failure message up to vitest's own diff. */
const failureOf = (fn: () => void): string => messageOf(fn).split('\n- Expected')[0] as string

describe('toStayWithinAccuracyGap: the message', () => {
  test("a failure shows each arm's accuracy with its interval, aligned with the other labelled values", () => {
    const worse = pairOf(
      answered(200, (i) => i % 10 < 8),
      answered(200, (i) => i % 10 < 6),
    )
    const message = failureOf(() => expect(worse).toStayWithinAccuracyGap())
    expect(message).toMatch(/\nReceived: fail: -20\.0 pt \[/)
    expect(message).toMatch(
      /\nMethod: {3}paired difference over 200 questions[^\n]*\nAccuracy: baseline 80\.0% \[\d+\.\d%, \d+\.\d%\] \(160\/200 questions\), candidate 60\.0% \[\d+\.\d%, \d+\.\d%\] \(120\/200 questions\), 98% Wilson$/,
    )
  })

  test('.not on a pass shows the arms too; an improvement is said in points', () => {
    const better = pairOf(
      answered(400, (i) => i % 10 < 6),
      answered(400, (i) => i % 10 < 8),
    )
    expect(better).toStayWithinAccuracyGap()
    const message = failureOf(() => expect(better).not.toStayWithinAccuracyGap())
    expect(message).toMatch(/^expect\(result\)\.not\.toStayWithinAccuracyGap\(\)\n\nExpected: not: /)
    expect(message).toMatch(/\nAccuracy: baseline 60\.0% [^\n]*, candidate 80\.0% /)
    expect(message).toMatch(/\n\nwarning: the candidate improved accuracy by 20\.0 pt \[\d+\.\d, \d+\.\d\] \(98% interval above 0\)/)
  })

  test('an inconclusive verdict (it passes) names the questions that would decide it', () => {
    // 40 right on both, 3 on the candidate only, 4 on the baseline only, 53 on neither: −1 point over 100 questions.
    const few = pairOf(
      answered(100, (i) => i < 40 || (i >= 43 && i < 47)),
      answered(100, (i) => i < 43),
    )
    expect(few).toStayWithinAccuracyGap()
    expect(failureOf(() => expect(few).not.toStayWithinAccuracyGap())).toMatch(
      /\nwarning: inconclusive: [^\n]*about 3,730 questions scored on both arms \(now 100\) would likely decide it/,
    )
  })

  test('questions asked more than once: each arm is shown per distinct question', () => {
    const cycled = (right: number): RunRecord => {
      const r = answered(270, (i) => i % 27 < right)
      return { ...r, plan: { ...r.plan, workload: { ...r.plan.workload, dataset: { path: 'd.jsonl', sha256: 'x', rows: 27 } } } }
    }
    const message = failureOf(() => expect(pairOf(cycled(20), cycled(18))).not.toStayWithinAccuracyGap())
    expect(message).toMatch(
      /\nAccuracy: baseline 74\.1% \[[^\]]+\] \(20\/27 distinct questions\), candidate 66\.7% \[[^\]]+\] \(18\/27 distinct questions\), 98% Wilson over distinct questions\n/,
    )
    expect(message).toMatch(/about \d+ distinct questions \(now 27; more requests on the same questions do not help\)/)
  })
})
