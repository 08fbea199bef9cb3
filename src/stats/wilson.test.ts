import { describe, expect, test } from 'vitest'
import { wilsonInterval, Z95_EXACT } from './wilson.ts'

/**
 * An independent computation: the Wilson bounds are the p where the score statistic
 * |p̂ − p| / √(p(1 − p)/n) equals z; found by bisection on each side of p̂.
 */
function invertScoreTest(successes: number, n: number, z: number): { low: number; high: number } {
  const phat = successes / n
  const score = (p: number) => Math.abs(phat - p) / Math.sqrt((p * (1 - p)) / n) - z
  const root = (inside: number, outside: number) => {
    let [a, b] = [inside, outside]
    for (let i = 0; i < 200; i++) {
      const mid = (a + b) / 2
      if (score(mid) < 0) a = mid
      else b = mid
    }
    return (a + b) / 2
  }
  return {
    low: successes === 0 ? 0 : root(phat, 0),
    high: successes === n ? 1 : root(phat, 1),
  }
}

describe('wilsonInterval', () => {
  // Newcombe (1998), Statistics in Medicine 17:857–872, Table II, method 3 (score, no continuity correction).
  test.each([
    [81, 263, 0.2553, 0.3662],
    [15, 148, 0.0624, 0.1605],
    [0, 20, 0, 0.1611],
    [1, 29, 0.0061, 0.1718],
  ])('%i/%i → [%f, %f] as published', (successes, n, low, high) => {
    const interval = wilsonInterval(successes, n)
    expect(interval.low).toBeCloseTo(low, 4)
    expect(interval.high).toBeCloseTo(high, 4)
  })

  test.each([
    [81, 263],
    [1, 2],
    [7, 10],
    [99, 100],
    [500, 1000],
    [3, 1_000_000],
  ])('%i/%i agrees with inverting the score test', (successes, n) => {
    for (const z of [Z95_EXACT, 1, 2.5758293035489]) {
      const interval = wilsonInterval(successes, n, z)
      const reference = invertScoreTest(successes, n, z)
      expect(interval.low).toBeCloseTo(reference.low, 10)
      expect(interval.high).toBeCloseTo(reference.high, 10)
    }
  })

  test('is exactly 0 or 1 at the ends and never leaves [0, 1]', () => {
    expect(wilsonInterval(0, 5).low).toBe(0)
    expect(wilsonInterval(5, 5).high).toBe(1)
    for (let s = 0; s <= 30; s++) {
      const { low, high } = wilsonInterval(s, 30)
      expect(low).toBeGreaterThanOrEqual(0)
      expect(high).toBeLessThanOrEqual(1)
      expect(low as number).toBeLessThanOrEqual(s / 30)
      expect(high as number).toBeGreaterThanOrEqual(s / 30)
    }
  })

  test('is symmetric: s/n mirrors (n − s)/n', () => {
    const a = wilsonInterval(3, 17)
    const b = wilsonInterval(14, 17)
    expect(a.low).toBeCloseTo(1 - (b.high as number), 12)
    expect(a.high).toBeCloseTo(1 - (b.low as number), 12)
  })

  test('widens with z and narrows with n', () => {
    const width = (s: number, n: number, z?: number) => {
      const { low, high } = wilsonInterval(s, n, z)
      return (high as number) - (low as number)
    }
    expect(width(50, 100, 2.576)).toBeGreaterThan(width(50, 100))
    expect(width(500, 1000)).toBeLessThan(width(50, 100))
  })

  test('n = 0 has no interval', () => {
    expect(wilsonInterval(0, 0)).toEqual({ low: null, high: null })
  })

  test('refuses impossible counts and a bad z', () => {
    expect(() => wilsonInterval(3, 2)).toThrow(RangeError)
    expect(() => wilsonInterval(-1, 2)).toThrow(RangeError)
    expect(() => wilsonInterval(1.5, 2)).toThrow(RangeError)
    expect(() => wilsonInterval(1, Number.NaN)).toThrow(RangeError)
    expect(() => wilsonInterval(1, 2, 0)).toThrow(RangeError)
    expect(() => wilsonInterval(1, 2, Number.POSITIVE_INFINITY)).toThrow(RangeError)
  })
})
