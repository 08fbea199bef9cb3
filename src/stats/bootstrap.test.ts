import { describe, expect, test } from 'vitest'
import { nearestRank } from '../metrics/distribution.ts'
import { createRandom } from '../random.ts'
import {
  bcaInterval,
  bootstrapMeanLogRatio,
  bootstrapMeanOf,
  bootstrapPairedStatistic,
  bootstrapPercentile,
  bootstrapRatioOfMeans,
  bootstrapRatioOfPercentiles,
  bootstrapStatistic,
  jackknifeAcceleration,
  nearestRankPosition,
  percentileInterval,
  Resampler,
} from './bootstrap.ts'
import { normalQuantile, studentTQuantile } from './distributions.ts'

// Efron & Tibshirani (1993), An Introduction to the Bootstrap, Table 14.1: spatial test data A.
const SPATIAL_A = [48, 36, 20, 29, 42, 42, 20, 42, 22, 41, 45, 14, 6, 0, 33, 28, 34, 4, 32, 24, 47, 41, 24, 26, 30, 41]
const plugInVariance = (s: Float64Array) => {
  let m = 0
  for (const v of s) m += v
  m /= s.length
  let q = 0
  for (const v of s) q += (v - m) ** 2
  return q / s.length
}
const mean = (s: ArrayLike<number>) => {
  let m = 0
  for (let i = 0; i < s.length; i++) m += s[i] as number
  return m / s.length
}

describe('Resampler', () => {
  test('draws the same sequence as createRandom(seed) (mulberry32)', () => {
    const out = new Int32Array(1000)
    new Resampler(42).draw(out, 97)
    const random = createRandom(42)
    for (const v of out) expect(v).toBe(Math.floor(random() * 97))
  })
})

describe('nearestRankPosition', () => {
  test('agrees with metrics/distribution.ts nearestRank for every n ≤ 200 and the percentiles we use', () => {
    for (let n = 1; n <= 200; n++) {
      const sorted = Array.from({ length: n }, (_, i) => i + 1)
      for (const p of [1, 25, 50, 75, 90, 95, 99, 100]) expect(nearestRankPosition(n, p)).toBe(nearestRank(sorted, p))
    }
  })
})

describe('jackknifeAcceleration', () => {
  test('for the mean it is the closed form Σ(x − x̄)³ / (6 (Σ(x − x̄)²)^{3/2})', () => {
    const x = [1, 2, 2, 3, 9, 14, 0.5]
    const m = mean(x)
    const closed = x.reduce((s, v) => s + (v - m) ** 3, 0) / (6 * x.reduce((s, v) => s + (v - m) ** 2, 0) ** 1.5)
    const sum = x.reduce((s, v) => s + v, 0)
    const jack = x.map((v) => (sum - v) / (x.length - 1))
    expect(jackknifeAcceleration(jack)).toBeCloseTo(closed, 14)
  })

  test('Efron & Tibshirani (1993) §14.3: a = 0.061 for the variance of the spatial test data', () => {
    const dist = bootstrapStatistic(SPATIAL_A, plugInVariance, { seed: 1 })
    expect(dist.estimate).toBeCloseTo(171.5, 1)
    expect(dist.acceleration).toBeCloseTo(0.061, 3)
  })
})

