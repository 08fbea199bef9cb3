import { normalCdf, normalQuantile } from './distributions.ts'

/** Above this many values the signed-rank distribution is taken as normal (its exact table grows as n³). */
export const EXACT_SIGNED_RANK_MAX_N = 100

/**
 * The exact null distribution of the Wilcoxon signed-rank statistic T⁺ for n values without
 * ties: P(T⁺ ≤ t) for t = 0 … n(n+1)/2, by counting sign patterns (each of the 2ⁿ equally likely).
 */
function exactSignedRankCdf(n: number): Float64Array {
  const max = (n * (n + 1)) / 2
  let counts = new Float64Array(max + 1)
  counts[0] = 1
  for (let rank = 1; rank <= n; rank++) {
    const next = new Float64Array(max + 1)
    for (let t = 0; t <= max; t++) {
      const c = counts[t] as number
      if (c === 0) continue
      next[t] = (next[t] as number) + c
      next[t + rank] = (next[t + rank] as number) + c
    }
    counts = next
  }
  const total = 2 ** n
  const cdf = new Float64Array(max + 1)
  let running = 0
  for (let t = 0; t <= max; t++) {
    running += counts[t] as number
    cdf[t] = running / total
  }
  return cdf
}

const cdfCache = new Map<number, Float64Array>()

/**
 * P(T⁺ ≤ t) under the null of a distribution symmetric about 0: exact for n ≤ 100, otherwise
 * the normal approximation with a continuity correction.
 */
export function signedRankCdf(t: number, n: number): number {
  if (!Number.isInteger(n) || n < 1) throw new RangeError(`signedRankCdf: n must be a positive integer, got ${n}`)
  const max = (n * (n + 1)) / 2
  if (t < 0) return 0
  if (t >= max) return 1
  if (n <= EXACT_SIGNED_RANK_MAX_N) {
    let cdf = cdfCache.get(n)
    if (cdf === undefined) {
      cdf = exactSignedRankCdf(n)
      cdfCache.set(n, cdf)
    }
    return cdf[Math.floor(t)] as number
  }
  const mean = max / 2
  const sd = Math.sqrt((n * (n + 1) * (2 * n + 1)) / 24)
  return normalCdf((Math.floor(t) + 0.5 - mean) / sd)
}

/** What R's `wilcox.test(x, conf.int = TRUE)` reports for one sample (or paired differences). */
export interface SignedRankResult {
  /** The Hodges–Lehmann estimate: the median of the Walsh averages (xᵢ + xⱼ)/2, i ≤ j. */
  estimate: number
  /** T⁺: the sum of the ranks of |x| over the positive values. */
  statistic: number
  /** The one-sided p-value of "the centre is above 0", P(T⁺ ≥ observed). */
  pGreater: number
  /** The interval for the centre of symmetry at `confidence`, two-sided, from the Walsh averages. */
  low: number
  high: number
  /** The coverage actually achieved (the distribution is discrete, so at least `confidence`). */
  achievedConfidence: number
  confidence: number
}

/**
 * The Wilcoxon signed-rank test with its Hodges–Lehmann estimate and distribution-free interval
 * (Tukey's Walsh-average construction). It assumes only that the values are symmetric about
 * their centre, which the log-ratio of two exchangeable arms is under the null: a stall on one
 * arm moves one rank, not the mean, so heavy tails cost it little. Zeros are dropped and ties
 * are not corrected (measured timings do not tie).
 * @example signedRankTest([0.1, 0.3, -0.05, 0.2, 0.15], 0.9).estimate
 */
export function signedRankTest(values: ArrayLike<number>, confidence = 0.95): SignedRankResult {
  if (!(confidence > 0 && confidence < 1)) throw new RangeError(`signedRankTest: confidence must be in (0, 1), got ${confidence}`)
  const x = Array.from(values).filter((v) => v !== 0)
  for (const v of x) if (!Number.isFinite(v)) throw new RangeError(`signedRankTest: a non-finite value ${v}`)
  const n = x.length
  if (n < 2) throw new RangeError(`signedRankTest: needs at least 2 non-zero values, got ${n}`)

  const byMagnitude = x.map((v, i) => ({ abs: Math.abs(v), i })).sort((a, b) => a.abs - b.abs)
  let statistic = 0
  byMagnitude.forEach((entry, rank) => {
    if ((x[entry.i] as number) > 0) statistic += rank + 1
  })
  const pGreater = 1 - signedRankCdf(statistic - 1, n)

  const walsh = walshAverages(x)
  const m = walsh.length
  const estimate = m % 2 === 1 ? (walsh[(m - 1) / 2] as number) : ((walsh[m / 2 - 1] as number) + (walsh[m / 2] as number)) / 2
  // The interval is [W_(k), W_(m−k+1)] with k the largest count such that P(T⁺ ≤ k − 1) ≤ α/2.
  const k = walshRank(n, (1 - confidence) / 2)
  return {
    estimate,
    statistic,
    pGreater,
    low: walsh[k - 1] as number,
    high: walsh[m - k] as number,
    achievedConfidence: 1 - 2 * signedRankCdf(k - 1, n),
    confidence,
  }
}

/** The sorted Walsh averages (xᵢ + xⱼ)/2 for i ≤ j. */
function walshAverages(x: readonly number[]): Float64Array {
  const n = x.length
  const out = new Float64Array((n * (n + 1)) / 2)
  let w = 0
  for (let i = 0; i < n; i++) for (let j = i; j < n; j++) out[w++] = ((x[i] as number) + (x[j] as number)) / 2
  return out.sort()
}

/** The 1-based order statistic of the Walsh averages that bounds a one-sided α interval (at least 1). */
function walshRank(n: number, alpha: number): number {
  const max = (n * (n + 1)) / 2
  if (n > EXACT_SIGNED_RANK_MAX_N) {
    const sd = Math.sqrt((n * (n + 1) * (2 * n + 1)) / 24)
    const k = Math.floor(max / 2 - normalQuantile(1 - alpha) * sd + 0.5)
    return Math.max(1, k)
  }
  let k = 0
  while (k + 1 <= max && signedRankCdf(k, n) <= alpha) k++
  return Math.max(1, k)
}
