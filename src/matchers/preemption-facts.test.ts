import { beforeAll, describe, expect, test } from 'vitest'
import { telemetryWithPreemptions } from '../../fixtures/engine-telemetry.ts'
import { measuredArm } from '../../fixtures/manifest.ts'
import { failureOf } from '../../fixtures/matchers.ts'
import type { PairResult } from '../schema/results.ts'
import type { RunRecord } from '../schema/run.ts'

let baseline: RunRecord
let candidate: RunRecord
beforeAll(async () => {
  ;[baseline, candidate] = await Promise.all([measuredArm(300), measuredArm(600)])
}, 60_000)

/** The measured pair, its arms' engines having counted these preemptions over their 12 requests (undefined: no engine telemetry). */
function pair(b?: number | null, c?: number | null): PairResult {
  const arm = (r: RunRecord, n: number | null | undefined): RunRecord =>
    n === undefined ? r : { ...r, telemetry: telemetryWithPreemptions(n) }
  return { kind: 'pair', id: 'p', baseline: [arm(baseline, b)], candidate: [arm(candidate, c)], launchOrder: ['baseline', 'candidate'] }
}

describe('the matcher message shows each arm’s preemptions', () => {
  test('toWinDecode: a Preemptions line, and the uneven pair’s warning, in .to and .not messages', () => {
    const p = pair(0, 6)
    const to = failureOf(() => expect(p).toWinDecode({ margin: 9 }))
    expect(to).toMatch(/\nPreemptions: +baseline 0 in 12 requests \(0\.0%\), candidate 6 in 12 requests \(50\.0%\)(\n|$)/)
    expect(to).toMatch(/warning: the arms preempted very differently .*the candidate's engine ran short of KV cache/)
    // A 2× faster candidate passes at margin 0 or is undecided, which this policy passes: .not then fails.
    const not = failureOf(() => expect(p).not.toWinDecode({ margin: 0, inconclusive: 'pass' }))
    expect(not).toMatch(/\nPreemptions: +baseline 0 in 12 requests \(0\.0%\), candidate 6 in 12 requests \(50\.0%\)(\n|$)/)
  })

  test('toHoldLatency: even arms show their counts without a warning', () => {
    const message = failureOf(() => expect(pair(1, 2)).not.toHoldLatency({ metric: 'ttft', percentile: 95, notWorseThanPct: 1000 }))
    expect(message).toMatch(/\nPreemptions: +baseline 1 in 12 requests \(8\.3%\), candidate 2 in 12 requests \(16\.7%\)(\n|$)/)
    expect(message).not.toMatch(/preempted very differently/)
  })

  test('no engine telemetry: no Preemptions line', () => {
    expect(failureOf(() => expect(pair()).toWinDecode({ margin: 9 }))).not.toMatch(/Preemptions/)
  })
})
