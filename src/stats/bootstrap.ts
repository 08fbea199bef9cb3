import { normalCdf, normalQuantile, studentTQuantile } from './distributions.ts'

/** Bootstrap resamples when none are given. */
export const DEFAULT_RESAMPLES = 2000

/** How to resample: the count and the seed (required: every interval must be reproducible). */
export interface BootstrapOptions {
  /** Resamples drawn. @default 2000 */
  resamples?: number
  /** Seed of the PRNG (mulberry32); the same seed and data give the same interval everywhere. */
  seed: number
}

/**
 * The bootstrap distribution of a statistic with what a BCa interval needs, so one set of
 * replicates answers intervals at any confidence (sequential looks, Holm levels).
 */
export interface BootstrapDistribution {
  /** The statistic on the data as observed. */
  estimate: number
  /** Finite replicates, sorted ascending. */
  replicates: Float64Array
  /** Bias correction: Φ⁻¹ of the share of replicates below the estimate (ties count half). */
  z0: number
  /** Acceleration, from the jackknife (empirical influence values). */
  acceleration: number
  resamples: number
  seed: number
  /** Replicates dropped because the statistic was not finite on them. */
  dropped: number
}

/** A two-sided interval from a bootstrap distribution. */
export interface BootstrapInterval {
  estimate: number
  low: number
  high: number
  /** Two-sided confidence. */
  confidence: number
  method: 'percentile' | 'bca'
}

function resolveResamples(options: BootstrapOptions): number {
  const resamples = options.resamples ?? DEFAULT_RESAMPLES
  if (!Number.isInteger(resamples) || resamples < 100) {
    throw new RangeError(`bootstrap: resamples must be an integer ≥ 100, got ${resamples}`)
  }
  if (!Number.isInteger(options.seed)) throw new RangeError(`bootstrap: seed must be an integer, got ${options.seed}`)
  return resamples
}

function requireConfidence(fn: string, confidence: number): void {
  if (!(confidence > 0 && confidence < 1)) throw new RangeError(`${fn}: confidence must be in (0, 1), got ${confidence}`)
}

/**
 * The 1-based nearest rank ⌈p/100·n⌉ (never below 1), with the same guard against a product
 * landing a hair above an integer as `nearestRank` in metrics/distribution.ts.
 */
export function nearestRankPosition(n: number, p: number): number {
  const exact = (p * n) / 100
  const rounded = Math.round(exact)
  const rank = Math.abs(exact - rounded) < 1e-9 ? rounded : Math.ceil(exact)
  return Math.min(n, Math.max(1, rank))
}

/**
 * Acceleration from jackknife values of one or more independent samples (Davison & Hinkley
 * 1997, eq. 5.25): with influence U = (n − 1)(θ̄₍.₎ − θ₍ᵢ₎) per sample,
 * a = Σ_g n_g⁻³ ΣU³ / (6 (Σ_g n_g⁻² ΣU²)^{3/2}). One sample reduces to ΣU³ / (6 (ΣU²)^{3/2}).
 */
export function jackknifeAcceleration(...groups: ArrayLike<number>[]): number {
  let cubes = 0
  let squares = 0
  for (const jack of groups) {
    const n = jack.length
    if (n < 2) continue
    let mean = 0
    for (let i = 0; i < n; i++) mean += jack[i] as number
    mean /= n
    let s2 = 0
    let s3 = 0
    for (let i = 0; i < n; i++) {
      const u = (n - 1) * (mean - (jack[i] as number))
      s2 += u * u
      s3 += u * u * u
    }
    cubes += s3 / n ** 3
    squares += s2 / n ** 2
  }
  if (!(squares > 0)) return 0
  return cubes / (6 * squares ** 1.5)
}

