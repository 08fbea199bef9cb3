import { betaQuantile, normalCdf, normalQuantile, studentTCdf, studentTQuantile } from './distributions.ts'
import { mcnemarExact } from './mcnemar.ts'
import { wilsonInterval } from './wilson.ts'

function requireConfidence(fn: string, confidence: number): void {
  if (!(confidence > 0 && confidence < 1)) throw new RangeError(`${fn}: confidence must be in (0, 1), got ${confidence}`)
}

function requireFiniteValues(fn: string, name: string, values: readonly number[], min: number): void {
  if (values.length < min) throw new RangeError(`${fn}: ${name} needs at least ${min} values, got ${values.length}`)
  for (const v of values) if (!Number.isFinite(v)) throw new RangeError(`${fn}: ${name} holds a non-finite value ${v}`)
}

function meanAndVariance(values: readonly number[]): { mean: number; variance: number } {
  const n = values.length
  let mean = 0
  for (const v of values) mean += v
  mean /= n
  let ss = 0
  for (const v of values) ss += (v - mean) ** 2
  return { mean, variance: ss / (n - 1) }
}

/** Welch's two-sample t-test: what R's `t.test(x, y)` prints. */
export interface WelchResult {
  /** mean(x) − mean(y). */
  estimate: number
  t: number
  /** Welch–Satterthwaite degrees of freedom (fractional). */
  df: number
  /** Two-sided p-value. */
  p: number
  /** Interval for mean(x) − mean(y) at `confidence`, two-sided. */
  low: number
  high: number
  confidence: number
}

/**
 * Welch's t-test for the difference of two means without assuming equal variances:
 * t = (x̄ − ȳ)/√(s²ₓ/nₓ + s²ᵧ/nᵧ), df by Welch–Satterthwaite.
 * @example welchTTest(group1, group2) // R's sleep data: t = −1.8608, df = 17.776, p = 0.07939
 */
export function welchTTest(x: readonly number[], y: readonly number[], confidence = 0.95): WelchResult {
  requireConfidence('welchTTest', confidence)
  requireFiniteValues('welchTTest', 'x', x, 2)
  requireFiniteValues('welchTTest', 'y', y, 2)
  const a = meanAndVariance(x)
  const b = meanAndVariance(y)
  const vx = a.variance / x.length
  const vy = b.variance / y.length
  const se = Math.sqrt(vx + vy)
  const estimate = a.mean - b.mean
  if (se === 0) {
    return {
      estimate,
      t: estimate === 0 ? 0 : Math.sign(estimate) * Infinity,
      df: x.length + y.length - 2,
      p: estimate === 0 ? 1 : 0,
      low: estimate,
      high: estimate,
      confidence,
    }
  }
  const df = (vx + vy) ** 2 / (vx ** 2 / (x.length - 1) + vy ** 2 / (y.length - 1))
  const t = estimate / se
  const p = Math.min(1, 2 * studentTCdf(-Math.abs(t), df))
  const half = studentTQuantile(1 - (1 - confidence) / 2, df) * se
  return { estimate, t, df, p, low: estimate - half, high: estimate + half, confidence }
}

/** Mann–Whitney U (Wilcoxon rank-sum): what R's `wilcox.test(x, y)` prints, plus the shift estimate. */
export interface MannWhitneyResult {
  /** U for x: the pairs (xᵢ, yⱼ) with xᵢ > yⱼ, ties counting ½ (R's W). */
  u: number
  /** Two-sided p-value. */
  p: number
  method: 'exact' | 'normal'
  /** Hodges–Lehmann shift: the median of all xᵢ − yⱼ; null unless asked for. */
  hodgesLehmann: number | null
}

/** Options of `mannWhitneyU`. */
export interface MannWhitneyOptions {
  /** Force the exact or the normal p-value; by default exact when both samples are below 50 and nothing is tied (R's rule). */
  exact?: boolean
  /** Continuity correction of the normal approximation. @default true */
  correct?: boolean
  /** Also compute the Hodges–Lehmann shift estimate (O(nₓnᵧ log)). @default false */
  hodgesLehmann?: boolean
}

/** Midranks of the pooled values and the tie-group sizes. */
function midranks(values: readonly number[]): { ranks: Float64Array; ties: number[] } {
  const order = values.map((v, i) => [v, i] as const).sort((p, q) => p[0] - q[0])
  const ranks = new Float64Array(values.length)
  const ties: number[] = []
  for (let i = 0; i < order.length;) {
    let j = i
    while (j + 1 < order.length && (order[j + 1] as readonly [number, number])[0] === (order[i] as readonly [number, number])[0]) j++
    const rank = (i + j) / 2 + 1
    for (let k = i; k <= j; k++) ranks[(order[k] as readonly [number, number])[1]] = rank
    if (j > i) ties.push(j - i + 1)
    i = j + 1
  }
  return { ranks, ties }
}

