/** z of a two-sided 95% normal interval, to full double precision (Φ⁻¹(0.975)). */
export const Z95_EXACT = 1.959963984540054

/**
 * The Wilson score interval for a binomial proportion: the set of p that a two-sided score
 * test at `z` does not reject. Unlike the Wald interval it stays inside [0, 1] and keeps its
 * coverage near 0 and 1, which matters for accuracy on small question sets.
 * @param successes correct answers (an integer in [0, n])
 * @param n questions
 * @param z the normal quantile; @default 1.959963984540054 (95%)
 * @returns the bounds as proportions in [0, 1]; both null when n = 0
 * @example wilsonInterval(81, 263) // { low: 0.2553…, high: 0.3662… } (Newcombe 1998)
 */
export function wilsonInterval(successes: number, n: number, z: number = Z95_EXACT): { low: number | null; high: number | null } {
  if (!Number.isInteger(n) || n < 0) throw new RangeError(`wilsonInterval: n must be a non-negative integer, got ${n}`)
  if (!Number.isInteger(successes) || successes < 0 || successes > n) {
    throw new RangeError(`wilsonInterval: successes must be an integer in [0, ${n}], got ${successes}`)
  }
  if (!(z > 0 && Number.isFinite(z))) throw new RangeError(`wilsonInterval: z must be a positive number, got ${z}`)
  if (n === 0) return { low: null, high: null }
  const p = successes / n
  const z2 = z * z
  const denominator = 1 + z2 / n
  const center = (p + z2 / (2 * n)) / denominator
  const half = (z / denominator) * Math.sqrt((p * (1 - p)) / n + z2 / (4 * n * n))
  // At 0 and n the bound is exactly 0 or 1; the closed form only gets there up to rounding.
  return {
    low: successes === 0 ? 0 : Math.max(0, center - half),
    high: successes === n ? 1 : Math.min(1, center + half),
  }
}
