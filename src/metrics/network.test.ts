import { describe, expect, test } from 'vitest'
import { distribution } from './distribution.ts'
import { adjustedFigures, networkAdjusted, networkEstimate, rttSeries } from './network.ts'

describe('rttSeries', () => {
  test('keeps the samples in µs, in order, and takes nearest-rank percentiles of them in ms', () => {
    const s = rttSeries([20.0004, 19.9, 21.5, 20.2, 35], 2)
    expect(s.rttUs).toEqual([20000, 19900, 21500, 20200, 35000])
    expect(s.samples).toBe(5)
    expect(s.failed).toBe(2)
    // Nearest rank over 5: p50 is rank 3, p90 rank 5 (⌈4.5⌉), p99 rank 5.
    expect(s.p50Ms).toBe(20.2)
    expect(s.p90Ms).toBe(35)
    expect(s.p99Ms).toBe(35)
  })

  test('no answered probe: no figure, the failures still counted', () => {
    expect(rttSeries([], 3)).toEqual({ samples: 0, failed: 3, rttUs: [], p50Ms: null, p90Ms: null, p99Ms: null })
  })
})

describe('the network adjustment', () => {
  const probes = (httpMs: number[], handshakeMs: number[]) => ({
    http: { endpoint: '/health' as const, reason: null, before: rttSeries(httpMs, 0), during: rttSeries([50, 50, 50], 0) },
    handshake: { before: rttSeries(handshakeMs, 0), during: rttSeries([], 0) },
  })

  test('subtracts one round trip from every figure, never clamping, null staying null', () => {
    const d = distribution([70, 72, 75, 90])
    expect(adjustedFigures(d, 20)).toEqual({
      mean: (d.mean as number) - 20,
      p50: 52,
      p90: 70,
      p95: 70,
      p99: 70,
    })
    expect(adjustedFigures(distribution([10]), 20).p50).toBe(-10)
    expect(adjustedFigures(distribution([]), 20)).toEqual({ mean: null, p50: null, p90: null, p95: null, p99: null })
  })

  test('the estimator is the HTTP p50 before the cell, not the during phase, and not the handshake', () => {
    expect(networkEstimate(probes([20.1, 19.9, 20.0, 22, 20.3], [0.1, 0.2]))).toEqual({ estimator: 'http-p50-before', rttMs: 20.1 })
  })

  test('without an HTTP answer it falls back to the handshake p50, and to nothing without either', () => {
    expect(networkEstimate(probes([], [0.3, 0.1, 0.2]))).toEqual({ estimator: 'handshake-p50-before', rttMs: 0.2 })
    expect(networkEstimate(probes([], []))).toBeNull()
    expect(networkAdjusted(probes([], []), { ttftMs: distribution([1]), e2eMs: distribution([2]) })).toBeNull()
  })

  test("the record's adjusted TTFT and e2e are the cell's less the estimate", () => {
    const adjusted = networkAdjusted(probes([20, 20, 20], [0.1]), {
      ttftMs: distribution([70, 71, 72]),
      e2eMs: distribution([100, 110, 120]),
    })
    expect(adjusted?.rttMs).toBe(20)
    expect(adjusted?.ttftMs.p50).toBe(51)
    expect(adjusted?.e2eMs.p50).toBe(90)
  })
})
