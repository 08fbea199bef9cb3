/**
 * The distribution functions the gates need, accurate to about 1e-12 (relative) in the ranges
 * the gates use: normal CDF and quantile, log-gamma, the regularized incomplete beta and its
 * inverse, Student t CDF and quantile (any real df > 0), and the exact binomial CDF.
 * simple-statistics has none of these at this accuracy, and no t distribution at all.
 */

const SQRT2 = Math.SQRT2
const SQRT_PI = Math.sqrt(Math.PI)
const EPS = 1e-16
const TINY = 1e-300

function requireFinite(name: string, fn: string, value: number): void {
  if (!Number.isFinite(value)) throw new RangeError(`${fn}: ${name} must be a finite number, got ${value}`)
}

function requireProbability(fn: string, p: number): void {
  if (!(p >= 0 && p <= 1)) throw new RangeError(`${fn}: p must be in [0, 1], got ${p}`)
}

/**
 * erfc(x) for x ≥ 0: the all-positive series e^{−x²}·Σ 2ⁿx^{2n+1}/(1·3…(2n+1)) for erf below 2
 * (no cancellation), the Laplace continued fraction above (no loss in the far tail).
 */
function erfcNonNegative(x: number): number {
  if (x < 2) {
    let term = x
    let sum = x
    for (let n = 0; n < 500; n++) {
      term *= (2 * x * x) / (2 * n + 3)
      sum += term
      if (term < sum * EPS) break
    }
    return 1 - (2 / SQRT_PI) * Math.exp(-x * x) * sum
  }
  // erfc(x) = e^{−x²}/√π · 1/(x + (1/2)/(x + 1/(x + (3/2)/(x + …)))), by the modified Lentz method.
  let f = x
  let c = x
  let d = 0
  for (let n = 1; n < 500; n++) {
    const a = n / 2
    d = x + a * d
    d = Math.abs(d) < TINY ? TINY : d
    c = x + a / c
    c = Math.abs(c) < TINY ? TINY : c
    d = 1 / d
    const delta = c * d
    f *= delta
    if (Math.abs(delta - 1) < EPS) break
  }
  return Math.exp(-x * x) / (SQRT_PI * f)
}

/** The complementary error function erfc(x) = 1 − erf(x), with about 1e-14 relative accuracy in the upper tail. */
export function erfc(x: number): number {
  if (Number.isNaN(x)) return Number.NaN
  return x >= 0 ? erfcNonNegative(x) : 2 - erfcNonNegative(-x)
}

/**
 * The standard normal CDF Φ(x), accurate to about 1e-13 relative in both tails (1e-15 for |x| < 8).
 * @example normalCdf(-1.96) // 0.024997895148220435
 */
export function normalCdf(x: number): number {
  if (Number.isNaN(x)) return Number.NaN
  if (x === Number.POSITIVE_INFINITY) return 1
  if (x === Number.NEGATIVE_INFINITY) return 0
  return x < 0 ? 0.5 * erfcNonNegative(-x / SQRT2) : 1 - 0.5 * erfcNonNegative(x / SQRT2)
}

/** The standard normal density φ(x). */
export function normalPdf(x: number): number {
  return Math.exp(-0.5 * x * x) / Math.sqrt(2 * Math.PI)
}

// Acklam's rational approximation (relative error 1.15e-9), refined below by Halley's method.
const A = [-3.969683028665376e1, 2.209460984245205e2, -2.759285104469687e2, 1.38357751867269e2, -3.066479806614716e1, 2.506628277459239]
const B = [-5.447609879822406e1, 1.615858368580409e2, -1.556989798598866e2, 6.680131188771972e1, -1.328068155288572e1]
const C = [-7.784894002430293e-3, -3.223964580411365e-1, -2.400758277161838, -2.549732539343734, 4.374664141464968, 2.938163982698783]
const D = [7.784695709041462e-3, 3.224671290700398e-1, 2.445134137142996, 3.754408661907416]
const P_LOW = 0.02425

