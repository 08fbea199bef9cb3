import { describe, expect, test } from 'vitest'
import { failedRequest, okRequest } from '../../fixtures/gate-fixture.ts'
import type { GateRecord } from './arms.ts'
import { winGate } from './win.ts'

/**
 * A closed-loop cell at concurrency 4: n requests of `tokens` output tokens taking about `e2eMs`
 * each (a deterministic wiggle per prompt), its wall clock the service time over the slots
 * times `slack` (1: the slots were always busy).
 */
function cell(n: number, e2eMs: number, options: { tokens?: number; slack?: number; phase?: number } = {}): GateRecord {
  const tokens = options.tokens ?? 128
  const requests = Array.from({ length: n }, (_, i) =>
    okRequest(i, {
      completionTokens: tokens,
      e2eMs: e2eMs * (1 + 0.2 * Math.sin(1.3 * i)) * (1 + 0.02 * Math.cos(2.9 * i + (options.phase ?? 0))),
    }),
  )
  const busyMs = requests.reduce((s, r) => s + (r.e2eMs ?? 0), 0)
  const wallClockMs = (busyMs / 4) * (options.slack ?? 1)
  return {
    requests,
    metrics: { wallClockMs, outputThroughputTokPerS: (n * tokens) / (wallClockMs / 1000), requestRateReqPerS: n / (wallClockMs / 1000) },
  }
}

describe('toWinThroughput: the service-level gate', () => {
  test("its effect is the ratio of the cells' aggregate output tok/s, with the launch-noise floor around it", () => {
    const baseline = cell(64, 1000)
    const candidate = cell(64, 800, { phase: 1 })
    const d = winGate({ baseline, candidate }, { gate: 'toWinThroughput' })
    const measured = (candidate.metrics?.outputThroughputTokPerS as number) / (baseline.metrics?.outputThroughputTokPerS as number)
    expect(d.metric).toBe('outputThroughputTokPerS')
    expect(d.effect.estimate).toBeCloseTo(measured, 10)
    expect(d.outcome).toBe('pass')
    // The floor: one launch per arm cannot be narrower than z·√2·2% on each side.
    expect(Math.log(d.effect.high as number) - Math.log(measured)).toBeGreaterThan(2.326 * Math.SQRT2 * 0.02 - 1e-9)
    expect(d.effect.method).toMatch(
      /^ratio of the cells' aggregate output tok\/s .* percentile bootstrap of Σ output \/ Σ e2e over 64 paired/,
    )
    expect(d.rule).toMatch(/aggregate output tok\/s of the cell/)
  })

  test('faster requests do not win when the cell as a whole delivered less (idle slots lengthen its wall clock)', () => {
    const baseline = cell(64, 1000)
    // Each request 10% faster, but the engine left slots idle: the cell took 30% longer.
    const candidate = cell(64, 900, { slack: 1.3 / 0.9, phase: 1 })
    const perRequest = winGate({ baseline, candidate }, { gate: 'toWinThroughput', metric: 'throughputTokPerS' })
    expect(perRequest.outcome).toBe('pass')
    const service = winGate({ baseline, candidate }, { gate: 'toWinThroughput' })
    expect(service.outcome).toBe('fail')
    expect(service.effect.estimate).toBeCloseTo(1 / 1.3, 2)
  })

  test('request rate reads completed requests per second of the cell', () => {
    const baseline = cell(64, 1000, { tokens: 100 })
    const candidate = cell(64, 1000, { tokens: 50, phase: 1 })
    const tokens = winGate({ baseline, candidate }, { gate: 'toWinThroughput', launchNoise: 0 })
    expect(tokens.effect.estimate).toBeCloseTo(0.5, 2)
    const rate = winGate({ baseline, candidate }, { gate: 'toWinThroughput', metric: 'requestRateReqPerS', launchNoise: 0 })
    expect(rate.metric).toBe('requestRateReqPerS')
    expect(rate.effect.estimate).toBeCloseTo(1, 2)
  })

  test('repeated launches: a t-interval over the per-launch figures', () => {
    const launches = (e2eMs: number, k: number) =>
      Array.from({ length: k }, (_, j) => cell(32, e2eMs * (1 + 0.01 * Math.sin(2.1 * j)), { phase: j }))
    const d = winGate({ baseline: launches(1000, 4), candidate: launches(870, 4) }, { gate: 'toWinThroughput', margin: 0.05 })
    expect(d.outcome).toBe('pass')
    expect(d.effect.estimate).toBeCloseTo(1 / 0.87, 1)
    expect(d.effect.method).toMatch(
      /^launch level: each launch's aggregate output tok\/s .* t-interval of the mean log over 4 candidate and 4 baseline launches \(pooled df 6/,
    )
    expect(d.samples).toEqual({ baseline: 4, candidate: 4, paired: 0 })
    const unsure = winGate({ baseline: launches(1000, 3), candidate: launches(990, 3) }, { gate: 'toWinThroughput', margin: 0.05 })
    expect(unsure.outcome).not.toBe('pass')
  })

  test('a cell without service figures (an import without a wall clock) is not estimable, never a pass', () => {
    const baseline = { requests: cell(64, 1000).requests }
    const d = winGate({ baseline, candidate: cell(64, 500) }, { gate: 'toWinThroughput' })
    expect(d.outcome).toBe('inconclusive')
    expect(d.effect.method).toMatch(/^not estimable/)
  })

  test('requests the candidate failed count against it: a pass becomes a fail', () => {
    const baseline = cell(64, 1000)
    const fast = cell(64, 700, { phase: 1 })
    const candidate = { ...fast, requests: fast.requests.map((r) => (r.index % 8 === 3 ? failedRequest(r.index) : r)) }
    const d = winGate({ baseline, candidate }, { gate: 'toWinThroughput' })
    expect(d.outcome).toBe('fail')
    expect(d.warnings.join(' ')).toMatch(/the candidate failed 8 requests the baseline completed/)
  })
})