/** Builds the distribution: drops non-finite replicates, sorts, and finds z0 (ties count half). */
function finish(estimate: number, raw: Float64Array, acceleration: number, resamples: number, seed: number): BootstrapDistribution {
  const finite = raw.filter((v) => Number.isFinite(v)).sort()
  let below = 0
  let equal = 0
  for (const v of finite) {
    if (v < estimate) below++
    else if (v === estimate) equal++
  }
  const b = finite.length
  // Kept off 0 and 1 so z0 stays finite when every replicate lies on one side.
  const share = b === 0 ? 0.5 : Math.min(1 - 0.5 / b, Math.max(0.5 / b, (below + 0.5 * equal) / b))
  return {
    estimate,
    replicates: finite,
    z0: normalQuantile(share),
    acceleration: Number.isFinite(acceleration) ? acceleration : 0,
    resamples,
    seed,
    dropped: resamples - b,
  }
}

/** The replicate at lower-tail probability `alpha`: rank ⌈αB⌉ from below, or ⌈(1 − α)B⌉ from above (symmetric). */
function replicateAt(sorted: Float64Array, alpha: number): number {
  const b = sorted.length
  if (b === 0) return Number.NaN
  if (alpha <= 0.5) {
    const rank = Math.max(1, Math.ceil(alpha * b - 1e-9))
    return sorted[Math.min(b, rank) - 1] as number
  }
  const rankFromTop = Math.max(1, Math.ceil((1 - alpha) * b - 1e-9))
  return sorted[b - Math.min(b, rankFromTop)] as number
}

/**
 * The percentile interval: the replicates at (1 − c)/2 and (1 + c)/2 (with `expandForN`, at the
 * tails of Hesterberg's expanded percentile interval).
 */
export function percentileInterval(dist: BootstrapDistribution, confidence: number, options: BcaOptions = {}): BootstrapInterval {
  requireConfidence('percentileInterval', confidence)
  const tail = normalCdf(-tailQuantile(confidence, options.expandForN))
  return {
    estimate: dist.estimate,
    low: replicateAt(dist.replicates, tail),
    high: replicateAt(dist.replicates, 1 - tail),
    confidence,
    method: 'percentile',
  }
}

/** Options of a BCa interval. */
export interface BcaOptions {
  /**
   * Expand for a small sample of this many observations (Hesterberg 2015, "expanded
   * percentile"): use z = √(n/(n−1))·t_{n−1} in place of the normal quantile, which restores the
   * coverage the bootstrap loses below ~30 observations by treating the sample sd as known.
   * Omit for no expansion.
   */
  expandForN?: number
}

/** z of a two-sided interval, or its expanded version √(n/(n−1))·t_{n−1} for a sample of n. */
function tailQuantile(confidence: number, n: number | undefined): number {
  const upper = 1 - (1 - confidence) / 2
  return n !== undefined && n >= 2 ? Math.sqrt(n / (n - 1)) * studentTQuantile(upper, n - 1) : normalQuantile(upper)
}

/**
 * The BCa interval (Efron 1987): the replicates at α₁,₂ = Φ(z0 + (z0 + z)/(1 − a(z0 + z))) for
 * z = ∓z_{(1+c)/2}. Second-order accurate; respects any monotone transformation.
 * @example bcaInterval(bootstrapMeanLogRatio(c, b, { seed: 1 }), 0.95)
 */
export function bcaInterval(dist: BootstrapDistribution, confidence: number, options: BcaOptions = {}): BootstrapInterval {
  requireConfidence('bcaInterval', confidence)
  const z = tailQuantile(confidence, options.expandForN)
  const { z0, acceleration: a } = dist
  const adjusted = (zq: number): number => {
    const denominator = 1 - a * (z0 + zq)
    // Past the pole the BCa map is undefined: the bound runs to the end of the replicates.
    if (!(denominator > 0)) return zq < 0 ? 0 : 1
    return normalCdf(z0 + (z0 + zq) / denominator)
  }
  return {
    estimate: dist.estimate,
    low: replicateAt(dist.replicates, adjusted(-z)),
    high: replicateAt(dist.replicates, adjusted(z)),
    confidence,
    method: 'bca',
  }
}

