import { describe, expect, test } from 'vitest'
import { wilsonInterval } from '../stats/wilson.ts'
import { failedRequest, okRequest } from '../../fixtures/gate-fixture.ts'
import { sloGate, sloRequestsHint } from './slo.ts'

const record = (ttfts: readonly number[], failed = 0) => ({
  requests: [
    ...ttfts.map((ttftMs, i) => okRequest(i, { ttftMs })),
    ...Array.from({ length: failed }, (_, i) => failedRequest(ttfts.length + i)),
  ],
  harness: {
    clientCpuMs: null,
    clientCpuShare: null,
    eventLoopDelayP99Ms: null,
    eventLoopDelayMaxMs: null,
    sendLagP99Ms: null,
    harnessLimited: false,
    reasons: [],
  },
  metrics: { wallClockMs: 4000 },
})

describe('sloGate', () => {
  test("the good share's Wilson interval at the gate's confidence decides; failed requests count as not good", () => {
    const d = sloGate(record(new Array(95).fill(100), 5), { ttftMs: 200, percentile: 80 })
    expect(d).toMatchObject({
      outcome: 'pass',
      kind: 'superiority',
      metric: 'good fraction (ttft ≤ 200 ms)',
      samples: { baseline: 0, candidate: 100, paired: 0 },
    })
    const z = 2.3263478740408408
    expect(d.effect).toMatchObject({ estimate: 0.95, unit: 'fraction', confidence: 0.98 })
    expect(d.effect.low).toBeCloseTo(wilsonInterval(95, 100, z).low as number, 12)
    expect(d.warnings).toEqual(['5 failed request(s) counted as not good'])
    expect(d.effect.method).toBe('Wilson score interval of 95 good of 100 measured request(s) over 4.00 s of wall clock: 23.75 good req/s')
  })

  test('launches are pooled, with a warning that launch variation is not in the interval', () => {
    const d = sloGate([record(new Array(60).fill(100)), record(new Array(60).fill(100))], { ttftMs: 200 })
    expect(d.samples.candidate).toBe(120)
    expect(d.warnings[0]).toMatch(/^2 launches pooled/)
  })

  test('a launch whose source recorded no wall clock leaves the pooled one unknown: the share is judged, no rate is given', () => {
    const unknown = { ...record(new Array(60).fill(100)), metrics: { wallClockMs: null } }
    const d = sloGate([record(new Array(60).fill(100)), unknown], { ttftMs: 200 })
    expect(d.samples.candidate).toBe(120)
    expect(d.effect.method).toBe('Wilson score interval of 120 good of 120 measured request(s)')
  })

  test('an empty record is inconclusive without a hint', () => {
    expect(sloGate(record([]), { ttftMs: 200 })).toMatchObject({
      outcome: 'inconclusive',
      moreRequestsHint: null,
      effect: { estimate: null },
    })
  })
})

describe('sloRequestsHint', () => {
  test('the fewest requests at which the same share would be decided', () => {
    // 39 of 40 good (97.5%) against 90%: at n the Wilson lower bound of 0.975·n good must reach 0.9.
    const n = sloRequestsHint(39, 40, 0.9, 0.98) as number
    const z = 2.3263478740408408
    expect(wilsonInterval(Math.round(0.975 * n), n, z).low as number).toBeGreaterThanOrEqual(0.9)
    expect(wilsonInterval(Math.round(0.975 * (n - 1)), n - 1, z).low as number).toBeLessThan(0.9)
    expect(sloRequestsHint(9, 10, 0.9, 0.98)).toBeNull()
  })
})
