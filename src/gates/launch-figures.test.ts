import { describe, expect, test } from 'vitest'
import { okRequest } from '../../fixtures/gate-fixture.ts'
import { createRandom, normalVariate } from '../random.ts'
import type { GateRecord } from './arms.ts'
import { GATED_METRICS, launchFigures, profileMetrics, requestSpread } from './launch-figures.ts'
import { launchSpread } from './noise-floor.ts'

/** A launch of `n` requests: decode tok/s 100 × speed × per-request noise of sd `requestSd` (log), TTFT 200 ms / speed. */
function launch(speed: number, n: number, requestSd: number, seed: number): GateRecord {
  const random = createRandom(seed)
  return {
    requests: Array.from({ length: n }, (_, i) => {
      const noise = Math.exp(requestSd * normalVariate(random))
      return okRequest(i, { decodeTokPerS: 100 * speed * noise, ttftMs: (200 / speed) * noise, completionTokens: 64, e2eMs: 1000 / speed })
    }),
    metrics: { outputThroughputTokPerS: 400 * speed, requestRateReqPerS: null, wallClockMs: null },
  }
}

describe('launch figures', () => {
  test('a rate is the geometric mean of the ok requests, a latency its nearest-rank percentile, the aggregate as recorded', () => {
    const record: GateRecord = {
      requests: [
        okRequest(0, { decodeTokPerS: 50, ttftMs: 10 }),
        okRequest(1, { decodeTokPerS: 200, ttftMs: 30 }),
        okRequest(2, { decodeTokPerS: null, ttftMs: 20 }),
      ],
      metrics: { outputThroughputTokPerS: 321, requestRateReqPerS: 2.5, wallClockMs: null },
    }
    const figures = launchFigures(record)
    expect(figures.decodeTokPerS).toBeCloseTo(100, 10)
    expect(figures['ttftMs p50']).toBe(20)
    expect(figures['ttftMs p95']).toBe(30)
    expect(figures.outputThroughputTokPerS).toBe(321)
    expect(figures.requestRateReqPerS).toBe(2.5)
    // No value, no figure: a metric the cell did not measure is left out, not 0.
    expect(figures).not.toHaveProperty('effectivePrefillTokPerS')
    expect(figures).not.toHaveProperty('enginePrefillTokPerS')
    expect(figures).not.toHaveProperty('tpotMs p50')
  })

  test('the profile keys are the gate decisions’ metric names', () => {
    expect(GATED_METRICS).toEqual(
      expect.arrayContaining([
        'decodeTokPerS',
        'effectivePrefillTokPerS',
        'throughputTokPerS',
        'outputThroughputTokPerS',
        'ttftMs p95',
        'itlMs p99',
      ]),
    )
  })

  test('the profile’s spread is the sd of the launches’ log figures', () => {
    const speeds = [1, 1.05, 0.97, 1.02, 0.94]
    const metrics = profileMetrics(speeds.map((s, i) => launch(s, 32, 0, i)))
    expect(metrics.decodeTokPerS?.sd).toBeCloseTo(launchSpread(speeds).sd, 10)
    expect(metrics['ttftMs p95']?.sd).toBeCloseTo(launchSpread(speeds).sd, 10)
    expect(metrics.outputThroughputTokPerS?.values).toEqual(speeds.map((s) => 400 * s))
    expect(metrics.decodeTokPerS?.upper).toBeGreaterThan(metrics.decodeTokPerS?.sd ?? Infinity)
  })

  test('the request part is the per-request spread of the paired log ratio, the launches’ shifts left out', () => {
    // Independent per-request noise of sd 0.1 on each arm: the paired log ratio has sd 0.1·√2.
    const launches = [1, 1.3, 0.8, 1.1].map((s, i) => launch(s, 400, 0.1, 100 + i))
    const decode = requestSpread(launches, 'decodeTokPerS')
    expect(decode?.requests).toBe(400)
    expect(decode?.sd).toBeGreaterThan(0.1 * Math.SQRT2 * 0.93)
    expect(decode?.sd).toBeLessThan(0.1 * Math.SQRT2 * 1.07)
    const ttft = requestSpread(launches, 'ttftMs p95')
    expect(ttft?.sd).toBeGreaterThan(0)
    expect(requestSpread(launches, 'outputThroughputTokPerS')).toBeNull()
    expect(requestSpread(launches.slice(0, 1), 'decodeTokPerS')).toBeNull()
  })
})