/**
 * Draws resampling indices with mulberry32, the PRNG of src/random.ts (the same sequence as
 * `createRandom(seed)`), a whole resample per call with the state in a local rather than a
 * closure call per draw, which is slower: the gates draw millions of indices per decision
 * (docs/gates.md, "Statistics").
 */
export class Resampler {
  private state: number

  constructor(seed: number) {
    this.state = seed | 0
  }

  /** Fills `out` with indices uniform in [0, n). */
  draw(out: Int32Array, n: number): void {
    let s = this.state
    for (let i = 0; i < out.length; i++) {
      s = (s + 0x6d2b79f5) | 0
      let t = s
      t = Math.imul(t ^ (t >>> 15), t | 1)
      t ^= (t + Math.imul(t ^ (t >>> 7), t | 61)) | 0
      // Truncation by | 0 is floor here: the product is in [0, n) with n < 2^31.
      out[i] = ((((t ^ (t >>> 14)) >>> 0) / 4_294_967_296) * n) | 0
    }
    this.state = s
  }
}

function drawCounts(counts: Int32Array, resampler: Resampler, indices: Int32Array): void {
  counts.fill(0)
  resampler.draw(indices, counts.length)
  for (let i = 0; i < indices.length; i++) counts[indices[i] as number]! += 1
}

/**
 * Bootstraps any statistic of one sample: resamples of the same size, drawn with replacement,
 * then BCa's acceleration from the leave-one-out jackknife.
 * @example bootstrapStatistic(values, (s) => mean(s), { seed: 1 })
 */
export function bootstrapStatistic(
  values: readonly number[],
  statistic: (sample: Float64Array) => number,
  options: BootstrapOptions,
): BootstrapDistribution {
  const resamples = resolveResamples(options)
  const n = values.length
  if (n < 2) throw new RangeError(`bootstrapStatistic: needs at least 2 values, got ${n}`)
  const data = Float64Array.from(values)
  const resampler = new Resampler(options.seed)
  const indices = new Int32Array(n)
  const sample = new Float64Array(n)
  const raw = new Float64Array(resamples)
  for (let r = 0; r < resamples; r++) {
    resampler.draw(indices, n)
    for (let i = 0; i < n; i++) sample[i] = data[indices[i] as number] as number
    raw[r] = statistic(sample)
  }
  const jack = new Float64Array(n)
  const without = new Float64Array(n - 1)
  for (let j = 0; j < n; j++) {
    for (let i = 0, k = 0; i < n; i++) if (i !== j) without[k++] = data[i] as number
    jack[j] = statistic(without)
  }
  return finish(statistic(data), raw, jackknifeAcceleration(jack), resamples, options.seed)
}

/**
 * Bootstraps any statistic of paired samples: pairs (x[i], y[i]) are resampled together, so the
 * pairing (the same prompt on both arms) carries into every replicate.
 */
export function bootstrapPairedStatistic(
  x: readonly number[],
  y: readonly number[],
  statistic: (x: Float64Array, y: Float64Array) => number,
  options: BootstrapOptions,
): BootstrapDistribution {
  const resamples = resolveResamples(options)
  const n = x.length
  if (y.length !== n) throw new RangeError(`bootstrapPairedStatistic: x and y must have the same length, got ${n} and ${y.length}`)
  if (n < 2) throw new RangeError(`bootstrapPairedStatistic: needs at least 2 pairs, got ${n}`)
  const dx = Float64Array.from(x)
  const dy = Float64Array.from(y)
  const resampler = new Resampler(options.seed)
  const indices = new Int32Array(n)
  const sx = new Float64Array(n)
  const sy = new Float64Array(n)
  const raw = new Float64Array(resamples)
  for (let r = 0; r < resamples; r++) {
    resampler.draw(indices, n)
    for (let i = 0; i < n; i++) {
      const k = indices[i] as number
      sx[i] = dx[k] as number
      sy[i] = dy[k] as number
    }
    raw[r] = statistic(sx, sy)
  }
  const jack = new Float64Array(n)
  const wx = new Float64Array(n - 1)
  const wy = new Float64Array(n - 1)
  for (let j = 0; j < n; j++) {
    for (let i = 0, k = 0; i < n; i++) {
      if (i === j) continue
      wx[k] = dx[i] as number
      wy[k++] = dy[i] as number
    }
    jack[j] = statistic(wx, wy)
  }
  return finish(statistic(dx, dy), raw, jackknifeAcceleration(jack), resamples, options.seed)
}