describe('BCa and percentile intervals', () => {
  test('Efron & Tibshirani (1993) Table 14.2, spatial data, 90%: BCa (115.8, 259.6), within Monte Carlo error', () => {
    const dist = bootstrapStatistic(SPATIAL_A, plugInVariance, { seed: 7, resamples: 20_000 })
    const bca = bcaInterval(dist, 0.9)
    expect(Math.abs(bca.low / 115.8 - 1)).toBeLessThan(0.03)
    expect(Math.abs(bca.high / 259.6 - 1)).toBeLessThan(0.03)
    // The variance is right-skewed: BCa moves both ends up from the percentile interval.
    const percentile = percentileInterval(dist, 0.9)
    expect(bca.low).toBeGreaterThan(percentile.low)
    expect(bca.high).toBeGreaterThan(percentile.high)
  })

  test('for the mean of a large normal sample both agree with the z interval', () => {
    const random = createRandom(3)
    const x = Array.from({ length: 400 }, () => Math.sqrt(-2 * Math.log(1 - random())) * Math.cos(2 * Math.PI * random()))
    const m = mean(x)
    const se = Math.sqrt(x.reduce((s, v) => s + (v - m) ** 2, 0) / (x.length * (x.length - 1)))
    const dist = bootstrapMeanOf(x, { seed: 11, resamples: 20_000 })
    for (const interval of [bcaInterval(dist, 0.95), percentileInterval(dist, 0.95)]) {
      expect(interval.low).toBeCloseTo(m - 1.96 * se, 2)
      expect(interval.high).toBeCloseTo(m + 1.96 * se, 2)
    }
  })

  test('expanding for a small n widens by about √(n/(n−1))·t_{n−1}/z', () => {
    const x = [3.1, 2.2, 5.9, 4.4, 3.8, 2.9, 4.1, 3.3]
    const dist = bootstrapMeanOf(x, { seed: 5, resamples: 20_000 })
    const plain = percentileInterval(dist, 0.95)
    const expanded = percentileInterval(dist, 0.95, { expandForN: 8 })
    const factor = (Math.sqrt(8 / 7) * studentTQuantile(0.975, 7)) / normalQuantile(0.975)
    expect((expanded.high - expanded.low) / (plain.high - plain.low)).toBeCloseTo(factor, 1)
    expect(bcaInterval(dist, 0.95, { expandForN: 8 }).high - bcaInterval(dist, 0.95, { expandForN: 8 }).low).toBeGreaterThan(
      bcaInterval(dist, 0.95).high - bcaInterval(dist, 0.95).low,
    )
  })

  test('the same seed gives the same interval; another seed another one', () => {
    const a = bcaInterval(bootstrapMeanOf([1, 5, 2, 8, 3], { seed: 1 }), 0.95)
    expect(bcaInterval(bootstrapMeanOf([1, 5, 2, 8, 3], { seed: 1 }), 0.95)).toEqual(a)
    expect(bcaInterval(bootstrapMeanOf([1, 5, 2, 8, 3], { seed: 2 }), 0.95)).not.toEqual(a)
  })

  test('a wider confidence never gives a narrower interval', () => {
    const dist = bootstrapMeanOf([4, 8, 15, 16, 23, 42], { seed: 9 })
    let previous = bcaInterval(dist, 0.5)
    for (const c of [0.8, 0.9, 0.95, 0.99, 0.999]) {
      const next = bcaInterval(dist, c)
      expect(next.low).toBeLessThanOrEqual(previous.low)
      expect(next.high).toBeGreaterThanOrEqual(previous.high)
      previous = next
    }
  })

  test('a constant sample has a point interval, z0 = 0 (ties count half)', () => {
    const dist = bootstrapMeanOf([5, 5, 5, 5], { seed: 1 })
    expect(dist.z0).toBe(0)
    expect(bcaInterval(dist, 0.95)).toMatchObject({ low: 5, high: 5 })
  })

  test('refuses bad arguments', () => {
    expect(() => bootstrapMeanOf([1], { seed: 1 })).toThrow(RangeError)
    expect(() => bootstrapMeanOf([1, 2], { seed: 1.5 })).toThrow(/seed/)
    expect(() => bootstrapMeanOf([1, 2], { seed: 1, resamples: 10 })).toThrow(/resamples/)
    expect(() => bcaInterval(bootstrapMeanOf([1, 2], { seed: 1 }), 1)).toThrow(/confidence/)
  })
})

