import { describe, expect, test } from 'vitest'
import { arrivalPlan, arrivalSchedule, scheduleSha256, wallTimeOf } from './arrival.ts'
import { ArrivalSpec, type RateArrivalSpec } from './arrival-spec.ts'

const spec = (input: ArrivalSpec): RateArrivalSpec => ArrivalSpec.parse(input) as RateArrivalSpec

/** Sample mean and squared coefficient of variation of the gaps of a schedule. */
function gapStats(offsets: readonly number[]): { mean: number; cv2: number } {
  const gaps = offsets.slice(1).map((t, i) => t - (offsets[i] as number))
  const mean = gaps.reduce((s, g) => s + g, 0) / gaps.length
  const variance = gaps.reduce((s, g) => s + (g - mean) ** 2, 0) / (gaps.length - 1)
  return { mean, cv2: variance / (mean * mean) }
}

describe('arrival schedules', () => {
  test('constant: evenly spaced from 0', () => {
    expect(arrivalSchedule(spec({ kind: 'constant', ratePerS: 4 }), 4)).toEqual([0, 250, 500, 750])
  })

  test('poisson: mean gap 1/rate and CV² 1; gamma: CV² = 1/burstiness', () => {
    const poisson = gapStats(arrivalSchedule(spec({ kind: 'poisson', ratePerS: 10, seed: 3 }), 20_001))
    expect(poisson.mean).toBeCloseTo(100, -0.5)
    expect(poisson.cv2).toBeCloseTo(1, 1)
    for (const burstiness of [0.25, 4]) {
      const gamma = gapStats(arrivalSchedule(spec({ kind: 'gamma', ratePerS: 10, burstiness, seed: 3 }), 20_001))
      expect(gamma.mean / 100).toBeCloseTo(1, 1)
      expect(gamma.cv2 * burstiness).toBeCloseTo(1, 1)
    }
  })

  test('deterministic from the seed; another seed, another schedule', () => {
    const a = arrivalSchedule(spec({ kind: 'poisson', ratePerS: 5, seed: 1 }), 50)
    expect(arrivalSchedule(spec({ kind: 'poisson', ratePerS: 5, seed: 1 }), 50)).toEqual(a)
    expect(arrivalSchedule(spec({ kind: 'poisson', ratePerS: 5, seed: 2 }), 50)).not.toEqual(a)
    expect(scheduleSha256(a)).toBe(scheduleSha256([...a]))
    expect(scheduleSha256(a)).not.toBe(scheduleSha256(a.slice(1)))
  })

  test('a linear ramp-up: Λ(t) inverted exactly; arrivals sparse at first, at the full rate after the ramp', () => {
    const ramp = { durationS: 10, fromRatePerS: 0 }
    // Λ(t) = r·t²/(2T) during the ramp: 5 arrivals by t = √(2·T·5/r).
    expect(wallTimeOf(5, 10, ramp)).toBeCloseTo(Math.sqrt((2 * 10 * 5) / 10), 12)
    expect(wallTimeOf(50, 10, ramp)).toBeCloseTo(10, 12)
    expect(wallTimeOf(60, 10, ramp)).toBeCloseTo(11, 12)
    expect(wallTimeOf(3, 10, { durationS: 10, fromRatePerS: 10 })).toBeCloseTo(0.3, 12)
    const offsets = arrivalSchedule(spec({ kind: 'constant', ratePerS: 10, rampUp: ramp }), 80)
    expect(offsets[0]).toBe(0)
    expect((offsets[2] as number) - (offsets[1] as number)).toBeGreaterThan(300)
    expect((offsets[70] as number) - (offsets[69] as number)).toBeCloseTo(100, 9)
  })

  test('the plan records the spec, the schedule hash and the offered rate', () => {
    const s = spec({ kind: 'gamma', ratePerS: 8, burstiness: 0.5, seed: 7, maxInFlight: 16 })
    const offsets = arrivalSchedule(s, 40)
    const plan = arrivalPlan(s, offsets, null)
    expect(plan).toMatchObject({ kind: 'gamma', ratePerS: 8, burstiness: 0.5, seed: 7, maxInFlight: 16, rampUp: null, trace: null })
    expect(plan.scheduleSha256).toBe(scheduleSha256(offsets))
    expect(plan.offeredRatePerS).toBeCloseTo(39 / ((offsets[39] as number) / 1000), 9)
  })

  test('bad specs name the field', () => {
    expect(ArrivalSpec.safeParse({ kind: 'gamma', ratePerS: 8 }).error?.issues[0]?.path).toEqual(['burstiness'])
    expect(ArrivalSpec.safeParse({ kind: 'poisson', ratePerS: 0 }).error?.issues[0]?.path).toEqual(['ratePerS'])
    expect(ArrivalSpec.safeParse({ kind: 'weibull', ratePerS: 1 }).success).toBe(false)
  })
})