/**
 * The mean of paired log-ratios ln(candidate[i] / baseline[i]): exp of it is the geometric mean
 * ratio candidate/baseline, the effect of the rate gates. On the log scale; values must be > 0.
 * @example Math.exp(bootstrapMeanLogRatio([110, 220], [100, 200], { seed: 1 }).estimate) // 1.1
 */
export function bootstrapMeanLogRatio(
  candidate: readonly number[],
  baseline: readonly number[],
  options: BootstrapOptions,
): BootstrapDistribution {
  const n = candidate.length
  if (baseline.length !== n) throw new RangeError(`bootstrapMeanLogRatio: arms must have the same length, got ${n} and ${baseline.length}`)
  const d = new Float64Array(n)
  for (let i = 0; i < n; i++) {
    const c = candidate[i] as number
    const b = baseline[i] as number
    if (!(c > 0 && b > 0)) throw new RangeError(`bootstrapMeanLogRatio: values must be positive, got ${c} and ${b} at ${i}`)
    d[i] = Math.log(c / b)
  }
  return bootstrapMeanOf(d, options)
}

/** The bootstrap of a plain mean, with the jackknife in closed form (θ₍ⱼ₎ = (S − xⱼ)/(n − 1)). */
export function bootstrapMeanOf(values: ArrayLike<number>, options: BootstrapOptions): BootstrapDistribution {
  const resamples = resolveResamples(options)
  const n = values.length
  if (n < 2) throw new RangeError(`bootstrapMeanOf: needs at least 2 values, got ${n}`)
  const data = Float64Array.from(values as ArrayLike<number>)
  let sum = 0
  for (const v of data) sum += v
  const resampler = new Resampler(options.seed)
  const indices = new Int32Array(n)
  const raw = new Float64Array(resamples)
  for (let r = 0; r < resamples; r++) {
    resampler.draw(indices, n)
    let s = 0
    for (let i = 0; i < n; i++) s += data[indices[i] as number] as number
    raw[r] = s / n
  }
  const jack = new Float64Array(n)
  for (let j = 0; j < n; j++) jack[j] = (sum - (data[j] as number)) / (n - 1)
  return finish(sum / n, raw, jackknifeAcceleration(jack), resamples, options.seed)
}

/**
 * The ratio of means of two independent samples, on the log scale: ln(mean(candidate) /
 * mean(baseline)), each sample resampled on its own; two-sample jackknife acceleration.
 */
export function bootstrapRatioOfMeans(
  candidate: readonly number[],
  baseline: readonly number[],
  options: BootstrapOptions,
): BootstrapDistribution {
  const resamples = resolveResamples(options)
  const nc = candidate.length
  const nb = baseline.length
  if (nc < 2 || nb < 2) throw new RangeError(`bootstrapRatioOfMeans: needs at least 2 values per sample, got ${nc} and ${nb}`)
  const c = Float64Array.from(candidate)
  const b = Float64Array.from(baseline)
  const sumC = c.reduce((s, v) => s + v, 0)
  const sumB = b.reduce((s, v) => s + v, 0)
  const resampler = new Resampler(options.seed)
  const ic = new Int32Array(nc)
  const ib = new Int32Array(nb)
  const raw = new Float64Array(resamples)
  for (let r = 0; r < resamples; r++) {
    resampler.draw(ic, nc)
    let sc = 0
    for (let i = 0; i < nc; i++) sc += c[ic[i] as number] as number
    resampler.draw(ib, nb)
    let sb = 0
    for (let i = 0; i < nb; i++) sb += b[ib[i] as number] as number
    raw[r] = Math.log(sc / nc / (sb / nb))
  }
  const meanB = sumB / nb
  const meanC = sumC / nc
  const jackC = c.map((v) => Math.log((sumC - v) / (nc - 1) / meanB))
  const jackB = b.map((v) => Math.log(meanC / ((sumB - v) / (nb - 1))))
  return finish(Math.log(meanC / meanB), raw, jackknifeAcceleration(jackC, jackB), resamples, options.seed)
}