describe('statistics', () => {
  test('paired generic and the mean log-ratio fast path agree exactly (same draws)', () => {
    const c = [110, 220, 330, 95, 140, 160]
    const b = [100, 200, 300, 100, 150, 140]
    const fast = bootstrapMeanLogRatio(c, b, { seed: 4 })
    const generic = bootstrapPairedStatistic(c, b, (x, y) => mean(x.map((v, i) => Math.log(v / (y[i] as number)))), { seed: 4 })
    expect(fast.estimate).toBeCloseTo(generic.estimate, 14)
    expect(fast.acceleration).toBeCloseTo(generic.acceleration, 12)
    for (let i = 0; i < fast.replicates.length; i += 97) expect(fast.replicates[i]).toBeCloseTo(generic.replicates[i] as number, 12)
    expect(Math.exp(bootstrapMeanLogRatio([110, 220], [100, 200], { seed: 1 }).estimate)).toBeCloseTo(1.1, 14)
    expect(() => bootstrapMeanLogRatio([1, 0], [1, 1], { seed: 1 })).toThrow(/positive/)
  })

  test('ratio of means of independent samples: the estimate, and an interval that covers it', () => {
    const dist = bootstrapRatioOfMeans([12, 14, 11, 15, 13], [10, 10, 11, 9, 10], { seed: 2 })
    expect(Math.exp(dist.estimate)).toBeCloseTo(13 / 10, 14)
    const interval = bcaInterval(dist, 0.95)
    expect(interval.low).toBeLessThan(dist.estimate)
    expect(interval.high).toBeGreaterThan(dist.estimate)
  })

  test('ratio of nearest-rank percentiles: the estimate is the ratio of the nearest-rank percentiles', () => {
    const random = createRandom(8)
    const b = Array.from({ length: 50 }, () => 100 + 50 * random())
    const c = b.map((v) => v * 1.2 + 5 * random())
    for (const p of [50, 90, 95, 99]) {
      for (const paired of [true, false]) {
        const dist = bootstrapRatioOfPercentiles(c, b, { p, paired, seed: 3 })
        const expected =
          nearestRank(
            [...c].sort((x, y) => x - y),
            p,
          ) /
          nearestRank(
            [...b].sort((x, y) => x - y),
            p,
          )
        expect(Math.exp(dist.estimate)).toBeCloseTo(expected, 14)
        expect(dist.dropped).toBe(0)
      }
    }
  })

  test('pairing narrows the interval when the prompts drive the values', () => {
    const random = createRandom(12)
    const prompt = Array.from({ length: 80 }, () => Math.exp(random() * 2))
    const b = prompt.map((v) => v * (1 + 0.02 * random()))
    const c = prompt.map((v) => 1.05 * v * (1 + 0.02 * random()))
    const width = (paired: boolean) => {
      const i = bcaInterval(bootstrapRatioOfPercentiles(c, b, { p: 50, paired, seed: 1 }), 0.95)
      return i.high - i.low
    }
    expect(width(true)).toBeLessThan(width(false) / 3)
  })

  test('percentile replicates of a resample equal a direct nearest-rank of the resampled values', () => {
    // One sample of clusters (ITL gaps per request): pooled percentile over the resampled requests.
    const clusters = [[1, 2, 3], [10], [4, 4], [7, 8, 9, 30]]
    const dist = bootstrapPercentile(clusters, { p: 90, seed: 6, resamples: 100 })
    const pooled = clusters.flat().sort((a, b) => a - b)
    expect(Math.exp(dist.estimate)).toBeCloseTo(nearestRank(pooled, 90), 12)
    // Every replicate is the log of some value in the data.
    const values = new Set(pooled.map((v) => Math.log(v)))
    for (const r of dist.replicates) expect(values.has(r)).toBe(true)
  })

  test('paired arms must have equal lengths; p must be a percentile', () => {
    expect(() => bootstrapRatioOfPercentiles([1, 2, 3], [1, 2], { p: 50, paired: true, seed: 1 })).toThrow(/same length/)
    expect(() => bootstrapPercentile([1, 2, 3], { p: 0, seed: 1 })).toThrow(/p must be/)
  })
})
