import { describe, expect, test } from 'vitest'
import { createRandom, exponentialVariate, gammaVariate, normalVariate } from './random.ts'

/** Mean and variance of n draws. */
function moments(draw: () => number, n = 200_000): { mean: number; variance: number } {
  let sum = 0
  let sumSq = 0
  for (let i = 0; i < n; i++) {
    const x = draw()
    sum += x
    sumSq += x * x
  }
  const mean = sum / n
  return { mean, variance: sumSq / n - mean * mean }
}

describe('variates', () => {
  test('normal: mean 0, variance 1', () => {
    const r = createRandom(1)
    const m = moments(() => normalVariate(r))
    expect(m.mean).toBeCloseTo(0, 2)
    expect(m.variance).toBeCloseTo(1, 1)
  })

  test('exponential: mean 1, variance 1', () => {
    const r = createRandom(2)
    const m = moments(() => exponentialVariate(r))
    expect(m.mean).toBeCloseTo(1, 2)
    expect(m.variance).toBeCloseTo(1, 1)
  })

  test.each([0.25, 1, 4, 20])('gamma with shape %d: mean = shape, variance = shape (both branches of Marsaglia–Tsang)', (shape) => {
    const r = createRandom(3)
    const m = moments(() => gammaVariate(r, shape))
    expect(m.mean / shape).toBeCloseTo(1, 1)
    expect(m.variance / shape).toBeCloseTo(1, 1)
    const draws = Array.from({ length: 1000 }, () => gammaVariate(r, shape))
    expect(Math.min(...draws)).toBeGreaterThan(0)
  })

  test('gamma refuses a shape that is not a positive number', () => {
    expect(() => gammaVariate(createRandom(1), 0)).toThrow(/shape must be a positive number, got 0/)
  })
})