function acklam(p: number): number {
  const [a0, a1, a2, a3, a4, a5] = A as [number, number, number, number, number, number]
  const [b0, b1, b2, b3, b4] = B as [number, number, number, number, number]
  const [c0, c1, c2, c3, c4, c5] = C as [number, number, number, number, number, number]
  const [d0, d1, d2, d3] = D as [number, number, number, number]
  if (p < P_LOW) {
    const q = Math.sqrt(-2 * Math.log(p))
    return (((((c0 * q + c1) * q + c2) * q + c3) * q + c4) * q + c5) / ((((d0 * q + d1) * q + d2) * q + d3) * q + 1)
  }
  if (p > 1 - P_LOW) {
    const q = Math.sqrt(-2 * Math.log1p(-p))
    return -(((((c0 * q + c1) * q + c2) * q + c3) * q + c4) * q + c5) / ((((d0 * q + d1) * q + d2) * q + d3) * q + 1)
  }
  const q = p - 0.5
  const r = q * q
  return ((((((a0 * r + a1) * r + a2) * r + a3) * r + a4) * r + a5) * q) / (((((b0 * r + b1) * r + b2) * r + b3) * r + b4) * r + 1)
}

/**
 * The standard normal quantile Φ⁻¹(p): Acklam's approximation refined by two Halley steps on
 * the accurate CDF (error below 1e-14 relative for p in [1e-300, 1 − 1e-16]).
 * @example normalQuantile(0.975) // 1.959963984540054
 */
export function normalQuantile(p: number): number {
  requireProbability('normalQuantile', p)
  if (p === 0) return Number.NEGATIVE_INFINITY
  if (p === 1) return Number.POSITIVE_INFINITY
  let x = acklam(p)
  for (let i = 0; i < 2; i++) {
    // Work on the smaller tail so the residual keeps its relative precision.
    // Φ(x) − p; above the median as (1 − p) − Φ(−x), exact by Sterbenz for p ≥ ½.
    const e = x < 0 ? normalCdf(x) - p : 1 - p - normalCdf(-x)
    const u = e * Math.sqrt(2 * Math.PI) * Math.exp(0.5 * x * x)
    x -= u / (1 + 0.5 * x * u)
  }
  return x
}

const LANCZOS = [
  0.99999999999980993, 676.5203681218851, -1259.1392167224028, 771.32342877765313, -176.61502916214059, 12.507343278686905,
  -0.13857109526572012, 9.9843695780195716e-6, 1.5056327351493116e-7,
]

/**
 * ln Γ(x) for x > 0 (Lanczos, g = 7, n = 9; reflection below ½), about 1e-15 relative.
 * @example logGamma(10) // 12.801827480081469 (ln 9!)
 */
export function logGamma(x: number): number {
  if (!(x > 0)) throw new RangeError(`logGamma: x must be positive, got ${x}`)
  if (x < 0.5) return Math.log(Math.PI / Math.sin(Math.PI * x)) - logGamma(1 - x)
  const z = x - 1
  let sum = LANCZOS[0] as number
  for (let i = 1; i < LANCZOS.length; i++) sum += (LANCZOS[i] as number) / (z + i)
  const t = z + 7.5
  return 0.5 * Math.log(2 * Math.PI) + (z + 0.5) * Math.log(t) - t + Math.log(sum)
}

/** ln B(a, b). */
function logBeta(a: number, b: number): number {
  return logGamma(a) + logGamma(b) - logGamma(a + b)
}

