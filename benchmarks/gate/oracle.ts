/**
 * The yardstick of the calibration: for each design, the best simple test that knows the
 * simulation's noise model, at the gates' one-sided α. Gates estimate what this test is told
 * (the launch noise) and guard against what the simulation does not have (heavy-tailed engines),
 * so they should come close to it, not beat it.
 */
import { type GateRecord, rateOf, valuesByIndex } from '../../src/gates/arms.ts'
import type { WinMetric } from '../../src/gates/gate-options.ts'
import { ServiceMetric } from '../../src/gates/gate-options.ts'
import { normalQuantile, studentTQuantile } from '../../src/stats/distributions.ts'
import type { RateMetric } from '../../src/gates/gate-options.ts'

/** Mean and unbiased variance. */
function moments(values: readonly number[]): { mean: number; variance: number } {
  const n = values.length
  const mean = values.reduce((s, v) => s + v, 0) / n
  const variance = n > 1 ? values.reduce((s, v) => s + (v - mean) ** 2, 0) / (n - 1) : 0
  return { mean, variance }
}

/** The figure of a launch on the log scale: the mean log rate over its requests, or the log of its service figure. */
function launchLog(record: GateRecord, metric: WinMetric): number {
  const service = ServiceMetric.safeParse(metric)
  if (service.success) return Math.log(record.metrics?.[service.data] ?? Number.NaN)
  const logs = [...valuesByIndex(record, rateOf(metric as RateMetric)).values()].map(Math.log)
  return logs.reduce((s, v) => s + v, 0) / logs.length
}

/**
 * Launch level: the pooled two-sample t-test on the per-launch figures (per-launch means of the
 * log rate: the prompts are the same in every launch, so they cancel), df = 2L − 2, the most
 * powerful test for log-normal noise with equal variances. True when it claims the win.
 */
export function launchLevelOracle(
  baseline: readonly GateRecord[],
  candidate: readonly GateRecord[],
  metric: WinMetric,
  alpha: number,
  margin: number,
): boolean {
  const b = moments(baseline.map((r) => launchLog(r, metric)))
  const c = moments(candidate.map((r) => launchLog(r, metric)))
  const nb = baseline.length
  const nc = candidate.length
  const pooled = ((nb - 1) * b.variance + (nc - 1) * c.variance) / (nb + nc - 2)
  const se = Math.sqrt(pooled * (1 / nb + 1 / nc))
  return c.mean - b.mean - Math.log(1 + margin) > studentTQuantile(1 - alpha, nb + nc - 2) * se
}

/**
 * One launch per arm: the paired test that is told the launch variance. Per-request metrics: the
 * mean paired log-ratio with se² = s²/n + 2·launchSd² against the t quantile (df n − 1). Service
 * figures: the log of the figures' ratio with the ratio estimator's delta-method variance plus
 * the same launch variance, against the normal quantile.
 */
export function singleLaunchOracle(
  baseline: GateRecord,
  candidate: GateRecord,
  metric: WinMetric,
  alpha: number,
  margin: number,
  launchSd: number,
): boolean {
  const launchVariance = 2 * launchSd ** 2
  const service = ServiceMetric.safeParse(metric)
  if (service.success) {
    const b = baseline.requests
    const c = candidate.requests
    const n = Math.min(b.length, c.length)
    const amount = (r: GateRecord['requests'][number]) => (service.data === 'requestRateReqPerS' ? 1 : (r.completionTokens ?? 0))
    const mean = (f: (i: number) => number) => {
      let s = 0
      for (let i = 0; i < n; i++) s += f(i)
      return s / n
    }
    const e2e = (r: GateRecord['requests'][number]) => r.e2eMs ?? 0
    const [ab, ac, tb, tc] = [mean((i) => amount(b[i]!)), mean((i) => amount(c[i]!)), mean((i) => e2e(b[i]!)), mean((i) => e2e(c[i]!))]
    // Influence of request i on ln(Σac/Σtc) − ln(Σab/Σtb).
    const influence = Array.from({ length: n }, (_, i) => amount(c[i]!) / ac - e2e(c[i]!) / tc - amount(b[i]!) / ab + e2e(b[i]!) / tb)
    const se = Math.sqrt(moments(influence).variance / n + launchVariance)
    const estimate = Math.log((candidate.metrics?.[service.data] ?? Number.NaN) / (baseline.metrics?.[service.data] ?? Number.NaN))
    return estimate - Math.log(1 + margin) > normalQuantile(1 - alpha) * se
  }
  const value = rateOf(metric as RateMetric)
  const bv = valuesByIndex(baseline, value)
  const cv = valuesByIndex(candidate, value)
  const logRatios: number[] = []
  for (const [i, v] of bv) {
    const w = cv.get(i)
    if (w !== undefined) logRatios.push(Math.log(w / v))
  }
  const m = moments(logRatios)
  const se = Math.sqrt(m.variance / logRatios.length + launchVariance)
  return m.mean - Math.log(1 + margin) > studentTQuantile(1 - alpha, logRatios.length - 1) * se
}
