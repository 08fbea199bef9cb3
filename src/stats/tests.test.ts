import { describe, expect, test } from 'vitest'
import { clopperPearson, holmAdjust, mannWhitneyU, pairedProportionDifference, welchTTest } from './tests.ts'

// R's `sleep` data set (Cushny & Peebles): extra hours of sleep under two drugs.
const SLEEP_1 = [0.7, -1.6, -0.2, -1.2, -0.1, 3.4, 3.7, 0.8, 0.0, 2.0]
const SLEEP_2 = [1.9, 0.8, 1.1, 0.1, -0.1, 4.4, 5.5, 1.6, 4.6, 3.4]

describe('welchTTest', () => {
  test("R's t.test(extra ~ group, data = sleep): t = −1.8608, df = 17.776, p = 0.07939, 95% CI [−3.3654832, 0.2054832]", () => {
    const r = welchTTest(SLEEP_1, SLEEP_2)
    expect(r.estimate).toBeCloseTo(0.75 - 2.33, 12)
    expect(r.t).toBeCloseTo(-1.8608, 4)
    expect(r.df).toBeCloseTo(17.776, 3)
    expect(r.p).toBeCloseTo(0.07939, 5)
    expect(r.low).toBeCloseTo(-3.3654832, 7)
    expect(r.high).toBeCloseTo(0.2054832, 7)
  })

  test('df is between the smaller n − 1 and n₁ + n₂ − 2, and a wider confidence widens the interval', () => {
    const r = welchTTest([1, 2, 3, 4, 100], [5, 6, 7, 8, 9, 10, 11])
    expect(r.df).toBeGreaterThanOrEqual(4)
    expect(r.df).toBeLessThanOrEqual(10)
    const wide = welchTTest(SLEEP_1, SLEEP_2, 0.99)
    expect(wide.high - wide.low).toBeGreaterThan(welchTTest(SLEEP_1, SLEEP_2).high - welchTTest(SLEEP_1, SLEEP_2).low)
  })

  test('zero variance on both sides: a point interval, p from the sign', () => {
    expect(welchTTest([2, 2], [2, 2]).p).toBe(1)
    expect(welchTTest([3, 3], [2, 2]).p).toBe(0)
    expect(() => welchTTest([1], [2, 3])).toThrow(RangeError)
  })
})

describe('mannWhitneyU', () => {
  // R's ?wilcox.test example (Hollander & Wolfe 1973, p. 69): permeability constants.
  const X = [0.8, 0.83, 1.89, 1.04, 1.45, 1.38, 1.91, 1.64, 0.73, 1.46]
  const Y = [1.15, 0.88, 0.9, 0.74, 1.21]

  test("R's wilcox.test(x, y, alternative = 'greater'): W = 35, p = 0.1272 → two-sided exact 0.2544", () => {
    const r = mannWhitneyU(X, Y)
    expect(r.method).toBe('exact')
    expect(r.u).toBe(35)
    expect(r.p).toBeCloseTo(2 * 0.1272061272061272, 12)
  })

  test("R's wilcox.test(extra ~ group, data = sleep): ties → normal approximation, W = 25.5, p = 0.06933", () => {
    const r = mannWhitneyU(SLEEP_1, SLEEP_2)
    expect(r.method).toBe('normal')
    expect(r.u).toBe(25.5)
    expect(r.p).toBeCloseTo(0.06933, 5)
  })

  test('the exact distribution sums to 1 and matches a brute-force count for tiny samples', () => {
    // All C(6, 3) = 20 splits of ranks 1..6 into x (3) and y (3): U = 0 in exactly 1 of them.
    expect(mannWhitneyU([1, 2, 3], [4, 5, 6]).p).toBeCloseTo(2 / 20, 15)
    expect(mannWhitneyU([4, 5, 6], [1, 2, 3]).p).toBeCloseTo(2 / 20, 15)
    // U = 1 (one y below one x): P(U ≤ 1) = 2/20.
    expect(mannWhitneyU([1, 2, 4], [3, 5, 6]).p).toBeCloseTo(4 / 20, 15)
  })

  test('Hodges–Lehmann: the median of all pairwise differences xᵢ − yⱼ', () => {
    const r = mannWhitneyU(X, Y, { hodgesLehmann: true })
    const differences = X.flatMap((a) => Y.map((b) => a - b)).sort((a, b) => a - b)
    expect(r.hodgesLehmann).toBeCloseTo(((differences[24] as number) + (differences[25] as number)) / 2, 12)
    expect(r.hodgesLehmann).toBeCloseTo(0.305, 12)
    expect(mannWhitneyU([1, 2], [3]).hodgesLehmann).toBeNull()
  })

  test('without continuity correction the normal p is smaller', () => {
    expect(mannWhitneyU(SLEEP_1, SLEEP_2, { correct: false }).p).toBeLessThan(mannWhitneyU(SLEEP_1, SLEEP_2).p)
  })
})

