import type { GateDecision } from '../schema/gate.ts'
import { normalQuantile, studentTQuantile } from '../stats/distributions.ts'
import { welchTTest } from '../stats/tests.ts'

/** An interval on the log scale of a ratio, around its estimate. */
export interface LogInterval {
  estimate: number
  low: number
  high: number
}

/** A decision's effect from a log-scale interval: the value (a ratio, or ms) with its bounds. */
export function logEffect(
  interval: LogInterval,
  unit: GateDecision['effect']['unit'],
  confidence: number,
  method: string,
): GateDecision['effect'] {
  return { estimate: Math.exp(interval.estimate), low: Math.exp(interval.low), high: Math.exp(interval.high), unit, confidence, method }
}

/**
 * Widens a log-scale interval for launch-to-launch variation: each side's half-width h (= z·se)
 * becomes √(h² + z²·v), i.e. se² + v in quadrature, where v is the variance of the launch
 * effects in the estimate (2·launchNoise² for a ratio of two launches, launchNoise² for one arm).
 * Keeps the bootstrap's asymmetry.
 */
export function widen(interval: LogInterval, confidence: number, launchVariance: number): LogInterval {
  if (!(launchVariance > 0)) return interval
  const z = normalQuantile(1 - (1 - confidence) / 2)
  const extra = z * z * launchVariance
  return {
    estimate: interval.estimate,
    low: interval.estimate - Math.sqrt((interval.estimate - interval.low) ** 2 + extra),
    high: interval.estimate + Math.sqrt((interval.high - interval.estimate) ** 2 + extra),
  }
}

/**
 * A bootstrap interval of a mean, each side made at least as wide as the Student t interval's
 * (mean ± t_{n−1}·sd/√n). The bootstrap's jackknife acceleration is noisy with heavy tails (a
 * stall in one arm): a sample with an outlier has both its mean and its skewness pulled the same
 * way and BCa then shortens the opposite side, which doubles the A/A false-win rate of prefill at
 * the first sequential looks (docs/gates.md). The t floor keeps BCa's skew where it widens and
 * removes it where it narrows.
 */
export function atLeastStudentT(interval: LogInterval, sd: number, n: number, confidence: number): LogInterval {
  const half = (studentTQuantile(1 - (1 - confidence) / 2, n - 1) * sd) / Math.sqrt(n)
  return {
    estimate: interval.estimate,
    low: Math.min(interval.low, interval.estimate - half),
    high: Math.max(interval.high, interval.estimate + half),
  }
}

/**
 * The t-interval for the difference of mean log-statistics over launches (candidate − baseline).
 * With the same number of launches per arm (A B B A gives that) the standard error is the same as
 * Welch's and the df is the pooled 2n − 2: at equal sizes the pooled t-test keeps its level under
 * unequal variances, while Welch–Satterthwaite's df, estimated from a handful of launches, is
 * smaller and noisy and costs power at 4 launches per arm (docs/gates.md, "Repeated launches").
 * With unequal counts, Welch's df.
 */
export function launchLevelInterval(
  candidate: readonly number[],
  baseline: readonly number[],
  confidence: number,
): LogInterval & { df: number; sd: number; pooledDf: boolean } {
  const result = welchTTest(candidate, baseline, confidence)
  const pooled = Math.sqrt((variance(candidate) + variance(baseline)) / 2)
  if (candidate.length !== baseline.length) {
    return { estimate: result.estimate, low: result.low, high: result.high, df: result.df, sd: pooled, pooledDf: false }
  }
  const n = candidate.length
  const df = 2 * n - 2
  const half = studentTQuantile(1 - (1 - confidence) / 2, df) * pooled * Math.sqrt(2 / n)
  return { estimate: result.estimate, low: result.estimate - half, high: result.estimate + half, df, sd: pooled, pooledDf: true }
}

/** The one-sample t-interval of a mean of log-statistics over launches. */
export function launchLevelOneSample(values: readonly number[], confidence: number): LogInterval & { df: number } {
  const n = values.length
  const mean = values.reduce((s, v) => s + v, 0) / n
  const se = Math.sqrt(variance(values) / n)
  const half = studentTQuantile(1 - (1 - confidence) / 2, n - 1) * se
  return { estimate: mean, low: mean - half, high: mean + half, df: n - 1 }
}

function variance(values: readonly number[]): number {
  const n = values.length
  if (n < 2) return 0
  const mean = values.reduce((s, v) => s + v, 0) / n
  return values.reduce((s, v) => s + (v - mean) ** 2, 0) / (n - 1)
}

/** The sample standard deviation. */
export function sampleSd(values: ArrayLike<number>): number {
  const n = values.length
  if (n < 2) return 0
  let mean = 0
  for (let i = 0; i < n; i++) mean += values[i] as number
  mean /= n
  let ss = 0
  for (let i = 0; i < n; i++) ss += ((values[i] as number) - mean) ** 2
  return Math.sqrt(ss / (n - 1))
}
