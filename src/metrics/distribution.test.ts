import { describe, expect, test } from 'vitest'
import { distribution, nearestRank } from './distribution.ts'

describe('nearestRank', () => {
  test('takes rank ⌈p·n⌉ (1-based) without interpolation', () => {
    const v = [10, 20, 30, 40]
    expect(nearestRank(v, 25)).toBe(10)
    expect(nearestRank(v, 50)).toBe(20)
    expect(nearestRank(v, 51)).toBe(30)
    expect(nearestRank(v, 100)).toBe(40)
  })

  test('is not fooled by floating point at exact ranks (0.95·20 = 19)', () => {
    const v = Array.from({ length: 20 }, (_, i) => i + 1)
    expect(nearestRank(v, 95)).toBe(19)
    const h = Array.from({ length: 100 }, (_, i) => i + 1)
    expect(nearestRank(h, 99)).toBe(99)
    expect(nearestRank(h, 29)).toBe(29)
  })

  test('refuses p outside (0, 100] and empty input', () => {
    expect(() => nearestRank([1], 0)).toThrow(RangeError)
    expect(() => nearestRank([1], 101)).toThrow(RangeError)
    expect(() => nearestRank([], 50)).toThrow(RangeError)
  })
})

describe('distribution', () => {
  test('known values: sample sd and the normal 95% interval of the mean', () => {
    const d = distribution([2, 4, 4, 4, 5, 5, 7, 9])
    expect(d.samples).toBe(8)
    expect(d.mean).toBe(5)
    expect(d.stddev).toBeCloseTo(2.138089935, 9)
    expect(d.ci95Low).toBeCloseTo(5 - (1.96 * 2.138089935) / Math.sqrt(8), 9)
    expect(d.ci95High).toBeCloseTo(5 + (1.96 * 2.138089935) / Math.sqrt(8), 9)
    expect([d.min, d.p25, d.p50, d.p75, d.p90, d.p95, d.p99, d.max]).toEqual([2, 4, 4, 5, 9, 9, 9, 9])
  })

  test('sorts numerically, not as strings', () => {
    expect(distribution([100, 9, 20]).p50).toBe(20)
  })

  test('one sample has no sd or interval; none has nulls', () => {
    expect(distribution([3])).toMatchObject({ samples: 1, mean: 3, stddev: null, ci95Low: null, p99: 3 })
    expect(distribution([])).toMatchObject({ samples: 0, mean: null, p50: null, max: null })
  })

  test('non-finite input is a bug and throws', () => {
    expect(() => distribution([1, Number.NaN])).toThrow(RangeError)
  })
})