describe('pairedProportionDifference', () => {
  test('Fagerland, Lydersen & Laake (2017), Statistical Analysis of Contingency Tables, ch. 8 (Cavo et al. 2012): −0.0621 [−0.1186, −0.0046]', () => {
    const r = pairedProportionDifference({ both: 59, firstOnly: 6, secondOnly: 16, neither: 80 })
    expect(r.estimate).toBeCloseTo(-0.0621, 4)
    expect(r.low).toBeCloseTo(-0.1186, 4)
    expect(r.high).toBeCloseTo(-0.0046, 4)
    expect(r.n).toBe(161)
  })

  test('carries the exact McNemar p-value on the discordant pairs', () => {
    // Fagerland et al. (2013): 1 vs 7 discordant → exact p = 0.0703125.
    expect(pairedProportionDifference({ both: 10, firstOnly: 1, secondOnly: 7, neither: 3 }).p).toBe(0.0703125)
  })

  test('stays inside [−1, 1], contains the estimate, and is symmetric when the arms swap', () => {
    const a = pairedProportionDifference({ both: 0, firstOnly: 0, secondOnly: 12, neither: 0 })
    expect(a.low).toBeGreaterThanOrEqual(-1)
    expect(a.estimate).toBe(-1)
    const b = pairedProportionDifference({ both: 30, firstOnly: 4, secondOnly: 9, neither: 7 })
    const swapped = pairedProportionDifference({ both: 30, firstOnly: 9, secondOnly: 4, neither: 7 })
    expect(b.low).toBeLessThanOrEqual(b.estimate)
    expect(b.high).toBeGreaterThanOrEqual(b.estimate)
    expect(swapped.low).toBeCloseTo(-b.high, 12)
    expect(swapped.high).toBeCloseTo(-b.low, 12)
  })

  test('refuses an empty or non-integer table', () => {
    expect(() => pairedProportionDifference({ both: 0, firstOnly: 0, secondOnly: 0, neither: 0 })).toThrow(RangeError)
    expect(() => pairedProportionDifference({ both: 1.5, firstOnly: 0, secondOnly: 0, neither: 0 })).toThrow(/both/)
  })
})

describe('holmAdjust', () => {
  test('R: p.adjust(c(0.01, 0.04, 0.03, 0.005), "holm") = c(0.03, 0.06, 0.06, 0.02)', () => {
    const adjusted = holmAdjust([0.01, 0.04, 0.03, 0.005])
    for (const [a, e] of adjusted.map((v, i) => [v, [0.03, 0.06, 0.06, 0.02][i] as number])) expect(a).toBeCloseTo(e as number, 15)
  })

  test('caps at 1, keeps order, and leaves a single p alone', () => {
    expect(holmAdjust([0.5, 0.6])).toEqual([1, 1])
    expect(holmAdjust([0.2])).toEqual([0.2])
    expect(holmAdjust([])).toEqual([])
    expect(() => holmAdjust([1.2])).toThrow(RangeError)
  })
})

describe('clopperPearson', () => {
  test("R's binom.test(682, 925): 95% CI [0.7076683, 0.7654066]; binom.test(7, 20): [0.1539092, 0.5921885]", () => {
    const a = clopperPearson(682, 925)
    expect(a.low).toBeCloseTo(0.7076683, 7)
    expect(a.high).toBeCloseTo(0.7654066, 7)
    const b = clopperPearson(7, 20)
    expect(b.low).toBeCloseTo(0.1539092, 7)
    expect(b.high).toBeCloseTo(0.5921885, 7)
  })

  test('closed forms at the ends: x = 0 → [0, 1 − (α/2)^{1/n}], x = n → [(α/2)^{1/n}, 1]', () => {
    expect(clopperPearson(0, 10).low).toBe(0)
    expect(clopperPearson(0, 10).high).toBeCloseTo(1 - 0.025 ** (1 / 10), 12)
    expect(clopperPearson(10, 10).low).toBeCloseTo(0.025 ** (1 / 10), 12)
    expect(clopperPearson(10, 10).high).toBe(1)
    // The "rule of three": 0 of 1000 → upper ≈ 3.69/1000 at 95% two-sided.
    expect(clopperPearson(0, 1000).high).toBeCloseTo(0.003682, 5)
  })

  test('refuses impossible counts', () => {
    expect(() => clopperPearson(3, 2)).toThrow(RangeError)
    expect(() => clopperPearson(1, 0)).toThrow(RangeError)
  })
})