/**
 * A sample of clusters (a request's ITL gaps) pooled and sorted once, so the nearest-rank
 * percentile of any resample of clusters is a walk over counts, not a sort.
 */
interface PooledClusters {
  sorted: Float64Array
  clusterOf: Int32Array
  sizes: Int32Array
  total: number
}

function pool(clusters: readonly (readonly number[])[]): PooledClusters {
  const sizes = Int32Array.from(clusters, (c) => c.length)
  const total = sizes.reduce((s, v) => s + v, 0)
  const pairs: Array<[number, number]> = []
  clusters.forEach((cluster, id) => {
    for (const v of cluster) pairs.push([v, id])
  })
  pairs.sort((x, y) => x[0] - y[0])
  return {
    sorted: Float64Array.from(pairs, (p) => p[0]),
    clusterOf: Int32Array.from(pairs, (p) => p[1]),
    sizes,
    total,
  }
}

/**
 * The nearest-rank p-th percentile of the pooled values when cluster c is taken counts[c]
 * times (counts[c] = 0 leaves it out); walks from whichever end is nearer the rank.
 */
function weightedPercentile(pooled: PooledClusters, counts: Int32Array, p: number): number {
  let weight = 0
  for (let c = 0; c < counts.length; c++) weight += (counts[c] as number) * (pooled.sizes[c] as number)
  if (weight === 0) return Number.NaN
  const rank = nearestRankPosition(weight, p)
  const { sorted, clusterOf } = pooled
  if (rank <= weight / 2) {
    let cumulative = 0
    for (let i = 0; i < sorted.length; i++) {
      cumulative += counts[clusterOf[i] as number] as number
      if (cumulative >= rank) return sorted[i] as number
    }
  } else {
    const fromTop = weight - rank + 1
    let cumulative = 0
    for (let i = sorted.length - 1; i >= 0; i--) {
      cumulative += counts[clusterOf[i] as number] as number
      if (cumulative >= fromTop) return sorted[i] as number
    }
  }
  return Number.NaN
}

function asClusters(values: readonly number[] | readonly (readonly number[])[]): readonly (readonly number[])[] {
  return values.map((v) => (typeof v === 'number' ? [v] : v))
}

/** Options of the percentile bootstraps. */
export interface PercentileBootstrapOptions extends BootstrapOptions {
  /** Percentile in (0, 100], nearest-rank. */
  p: number
}

function requirePercentile(fn: string, p: number): void {
  if (!(p > 0 && p <= 100)) throw new RangeError(`${fn}: p must be in (0, 100], got ${p}`)
}

/**
 * The nearest-rank percentile of one sample, on the log scale (ln of the percentile).
 * Values may be clusters (each request's ITL gaps): whole clusters are resampled and the
 * percentile is over the pooled values.
 */
export function bootstrapPercentile(
  values: readonly number[] | readonly (readonly number[])[],
  options: PercentileBootstrapOptions,
): BootstrapDistribution {
  requirePercentile('bootstrapPercentile', options.p)
  const resamples = resolveResamples(options)
  const clusters = asClusters(values)
  const n = clusters.length
  if (n < 2) throw new RangeError(`bootstrapPercentile: needs at least 2 values, got ${n}`)
  const pooled = pool(clusters)
  const counts = new Int32Array(n)
  const indices = new Int32Array(n)
  const resampler = new Resampler(options.seed)
  const raw = new Float64Array(resamples)
  for (let r = 0; r < resamples; r++) {
    drawCounts(counts, resampler, indices)
    raw[r] = Math.log(weightedPercentile(pooled, counts, options.p))
  }
  counts.fill(1)
  const estimate = Math.log(weightedPercentile(pooled, counts, options.p))
  const jack = new Float64Array(n)
  for (let j = 0; j < n; j++) {
    counts[j] = 0
    jack[j] = Math.log(weightedPercentile(pooled, counts, options.p))
    counts[j] = 1
  }
  return finish(estimate, raw, jackknifeAcceleration(jack.filter(Number.isFinite)), resamples, options.seed)
}