/**
 * The exact null distribution of U for sample sizes m, n without ties: the counts of
 * arrangements with each U, by the recurrence f(u; m, n) = f(u − n; m − 1, n) + f(u; m, n − 1);
 * returned as cumulative probabilities P(U ≤ u).
 */
function exactUCdf(m: number, n: number): Float64Array {
  // counts[j][u] for the current m over n' = 0..n; built up in m (rows of at most m·n + 1).
  let previous: Float64Array[] = Array.from({ length: n + 1 }, () => Float64Array.of(1))
  for (let i = 1; i <= m; i++) {
    const current: Float64Array[] = [Float64Array.of(1)]
    for (let j = 1; j <= n; j++) {
      const row = new Float64Array(i * j + 1)
      const withXLargest = previous[j] as Float64Array // the largest is an x: it beats all j y's
      const withYLargest = current[j - 1] as Float64Array
      for (let u = 0; u < withYLargest.length; u++) row[u]! += withYLargest[u] as number
      for (let u = 0; u < withXLargest.length; u++) row[u + j]! += withXLargest[u] as number
      current.push(row)
    }
    previous = current
  }
  const counts = previous[n] as Float64Array
  let total = 0
  for (const c of counts) total += c
  const cdf = new Float64Array(counts.length)
  let running = 0
  for (let u = 0; u < counts.length; u++) {
    running += counts[u] as number
    cdf[u] = running / total
  }
  return cdf
}

function median(sorted: Float64Array): number {
  const n = sorted.length
  const mid = Math.floor(n / 2)
  return n % 2 === 1 ? (sorted[mid] as number) : ((sorted[mid - 1] as number) + (sorted[mid] as number)) / 2
}

/**
 * The Mann–Whitney U test (Wilcoxon rank-sum) of a location shift between two independent
 * samples. Exact p-value for small samples without ties; otherwise the normal approximation
 * with the tie correction of the variance and a continuity correction, as R's `wilcox.test`.
 * @example mannWhitneyU([0.8, 0.83, 1.89, …], [1.15, 0.88, …]) // u = 35, p = 0.2544 (exact)
 */
export function mannWhitneyU(x: readonly number[], y: readonly number[], options: MannWhitneyOptions = {}): MannWhitneyResult {
  requireFiniteValues('mannWhitneyU', 'x', x, 1)
  requireFiniteValues('mannWhitneyU', 'y', y, 1)
  const nx = x.length
  const ny = y.length
  const { ranks, ties } = midranks([...x, ...y])
  let rankSum = 0
  for (let i = 0; i < nx; i++) rankSum += ranks[i] as number
  const u = rankSum - (nx * (nx + 1)) / 2
  const exact = options.exact ?? (nx < 50 && ny < 50 && ties.length === 0)
  let p: number
  if (exact && ties.length === 0) {
    const cdf = exactUCdf(nx, ny)
    // R: q > mn/2 ? P(U ≥ q) : P(U ≤ q), doubled.
    const oneSided = u > (nx * ny) / 2 ? 1 - (cdf[u - 1] as number) : (cdf[u] as number)
    p = Math.min(1, 2 * oneSided)
  } else {
    const n = nx + ny
    const tieTerm = ties.reduce((s, t) => s + t ** 3 - t, 0) / (n * (n - 1))
    const sigma = Math.sqrt(((nx * ny) / 12) * (n + 1 - tieTerm))
    const centered = u - (nx * ny) / 2
    const correction = options.correct === false ? 0 : Math.sign(centered) * 0.5
    const z = sigma === 0 ? 0 : (centered - correction) / sigma
    p = Math.min(1, 2 * normalCdf(-Math.abs(z)))
  }
  let hodgesLehmann: number | null = null
  if (options.hodgesLehmann === true) {
    const differences = new Float64Array(nx * ny)
    let k = 0
    for (const a of x) for (const b of y) differences[k++] = a - b
    hodgesLehmann = median(differences.sort())
  }
  return { u, p, method: exact && ties.length === 0 ? 'exact' : 'normal', hodgesLehmann }
}

/** A paired 2×2 table of two binary outcomes on the same items (e.g. two arms on the same questions). */
export interface PairedTable {
  /** Right on both. */
  both: number
  /** Right on the first only. */
  firstOnly: number
  /** Right on the second only. */
  secondOnly: number
  /** Right on neither. */
  neither: number
}

/** The difference of paired proportions with its interval and the exact McNemar test. */
export interface PairedProportionResult {
  /** p₁ − p₂ (first minus second), as a fraction. */
  estimate: number
  low: number
  high: number
  confidence: number
  /** Exact McNemar two-sided p-value on the discordant counts. */
  p: number
  n: number
}