/** The continued fraction of I_x(a, b) (Numerical Recipes `betacf`, modified Lentz), for x < (a+1)/(a+b+2). */
function betaContinuedFraction(x: number, a: number, b: number): number {
  const qab = a + b
  const qap = a + 1
  const qam = a - 1
  let c = 1
  let d = 1 - (qab * x) / qap
  d = Math.abs(d) < TINY ? TINY : d
  d = 1 / d
  let h = d
  for (let m = 1; m < 100_000; m++) {
    const m2 = 2 * m
    let aa = (m * (b - m) * x) / ((qam + m2) * (a + m2))
    d = 1 + aa * d
    d = Math.abs(d) < TINY ? TINY : d
    c = 1 + aa / c
    c = Math.abs(c) < TINY ? TINY : c
    d = 1 / d
    h *= d * c
    aa = (-(a + m) * (qab + m) * x) / ((a + m2) * (qap + m2))
    d = 1 + aa * d
    d = Math.abs(d) < TINY ? TINY : d
    c = 1 + aa / c
    c = Math.abs(c) < TINY ? TINY : c
    d = 1 / d
    const delta = d * c
    h *= delta
    if (Math.abs(delta - 1) < 1e-15) return h
  }
  return h
}

/**
 * I_x(a, b) given x and y = 1 − x separately, so callers that know 1 − x exactly (the t CDF)
 * lose nothing to the subtraction.
 */
function betaIncomplete(x: number, y: number, a: number, b: number): number {
  if (x <= 0) return 0
  if (y <= 0) return 1
  const logFront = a * Math.log(x) + b * Math.log(y) - logBeta(a, b)
  if (x < (a + 1) / (a + b + 2)) return (Math.exp(logFront) * betaContinuedFraction(x, a, b)) / a
  return 1 - (Math.exp(logFront) * betaContinuedFraction(y, b, a)) / b
}

/**
 * The regularized incomplete beta function I_x(a, b) = P(X ≤ x) for X ~ Beta(a, b), by its
 * continued fraction on whichever side converges.
 * @example regularizedIncompleteBeta(0.4, 2, 3) // 0.5248
 */
export function regularizedIncompleteBeta(x: number, a: number, b: number): number {
  if (!(a > 0 && b > 0)) throw new RangeError(`regularizedIncompleteBeta: a and b must be positive, got ${a}, ${b}`)
  if (!(x >= 0 && x <= 1)) throw new RangeError(`regularizedIncompleteBeta: x must be in [0, 1], got ${x}`)
  return betaIncomplete(x, 1 - x, a, b)
}

/**
 * The Beta(a, b) quantile: the x with I_x(a, b) = p, by Newton steps safeguarded by bisection
 * (relative error below 1e-13).
 */
export function betaQuantile(p: number, a: number, b: number): number {
  requireProbability('betaQuantile', p)
  if (!(a > 0 && b > 0)) throw new RangeError(`betaQuantile: a and b must be positive, got ${a}, ${b}`)
  if (p === 0) return 0
  if (p === 1) return 1
  let low = 0
  let high = 1
  let x = a / (a + b)
  const logB = logBeta(a, b)
  for (let i = 0; i < 300; i++) {
    const f = betaIncomplete(x, 1 - x, a, b) - p
    if (f < 0) low = x
    else high = x
    const density = Math.exp((a - 1) * Math.log(x) + (b - 1) * Math.log1p(-x) - logB)
    let next = x - f / density
    if (!(next > low && next < high) || !Number.isFinite(next)) next = (low + high) / 2
    if (Math.abs(next - x) <= 1e-15 * Math.max(x, 1e-300) || high - low <= 1e-300) return next
    x = next
  }
  return x
}

/**
 * The Student t CDF P(T ≤ t) for `df` > 0 degrees of freedom (any real df: Welch's are
 * fractional), through I_{ν/(ν+t²)}(ν/2, ½). df = Infinity is the normal.
 * @example studentTCdf(2, 5) // 0.9490302605850709
 */
export function studentTCdf(t: number, df: number): number {
  if (!(df > 0)) throw new RangeError(`studentTCdf: df must be positive, got ${df}`)
  if (Number.isNaN(t)) return Number.NaN
  if (df === Number.POSITIVE_INFINITY) return normalCdf(t)
  if (t === Number.POSITIVE_INFINITY) return 1
  if (t === Number.NEGATIVE_INFINITY) return 0
  const t2 = t * t
  // Both x = ν/(ν+t²) and 1 − x = t²/(ν+t²) computed directly: neither loses digits.
  const tail = 0.5 * betaIncomplete(df / (df + t2), t2 / (df + t2), df / 2, 0.5)
  return t > 0 ? 1 - tail : tail
}

