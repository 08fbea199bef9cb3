import { describe, expect } from 'vitest'
import { test } from '../../fixtures/test-context.ts'
import {
  betaQuantile,
  binomialCdf,
  erfc,
  logGamma,
  normalCdf,
  normalQuantile,
  regularizedIncompleteBeta,
  studentTCdf,
  studentTQuantile,
} from './distributions.ts'

/** P(X ≤ k), X ~ Bin(n, num/den), as an exact rational by BigInt, then divided once. */
function binomialCdfExact(k: number, n: number, num: number, den: number): number {
  let sum = 0n
  let c = 1n
  for (let i = 0; i <= k; i++) {
    if (i > 0) c = (c * BigInt(n - i + 1)) / BigInt(i)
    sum += c * BigInt(num) ** BigInt(i) * BigInt(den - num) ** BigInt(n - i)
  }
  const total = BigInt(den) ** BigInt(n)
  const scale = 10n ** 30n
  return Number((sum * scale) / total) / 1e30
}

describe('normalCdf', () => {
  // Values from scipy.stats.norm.cdf 1.17 (Cephes ndtr), which agree with R's pnorm to the digits R prints.
  test.for<[number, number]>([
    [-1.96, 0.024997895148220435],
    [1, 0.8413447460685429],
    [-5, 2.866515718791933e-7],
    [-10, 7.61985302416047e-24],
    [-37.5, 4.605353009581954e-308],
  ])('Φ(%f) = %f to 1e-12 relative', ([x, expected], { expectRelClose }) => {
    expectRelClose(normalCdf(x), expected, 1e-12)
  })

  // scipy.special.erfc 1.17, on both sides of the switch from the series to the continued fraction at 2.
  test.for<[number, number]>([
    [0.5, 0.4795001221869535],
    [1.99, 0.004888586800383002],
    [2.01, 0.004475150644751764],
    [2.5, 0.00040695201744495886],
    [2.99, 2.3525603080640205e-5],
    [3.0, 2.2090496998585445e-5],
    [3.01, 2.0738963637132645e-5],
    [5, 1.5374597944280347e-12],
    [10, 2.0884875837625446e-45],
  ])('erfc(%f) = %f to 1e-12 relative', ([x, expected], { expectRelClose }) => {
    expectRelClose(erfc(x), expected, 1e-12)
  })

  test('Φ(x) + Φ(−x) = 1; the infinities', () => {
    for (const x of [0, 0.3, 1.7, 2.9, 4.2, 6]) expect(normalCdf(x) + normalCdf(-x)).toBeCloseTo(1, 15)
    expect(erfc(0)).toBe(1)
    expect(normalCdf(Number.NEGATIVE_INFINITY)).toBe(0)
    expect(normalCdf(Number.POSITIVE_INFINITY)).toBe(1)
  })
})

describe('normalQuantile', () => {
  // R: qnorm(0.975) = 1.959963984540054; qnorm(0.995), qnorm(0.99), qnorm(1e-10) as printed by scipy.stats.norm.ppf.
  test.for<[number, number]>([
    [0.975, 1.959963984540054],
    [0.995, 2.5758293035489004],
    [0.99, 2.3263478740408408],
    [1e-10, -6.361340902404056],
  ])('Φ⁻¹(%f) = %f to 1e-12 relative', ([p, expected], { expectRelClose }) => {
    expectRelClose(normalQuantile(p), expected, 1e-12)
  })

  test('inverts the CDF to 1e-9 across the range, tails included', ({ expectRelClose }) => {
    for (const p of [1e-300, 1e-50, 1e-12, 0.001, 0.02425, 0.1, 0.5, 0.7, 0.97575, 0.999, 1 - 1e-12]) {
      const x = normalQuantile(p)
      const back = p < 0.5 ? normalCdf(x) : 1 - normalCdf(-x)
      expectRelClose(back, p, 1e-9)
    }
    expect(normalQuantile(0.5)).toBe(0)
    expect(normalQuantile(0)).toBe(Number.NEGATIVE_INFINITY)
    expect(() => normalQuantile(1.5)).toThrow(RangeError)
  })
})

describe('logGamma', () => {
  test('known values: ln √π, ln 9!, ln Γ(100) (scipy.special.gammaln), and ln Γ(x) ≈ −ln x near 0', ({ expectRelClose }) => {
    expectRelClose(logGamma(0.5), Math.log(Math.sqrt(Math.PI)), 1e-14)
    expectRelClose(logGamma(10), Math.log(362_880), 1e-14)
    expectRelClose(logGamma(100), 359.1342053695754, 1e-14)
    expectRelClose(logGamma(1e-8), 18.42068073818021, 1e-12)
    expect(logGamma(1)).toBeCloseTo(0, 14)
    expect(logGamma(2)).toBeCloseTo(0, 14)
    expect(() => logGamma(0)).toThrow(RangeError)
  })
})

