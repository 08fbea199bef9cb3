import { normalCdf, normalPdf, normalQuantile } from './distributions.ts'

/**
 * Lan–DeMets alpha-spending functions: how much of a one-sided α may be spent by information
 * fraction t ∈ (0, 1].
 * - `pocock`: α·ln(1 + (e − 1)t), nearly flat boundaries. servegate's default: a gate stops at
 *   the first look a large effect is plain (≤ 32 requests for a 10% win), and every look's
 *   nominal level stays within what a 2000-replicate bootstrap can resolve (~1/2000).
 * - `obrien-fleming`: 2 − 2Φ(z_{α/2}/√t), which spends almost nothing early (about 3e-13 at
 *   t = ⅛ for α = 1%): early looks then never decide, and their levels lie far beyond the
 *   bootstrap's resolution.
 */
export type SpendingFunction = 'pocock' | 'obrien-fleming'

/**
 * The one-sided α spent by information fraction t.
 * @example spentAlpha('pocock', 0.025, 1) // 0.025
 */
export function spentAlpha(spending: SpendingFunction, alpha: number, t: number): number {
  if (!(alpha > 0 && alpha < 1)) throw new RangeError(`spentAlpha: alpha must be in (0, 1), got ${alpha}`)
  if (!(t >= 0)) throw new RangeError(`spentAlpha: t must be ≥ 0, got ${t}`)
  if (t === 0) return 0
  const s = Math.min(1, t)
  if (spending === 'pocock') return alpha * Math.log(1 + (Math.E - 1) * s)
  return 2 - 2 * normalCdf(normalQuantile(1 - alpha / 2) / Math.sqrt(s))
}

/** One look of a group-sequential design. */
export interface SequentialLook {
  /** Information fraction at this look, in (0, 1]. */
  informationFraction: number
  /** The one-sided z boundary: stop when the standardized statistic exceeds it. Infinity: no stop here. */
  z: number
  /** α spent by this look, cumulative. */
  cumulativeAlpha: number
  /** The one-sided nominal level 1 − Φ(z) of this look's own test. */
  nominalAlpha: number
}

const GRID_POINTS = 201
const GRID_SDS = 8

interface Grid {
  /** Points on the score scale S = Z·√t. */
  s: Float64Array
  /** Simpson weights times the sub-density of S over the continuation region. */
  wg: Float64Array
}

function simpsonWeights(n: number, h: number): Float64Array {
  const w = new Float64Array(n)
  for (let i = 0; i < n; i++) w[i] = (h / 3) * (i === 0 || i === n - 1 ? 1 : i % 2 === 1 ? 4 : 2)
  return w
}

/** Grid on [−8√t, upper] with the density values given by `density`, premultiplied by Simpson weights. */
function grid(t: number, upper: number, density: (s: number) => number): Grid {
  const lower = -GRID_SDS * Math.sqrt(t)
  const n = GRID_POINTS
  const h = (upper - lower) / (n - 1)
  const w = simpsonWeights(n, h)
  const s = new Float64Array(n)
  const wg = new Float64Array(n)
  for (let i = 0; i < n; i++) {
    s[i] = lower + i * h
    wg[i] = (w[i] as number) * density(s[i] as number)
  }
  return { s, wg }
}

/** P(continue to the previous look, then S_k > boundary) given the previous look's grid. */
function crossing(previous: Grid, boundary: number, delta: number): number {
  const sd = Math.sqrt(delta)
  let total = 0
  for (let i = 0; i < previous.s.length; i++) {
    total += (previous.wg[i] as number) * normalCdf(((previous.s[i] as number) - boundary) / sd)
  }
  return total
}

const cache = new Map<string, SequentialLook[]>()

/**
 * The one-sided efficacy boundaries of a group-sequential design with α spent by a Lan–DeMets
 * function (Lan & DeMets 1983), by the Armitage–McPherson–Rowe recursion: the sub-density of
 * the score statistic S_k = Z_k√t_k over the region where no earlier look stopped is carried
 * forward by numerical integration (Simpson, 201 points: the published boundaries agree to 4 decimals; Jennison & Turnbull 2000, ch. 19),
 * and
 * each boundary solves P(first crossing at look k) = α(t_k) − α(t_{k−1}) by bisection.
 * The statistic is assumed to have the canonical joint distribution (independent increments),
 * corr(Z_j, Z_k) = √(t_j/t_k) — true of a mean over nested samples.
 * @param informationFractions increasing, in (0, 1]; the last is usually 1
 * @param alpha one-sided α to spend in all
 * @example groupSequentialBoundaries([0.2, 0.4, 0.6, 0.8, 1], 0.025, 'obrien-fleming').map((l) => l.z)
 * // ≈ [4.877, 3.357, 2.680, 2.290, 2.031]
 */
export function groupSequentialBoundaries(
  informationFractions: readonly number[],
  alpha: number,
  spending: SpendingFunction = 'pocock',
): SequentialLook[] {
  if (informationFractions.length === 0) throw new RangeError('groupSequentialBoundaries: no looks')
  let previousT = 0
  for (const t of informationFractions) {
    if (!(t > previousT && t <= 1))
      throw new RangeError(
        `groupSequentialBoundaries: information fractions must increase within (0, 1], got ${informationFractions.join(', ')}`,
      )
    previousT = t
  }
  const key = `${spending}|${alpha}|${informationFractions.join(',')}`
  const cached = cache.get(key)
  if (cached !== undefined) return cached.map((l) => ({ ...l }))

  const looks: SequentialLook[] = []
  let spentBefore = 0
  let previous: Grid | null = null
  let tPrevious = 0
  for (const t of informationFractions) {
    const spent = spentAlpha(spending, alpha, t)
    const increment = spent - spentBefore
    let z: number
    if (previous === null) {
      z = increment > 0 ? normalQuantile(1 - increment) : Number.POSITIVE_INFINITY
    } else if (!(increment > 1e-15)) {
      z = Number.POSITIVE_INFINITY
    } else {
      const delta = t - tPrevious
      const sqrtT = Math.sqrt(t)
      let low = -10
      let high = 40
      for (let i = 0; i < 100 && high - low > 1e-10; i++) {
        const mid = (low + high) / 2
        if (crossing(previous, mid * sqrtT, delta) > increment) low = mid
        else high = mid
      }
      z = (low + high) / 2
    }
    looks.push({ informationFraction: t, z, cumulativeAlpha: spent, nominalAlpha: normalCdf(-z) })

    // Carry the sub-density of S_t over the continuation region {S_t < z√t} to the next look.
    const upper = Number.isFinite(z) ? z * Math.sqrt(t) : GRID_SDS * Math.sqrt(t)
    if (previous === null) {
      const sd = Math.sqrt(t)
      previous = grid(t, upper, (s) => normalPdf(s / sd) / sd)
    } else {
      const from: Grid = previous
      const sd = Math.sqrt(t - tPrevious)
      previous = grid(t, upper, (s) => {
        let total = 0
        for (let i = 0; i < from.s.length; i++) total += (from.wg[i] as number) * normalPdf((s - (from.s[i] as number)) / sd)
        return total / sd
      })
    }
    tPrevious = t
    spentBefore = spent
  }
  if (cache.size >= 5000) cache.clear()
  cache.set(key, looks)
  return looks.map((l) => ({ ...l }))
}

/**
 * The two-sided confidence of an interval whose each side is a look's one-sided boundary z:
 * 1 − 2(1 − Φ(z)). Infinity gives 1 − 1e-15 (no decision possible at that look).
 */
export function lookConfidence(z: number): number {
  return Math.min(1 - 1e-15, 1 - 2 * normalCdf(-z))
}
