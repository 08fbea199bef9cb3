import { describe, expect, test } from 'vitest'
import { createRandom } from '../random.ts'
import { EXACT_SIGNED_RANK_MAX_N, signedRankCdf, signedRankTest } from './signed-rank.ts'

/** T⁺ of values (no ties, no zeros). */
function tPlus(values: readonly number[]): number {
  const ranked = values.map((v) => Math.abs(v)).sort((a, b) => a - b)
  return values.filter((v) => v > 0).reduce((s, v) => s + ranked.indexOf(Math.abs(v)) + 1, 0)
}

describe('signedRankCdf', () => {
  test('matches enumeration of all 2^n sign patterns', () => {
    const n = 10
    const counts = new Map<number, number>()
    for (let mask = 0; mask < 2 ** n; mask++) {
      let t = 0
      for (let r = 1; r <= n; r++) if (mask & (1 << (r - 1))) t += r
      counts.set(t, (counts.get(t) ?? 0) + 1)
    }
    let running = 0
    for (let t = 0; t <= 55; t++) {
      running += counts.get(t) ?? 0
      expect(signedRankCdf(t, n)).toBeCloseTo(running / 1024, 12)
    }
  })

  test('the exact table and the normal approximation beyond it agree two sd below the mean', () => {
    for (const n of [EXACT_SIGNED_RANK_MAX_N, EXACT_SIGNED_RANK_MAX_N + 1]) {
      const mean = (n * (n + 1)) / 4
      const sd = Math.sqrt((n * (n + 1) * (2 * n + 1)) / 24)
      expect(Math.abs(signedRankCdf(Math.floor(mean - 2 * sd), n) - 0.02275)).toBeLessThan(0.002)
    }
  })
})

describe('signedRankTest', () => {
  // R: x <- c(1.83, 0.50, 1.62, 2.48, 1.68, 1.88, 1.55, 3.06, 1.30)
  //    y <- c(0.878, 0.647, 0.598, 2.05, 1.06, 1.29, 1.06, 3.14, 1.29)
  //    wilcox.test(x, y, paired = TRUE, alternative = "greater")  → V = 40, p-value = 0.01953
  const x = [1.83, 0.5, 1.62, 2.48, 1.68, 1.88, 1.55, 3.06, 1.3]
  const y = [0.878, 0.647, 0.598, 2.05, 1.06, 1.29, 1.06, 3.14, 1.29]
  const d = x.map((v, i) => v - (y[i] as number))

  test("reproduces R's statistic and one-sided p-value (Hollander & Wolfe's depression data)", () => {
    const r = signedRankTest(d, 0.95)
    expect(r.statistic).toBe(40)
    expect(r.pGreater).toBeCloseTo(0.01953, 5)
  })

  test('the estimate is the median of the Walsh averages', () => {
    // Walsh averages of 1, 2, 4: 1, 1.5, 2, 2.5, 3, 4.
    expect(signedRankTest([1, 2, 4]).estimate).toBe(2.25)
  })

  test('the interval is exactly the shifts the two-sided test does not reject', () => {
    const confidence = 0.9
    const r = signedRankTest(d, confidence)
    expect(r.achievedConfidence).toBeGreaterThanOrEqual(confidence)
    const n = d.length
    const accepted = (mu: number) => {
      const t = tPlus(d.map((v) => v - mu))
      const lower = signedRankCdf(t, n)
      const upper = 1 - signedRankCdf(t - 1, n)
      return lower > (1 - r.achievedConfidence) / 2 + 1e-12 && upper > (1 - r.achievedConfidence) / 2 + 1e-12
    }
    for (let mu = -1; mu <= 2; mu += 0.0037) {
      if (Math.abs(mu - r.low) < 1e-6 || Math.abs(mu - r.high) < 1e-6) continue
      expect(accepted(mu), `shift ${mu.toFixed(4)} vs [${r.low}, ${r.high}]`).toBe(mu > r.low && mu < r.high)
    }
  })

  test('covers the centre of symmetric heavy-tailed data at its stated rate', () => {
    const random = createRandom(7)
    let covered = 0
    const trials = 400
    for (let t = 0; t < trials; t++) {
      // Symmetric with heavy tails: a difference of two Pareto-contaminated values, centre 0.3.
      const sample = Array.from({ length: 24 }, () => {
        const stall = () => (random() < 0.1 ? (1 - random()) ** (-1 / 1.2) : 0)
        return 0.3 + 0.1 * (random() - random()) + stall() - stall()
      })
      const r = signedRankTest(sample, 0.9)
      if (r.low <= 0.3 && 0.3 <= r.high) covered++
    }
    expect(covered / trials).toBeGreaterThan(0.86)
    expect(covered / trials).toBeLessThan(0.96)
  })

  test('rejects bad input by name', () => {
    expect(() => signedRankTest([1], 0.9)).toThrow(/at least 2 non-zero values/)
    expect(() => signedRankTest([1, Number.NaN], 0.9)).toThrow(/non-finite/)
    expect(() => signedRankTest([1, 2], 1)).toThrow(/confidence must be in \(0, 1\)/)
  })
})