describe('regularizedIncompleteBeta and betaQuantile', () => {
  test('closed forms: I_x(2, 3) = P(Bin(4, x) ≥ 2); I_x(½, ½) = (2/π)·asin √x (arcsine law)', ({ expectRelClose }) => {
    // I_0.4(2, 3) = 6·0.4²·0.6² + 4·0.4³·0.6 + 0.4⁴ = 0.5248
    expectRelClose(regularizedIncompleteBeta(0.4, 2, 3), 0.5248, 1e-13)
    for (const x of [0.01, 0.2, 0.5, 0.93])
      expectRelClose(regularizedIncompleteBeta(x, 0.5, 0.5), (2 / Math.PI) * Math.asin(Math.sqrt(x)), 1e-13)
    // I_x(a, 1) = x^a
    expectRelClose(regularizedIncompleteBeta(0.3, 7.5, 1), 0.3 ** 7.5, 1e-13)
  })

  test('large parameters (scipy.special.betainc(200, 300, 0.41))', ({ expectRelClose }) => {
    expectRelClose(regularizedIncompleteBeta(0.41, 200, 300), 0.677628164772179, 1e-9)
  })

  test('betaQuantile inverts it', ({ expectRelClose }) => {
    for (const [a, b] of [
      [1, 1],
      [0.5, 2],
      [3, 7],
      [682, 244],
      [20, 0.7],
    ] as const) {
      for (const p of [1e-6, 0.025, 0.5, 0.975, 1 - 1e-6]) expectRelClose(regularizedIncompleteBeta(betaQuantile(p, a, b), a, b), p, 1e-9)
    }
    expect(betaQuantile(0, 2, 3)).toBe(0)
    expect(betaQuantile(1, 2, 3)).toBe(1)
  })
})

describe('Student t', () => {
  // R: qt(0.975, 10) = 2.228139; qt(0.975, 30); qt(0.99, 6); pt(2, 5) — full digits from scipy.stats.t.
  test.for<[number, number, number]>([
    [0.975, 10, 2.228138851986274],
    [0.975, 30, 2.0422724563012378],
    [0.99, 6, 3.1426684032910064],
    [0.975, 17.776, 2.102821310380221],
  ])('qt(%f, %f) = %f', ([p, df, expected], { expectRelClose }) => {
    expectRelClose(studentTQuantile(p, df), expected, 1e-12)
  })

  test('pt(2, 5) = 0.9490302605850708 (scipy.stats.t.cdf)', ({ expectRelClose }) => {
    expectRelClose(studentTCdf(2, 5), 0.9490302605850708, 1e-13)
  })

  test('closed forms: df = 1 is Cauchy, df = 2 has F(t) = ½ + t/(2√(t² + 2))', ({ expectRelClose }) => {
    for (const t of [-30, -2, -0.4, 0, 0.7, 3, 100]) {
      expect(studentTCdf(t, 1)).toBeCloseTo(0.5 + Math.atan(t) / Math.PI, 14)
      expect(studentTCdf(t, 2)).toBeCloseTo(0.5 + t / (2 * Math.sqrt(t * t + 2)), 14)
    }
    for (const p of [0.001, 0.3, 0.975, 0.9995]) {
      expectRelClose(studentTQuantile(p, 1), Math.tan(Math.PI * (p - 0.5)), 1e-11)
      expectRelClose(studentTQuantile(p, 2), (2 * p - 1) / Math.sqrt(2 * p * (1 - p)), 1e-11)
    }
  })

  test('tends to the normal and is symmetric', ({ expectRelClose }) => {
    expectRelClose(studentTQuantile(0.975, 1e7), 1.959963984540054, 1e-6)
    expect(studentTQuantile(0.975, Number.POSITIVE_INFINITY)).toBe(normalQuantile(0.975))
    expect(studentTQuantile(0.025, 4.3)).toBeCloseTo(-studentTQuantile(0.975, 4.3), 13)
    expect(studentTCdf(-1.3, 7) + studentTCdf(1.3, 7)).toBeCloseTo(1, 14)
    expect(() => studentTCdf(1, 0)).toThrow(RangeError)
  })
})

describe('binomialCdf', () => {
  test('pbinom(3, 10, 0.5) = 176/1024 (R)', () => {
    expect(binomialCdf(3, 10, 0.5)).toBeCloseTo(176 / 1024, 15)
  })

  test.for<[number, number, number, number]>([
    [50, 100, 1, 2],
    [2, 20, 3, 10],
    [17, 60, 1, 4],
    [480, 1000, 1, 2],
  ])('P(X ≤ %i), n = %i, p = %i/%i agrees with an exact BigInt sum', ([k, n, num, den], { expectRelClose }) => {
    expectRelClose(binomialCdf(k, n, num / den), binomialCdfExact(k, n, num, den), 1e-12)
  })

  test('edges: k < 0, k ≥ n, p = 0 or 1; tiny tails do not underflow to garbage', ({ expectRelClose }) => {
    expect(binomialCdf(-1, 5, 0.3)).toBe(0)
    expect(binomialCdf(5, 5, 0.3)).toBe(1)
    expect(binomialCdf(2, 5, 0)).toBe(1)
    expect(binomialCdf(2, 5, 1)).toBe(0)
    // P(X = 0) for Bin(2000, 0.5) = 2^−2000 underflows; the log-space sum returns 0 rather than NaN.
    expect(binomialCdf(0, 2000, 0.5)).toBe(0)
    expectRelClose(binomialCdf(0, 1000, 0.5), 2 ** -1000, 1e-12)
  })
})
