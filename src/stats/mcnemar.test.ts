import { describe, expect, test } from 'vitest'
import { mcnemarExact, mcnemarMidP } from './mcnemar.ts'

/** The exact two-sided p-value with BigInt arithmetic: Σ_{i ≤ min(b,c)} C(n, i) / 2^(n−1), capped at 1. */
function exactByBigInt(b: number, c: number): number {
  const n = BigInt(b + c)
  const k = BigInt(Math.min(b, c))
  let term = 1n
  let sum = 1n
  for (let i = 1n; i <= k; i++) {
    term = (term * (n - i + 1n)) / i
    sum += term
  }
  if (n === 0n) return 1
  // Scale to keep 17 significant digits through the division.
  const scale = 10n ** 20n
  const p = Number((sum * 2n * scale) / 2n ** n) / 1e20
  return Math.min(1, p)
}

describe('mcnemarExact', () => {
  test('Fagerland et al. (2013) example: 1 vs 7 discordant pairs → p = 0.070', () => {
    expect(mcnemarExact(1, 7)).toBe(0.0703125)
    expect(mcnemarExact(7, 1)).toBe(0.0703125)
    expect(mcnemarExact(1, 7).toFixed(3)).toBe('0.070')
  })

  test('hand-computed small cases', () => {
    expect(mcnemarExact(0, 5)).toBe(0.0625) // 2 · 1/32
    expect(mcnemarExact(0, 1)).toBe(1)
    expect(mcnemarExact(2, 2)).toBe(1)
    expect(mcnemarExact(0, 0)).toBe(1)
    expect(mcnemarExact(2, 8)).toBeCloseTo((2 * (1 + 10 + 45)) / 1024, 15)
  })

  test.each([
    [3, 12],
    [10, 25],
    [40, 60],
    [150, 210],
    [300, 400],
    [480, 520],
  ])('(%i, %i) agrees with an exact BigInt sum', (b, c) => {
    const expected = exactByBigInt(b, c)
    expect(Math.abs(mcnemarExact(b, c) - expected)).toBeLessThanOrEqual(1e-12 * Math.max(expected, 1e-300) + 1e-300)
  })

  test('is monotone: a more lopsided split gives a smaller p', () => {
    let previous = 1
    for (let b = 10; b >= 0; b--) {
      const p = mcnemarExact(b, 20 - b)
      expect(p).toBeLessThanOrEqual(previous)
      previous = p
    }
  })

  test('refuses counts that are not non-negative integers', () => {
    expect(() => mcnemarExact(-1, 3)).toThrow(RangeError)
    expect(() => mcnemarExact(1.5, 3)).toThrow(RangeError)
    expect(() => mcnemarExact(1, Number.NaN)).toThrow(/c must be a non-negative integer/)
  })
})

describe('mcnemarMidP', () => {
  test('Fagerland et al. (2013) example: 1 vs 7 → mid-p = 0.039', () => {
    expect(mcnemarMidP(1, 7)).toBe(0.0390625)
    expect(mcnemarMidP(1, 7).toFixed(3)).toBe('0.039')
  })

  test('equal splits: 1 − ½·P(X = k)', () => {
    expect(mcnemarMidP(2, 2)).toBeCloseTo(1 - 0.5 * (6 / 16), 15)
    expect(mcnemarMidP(0, 0)).toBe(1)
  })

  test('is never above the exact p-value', () => {
    for (const [b, c] of [
      [0, 4],
      [3, 9],
      [20, 35],
      [50, 50],
    ] as const) {
      expect(mcnemarMidP(b, c)).toBeLessThanOrEqual(mcnemarExact(b, c))
    }
  })
})