/** The upper tail P(T > t) for t ≥ 0, without the 1 − CDF cancellation. */
function studentTUpper(t: number, df: number): number {
  if (df === Number.POSITIVE_INFINITY) return normalCdf(-t)
  const t2 = t * t
  return 0.5 * betaIncomplete(df / (df + t2), t2 / (df + t2), df / 2, 0.5)
}

/** The Student t density. */
function studentTPdf(t: number, df: number): number {
  if (df === Number.POSITIVE_INFINITY) return normalPdf(t)
  const logNorm = logGamma((df + 1) / 2) - logGamma(df / 2) - 0.5 * Math.log(df * Math.PI)
  return Math.exp(logNorm - ((df + 1) / 2) * Math.log1p((t * t) / df))
}

/**
 * The Student t quantile: the t with P(T ≤ t) = p, by safeguarded Newton steps on the upper
 * tail (relative error below 1e-12).
 * @example studentTQuantile(0.975, 10) // 2.228138851986274
 */
export function studentTQuantile(p: number, df: number): number {
  requireProbability('studentTQuantile', p)
  if (!(df > 0)) throw new RangeError(`studentTQuantile: df must be positive, got ${df}`)
  if (p === 0) return Number.NEGATIVE_INFINITY
  if (p === 1) return Number.POSITIVE_INFINITY
  if (p === 0.5) return 0
  if (df === Number.POSITIVE_INFINITY) return normalQuantile(p)
  if (p < 0.5) return -studentTQuantile(1 - p, df)
  const q = 1 - p
  // Bracket [low, high] with upper tail(low) > q ≥ tail(high), starting from the normal quantile.
  let low = 0
  let high = Math.max(1, normalQuantile(p))
  while (studentTUpper(high, df) > q) {
    low = high
    high *= 2
    if (high > 1e300) return Number.POSITIVE_INFINITY
  }
  let t = (low + high) / 2
  for (let i = 0; i < 400; i++) {
    const f = studentTUpper(t, df) - q
    if (f > 0) low = t
    else high = t
    const density = studentTPdf(t, df)
    let next = t + f / density
    if (!(next > low && next < high) || !Number.isFinite(next)) next = (low + high) / 2
    if (Math.abs(next - t) <= 1e-15 * Math.abs(t) || high - low <= 1e-15 * high) return next
    t = next
  }
  return t
}

/**
 * The exact binomial CDF P(X ≤ k) for X ~ Bin(n, p), the terms summed in log space (no
 * overflow or underflow for any n).
 * @example binomialCdf(3, 10, 0.5) // 0.171875 (176/1024)
 */
export function binomialCdf(k: number, n: number, p: number): number {
  if (!Number.isInteger(n) || n < 0) throw new RangeError(`binomialCdf: n must be a non-negative integer, got ${n}`)
  requireFinite('k', 'binomialCdf', k)
  requireProbability('binomialCdf', p)
  if (k < 0) return 0
  const kk = Math.floor(k)
  if (kk >= n) return 1
  if (p === 0) return 1
  if (p === 1) return 0
  const logP = Math.log(p)
  const logQ = Math.log1p(-p)
  // log C(n, i) p^i q^(n−i), built by the ratio recurrence; summed relative to the largest term.
  const logTerms = new Float64Array(kk + 1)
  let logC = 0
  logTerms[0] = n * logQ
  for (let i = 1; i <= kk; i++) {
    logC += Math.log(n - i + 1) - Math.log(i)
    logTerms[i] = logC + i * logP + (n - i) * logQ
  }
  let max = Number.NEGATIVE_INFINITY
  for (const v of logTerms) if (v > max) max = v
  let sum = 0
  for (const v of logTerms) sum += Math.exp(v - max)
  return Math.min(1, Math.exp(max + Math.log(sum)))
}
