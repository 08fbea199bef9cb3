import { mean as ssMean, sampleStandardDeviation } from 'simple-statistics'
import { type Distribution, P99_MIN_SAMPLES } from '../schema/run.ts'

/** z for a two-sided 95% normal interval. */
const Z95 = 1.96

/**
 * Nearest-rank percentile of ascending-sorted values: the value at 1-based rank ⌈p/100·n⌉.
 * Never interpolates, so every reported percentile is a value that was measured.
 * @param p percentile in (0, 100]
 * @example nearestRank([1, 2, 3, 4], 50) // 2
 */
export function nearestRank(sorted: ArrayLike<number>, p: number): number {
  if (sorted.length === 0) throw new RangeError('nearestRank: no values')
  if (!(p > 0 && p <= 100)) throw new RangeError(`nearestRank: p must be in (0, 100], got ${p}`)
  // p/100·n can land a hair above an integer in floating point (0.95·20 = 19.000000000000004).
  const exact = (p * sorted.length) / 100
  const rounded = Math.round(exact)
  const rank = Math.abs(exact - rounded) < 1e-9 ? rounded : Math.ceil(exact)
  return sorted[Math.max(1, rank) - 1] as number
}

/** The distribution of no values: 0 samples, every statistic null. Spread it; never mutate it. */
export const EMPTY_DISTRIBUTION: Readonly<Distribution> = {
  samples: 0,
  mean: null,
  stddev: null,
  ci95Low: null,
  ci95High: null,
  min: null,
  p25: null,
  p50: null,
  p75: null,
  p90: null,
  p95: null,
  p99: null,
  max: null,
}

/**
 * Summarizes values the servegate way: count, mean, sample standard deviation, normal 95%
 * interval for the mean (mean ± 1.96·sd/√n), min, nearest-rank p25…p99, max.
 * Non-finite values are a caller bug and throw. A `Float64Array` is sorted in place once its mean
 * and sd are taken (in the order given, so the figures are those of the same numbers in an array):
 * a cell's pooled gaps, hundreds of thousands of them, are never copied.
 */
export function distribution(values: readonly number[] | Float64Array): Distribution {
  const n = values.length
  if (n === 0) return { ...EMPTY_DISTRIBUTION }
  for (const v of values) {
    if (!Number.isFinite(v)) throw new RangeError(`distribution: non-finite value ${v}`)
  }
  // simple-statistics reads by index and length only: a typed array is summed exactly as an array.
  const mean = ssMean(values as number[])
  const stddev = n >= 2 ? sampleStandardDeviation(values as number[]) : null
  const sorted = values instanceof Float64Array ? values.sort() : Float64Array.from(values).sort()
  const half = stddev === null ? null : (Z95 * stddev) / Math.sqrt(n)
  return {
    samples: n,
    mean,
    stddev,
    ci95Low: half === null ? null : mean - half,
    ci95High: half === null ? null : mean + half,
    min: sorted[0] as number,
    p25: nearestRank(sorted, 25),
    p50: nearestRank(sorted, 50),
    p75: nearestRank(sorted, 75),
    p90: nearestRank(sorted, 90),
    p95: nearestRank(sorted, 95),
    p99: nearestRank(sorted, 99),
    max: sorted[n - 1] as number,
  }
}

/** True when a distribution's p99 rests on too few samples to mean more than "about the max". */
export function p99IsDescriptive(d: Distribution): boolean {
  return d.samples < P99_MIN_SAMPLES
}