/**
 * The difference of two paired proportions p₁ − p₂ with Newcombe's hybrid score interval
 * (Newcombe 1998, Stat Med 17:2635, method 10: Wilson intervals for each margin combined by
 * square-and-add with the continuity-corrected correlation φ), and the exact McNemar p-value.
 * Method 10 keeps its coverage near 0 and 1 and with few discordant pairs, where a Wald
 * interval does not.
 * @example pairedProportionDifference({ both: 59, firstOnly: 6, secondOnly: 16, neither: 80 })
 * // estimate −0.0621, 95% [−0.1186, −0.0046] (Fagerland, Lydersen & Laake 2017, Cavo et al. data)
 */
export function pairedProportionDifference(table: PairedTable, confidence = 0.95): PairedProportionResult {
  requireConfidence('pairedProportionDifference', confidence)
  const { both, firstOnly, secondOnly, neither } = table
  for (const [name, v] of Object.entries(table)) {
    if (!Number.isInteger(v) || v < 0) throw new RangeError(`pairedProportionDifference: ${name} must be a non-negative integer, got ${v}`)
  }
  const n = both + firstOnly + secondOnly + neither
  if (n === 0) throw new RangeError('pairedProportionDifference: the table is empty')
  const z = normalQuantile(1 - (1 - confidence) / 2)
  const first = both + firstOnly
  const second = both + secondOnly
  const p1 = first / n
  const p2 = second / n
  const w1 = wilsonInterval(first, n, z)
  const w2 = wilsonInterval(second, n, z)
  const [l1, u1, l2, u2] = [w1.low as number, w1.high as number, w2.low as number, w2.high as number]
  let phi = 0
  const a = (both + firstOnly) * (secondOnly + neither) * (both + secondOnly) * (firstOnly + neither)
  if (a > 0) {
    const b = both * neither - firstOnly * secondOnly
    const c = b > n / 2 ? b - n / 2 : b < 0 ? b : 0
    phi = c / Math.sqrt(a)
  }
  const estimate = p1 - p2
  const low = estimate - Math.sqrt(Math.max(0, (p1 - l1) ** 2 - 2 * phi * (p1 - l1) * (u2 - p2) + (u2 - p2) ** 2))
  const high = estimate + Math.sqrt(Math.max(0, (p2 - l2) ** 2 - 2 * phi * (p2 - l2) * (u1 - p1) + (u1 - p1) ** 2))
  return {
    estimate,
    low: Math.max(-1, low),
    high: Math.min(1, high),
    confidence,
    p: mcnemarExact(firstOnly, secondOnly),
    n,
  }
}

/**
 * Holm's step-down adjustment (Holm 1979) of p-values, as R's `p.adjust(p, "holm")`: the i-th
 * smallest becomes max over j ≤ i of min(1, (m − j + 1)·p₍ⱼ₎). Controls the family-wise error
 * rate under any dependence. Returned in the input's order.
 * @example holmAdjust([0.01, 0.04, 0.03, 0.005]) // [0.03, 0.06, 0.06, 0.02]
 */
export function holmAdjust(pValues: readonly number[]): number[] {
  for (const p of pValues) if (!(p >= 0 && p <= 1)) throw new RangeError(`holmAdjust: p-values must be in [0, 1], got ${p}`)
  const m = pValues.length
  const order = pValues.map((p, i) => [p, i] as const).sort((a, b) => a[0] - b[0])
  const adjusted = new Array<number>(m)
  let running = 0
  order.forEach(([p, i], rank) => {
    running = Math.max(running, Math.min(1, (m - rank) * p))
    adjusted[i] = running
  })
  return adjusted
}

/**
 * The Clopper–Pearson exact interval for a binomial proportion: the Beta quantiles
 * B(α/2; x, n − x + 1) and B(1 − α/2; x + 1, n − x). Conservative: coverage is at least the
 * nominal level for every true proportion, which is what an upper bound on a false-fail rate needs.
 * @example clopperPearson(682, 925) // { low: 0.7076683, high: 0.7654066 } (R's binom.test)
 */
export function clopperPearson(successes: number, n: number, confidence = 0.95): { low: number; high: number } {
  requireConfidence('clopperPearson', confidence)
  if (!Number.isInteger(n) || n <= 0) throw new RangeError(`clopperPearson: n must be a positive integer, got ${n}`)
  if (!Number.isInteger(successes) || successes < 0 || successes > n) {
    throw new RangeError(`clopperPearson: successes must be an integer in [0, ${n}], got ${successes}`)
  }
  const alpha = 1 - confidence
  return {
    low: successes === 0 ? 0 : betaQuantile(alpha / 2, successes, n - successes + 1),
    high: successes === n ? 1 : betaQuantile(1 - alpha / 2, successes + 1, n - successes),
  }
}