/** Options of the two-arm percentile bootstrap. */
export interface PercentileRatioOptions extends PercentileBootstrapOptions {
  /**
   * Resample pairs: candidate[i] and baseline[i] are the same prompt and are drawn together
   * (the arms must have the same length). Otherwise each arm is resampled on its own.
   */
  paired: boolean
}

/**
 * The ratio of nearest-rank percentiles candidate/baseline, on the log scale. Values may be
 * clusters (ITL gaps per request). Paired: pairs are resampled together and the jackknife
 * leaves out one pair; independent: each arm on its own, two-sample jackknife acceleration.
 * @example Math.exp(bootstrapRatioOfPercentiles(c, b, { p: 95, paired: true, seed: 1 }).estimate)
 */
export function bootstrapRatioOfPercentiles(
  candidate: readonly number[] | readonly (readonly number[])[],
  baseline: readonly number[] | readonly (readonly number[])[],
  options: PercentileRatioOptions,
): BootstrapDistribution {
  requirePercentile('bootstrapRatioOfPercentiles', options.p)
  const resamples = resolveResamples(options)
  const cc = asClusters(candidate)
  const bc = asClusters(baseline)
  const nc = cc.length
  const nb = bc.length
  if (nc < 2 || nb < 2) throw new RangeError(`bootstrapRatioOfPercentiles: needs at least 2 values per arm, got ${nc} and ${nb}`)
  if (options.paired && nc !== nb) {
    throw new RangeError(`bootstrapRatioOfPercentiles: paired arms must have the same length, got ${nc} and ${nb}`)
  }
  const pc = pool(cc)
  const pb = pool(bc)
  const { p } = options
  const countsC = new Int32Array(nc)
  const countsB = options.paired ? countsC : new Int32Array(nb)
  const resampler = new Resampler(options.seed)
  const indicesC = new Int32Array(nc)
  const indicesB = new Int32Array(nb)
  const raw = new Float64Array(resamples)
  for (let r = 0; r < resamples; r++) {
    drawCounts(countsC, resampler, indicesC)
    if (!options.paired) drawCounts(countsB, resampler, indicesB)
    raw[r] = Math.log(weightedPercentile(pc, countsC, p) / weightedPercentile(pb, countsB, p))
  }
  countsC.fill(1)
  countsB.fill(1)
  const fullC = weightedPercentile(pc, countsC, p)
  const fullB = weightedPercentile(pb, countsB, p)
  const estimate = Math.log(fullC / fullB)
  let acceleration: number
  if (options.paired) {
    const jack = new Float64Array(nc)
    for (let j = 0; j < nc; j++) {
      countsC[j] = 0
      jack[j] = Math.log(weightedPercentile(pc, countsC, p) / weightedPercentile(pb, countsC, p))
      countsC[j] = 1
    }
    acceleration = jackknifeAcceleration(jack.filter(Number.isFinite))
  } else {
    const jackC = new Float64Array(nc)
    for (let j = 0; j < nc; j++) {
      countsC[j] = 0
      jackC[j] = Math.log(weightedPercentile(pc, countsC, p) / fullB)
      countsC[j] = 1
    }
    const jackB = new Float64Array(nb)
    for (let j = 0; j < nb; j++) {
      countsB[j] = 0
      jackB[j] = Math.log(fullC / weightedPercentile(pb, countsB, p))
      countsB[j] = 1
    }
    acceleration = jackknifeAcceleration(jackC.filter(Number.isFinite), jackB.filter(Number.isFinite))
  }
  return finish(estimate, raw, acceleration, resamples, options.seed)
}
