import type { GateDecision } from '../schema/gate.ts'
import { type BootstrapDistribution, percentileInterval, Resampler } from '../stats/bootstrap.ts'
import { type GateRecord, MIN_PAIRED_REQUESTS, type OkRequest, pairByIndex, valuesByIndex } from './arms.ts'
import type { ResolvedWinGateOptions, ServiceMetric } from './gate-options.ts'
import { decideHint, launchLevelVerdict, singleLaunchHint, tooFewLaunchesSetting, tooFewSetting } from './decide-hints.ts'
import { logEffect, type LogInterval, widen } from './interval.ts'
import { notEstimableMethod, serviceLaunchMethod, serviceWinMethod } from './method-text.ts'
import { serviceLaunchRule, serviceWinRule } from './rule-text.ts'
import { launchesLeftOutWarning, launchNoiseFloorWarning, launchNoiseWarnings, TOO_FEW_LAUNCHES_WARNING } from './warning-text.ts'
import { normalQuantile } from '../stats/distributions.ts'

/** The figure of one launch, or null when the cell has none (no ok request, or no wall clock). */
function figureOf(record: GateRecord, metric: ServiceMetric): number | null {
  const v = record.metrics?.[metric] ?? null
  return v !== null && v > 0 && Number.isFinite(v) ? v : null
}

/** What one request adds to a service figure: its output tokens (or 1 completed request) and its time in service. */
function contribution(metric: ServiceMetric): (r: OkRequest) => { amount: number; busyMs: number } | null {
  return (r) => {
    if (r.e2eMs === null || !(r.e2eMs > 0)) return null
    if (metric === 'requestRateReqPerS') return { amount: 1, busyMs: r.e2eMs }
    return r.completionTokens !== null && r.completionTokens > 0 ? { amount: r.completionTokens, busyMs: r.e2eMs } : null
  }
}

/**
 * The percentile bootstrap interval (expanded for small samples) of the ratio estimator's
 * log-ratio ln(Σc.amount/Σc.busy) − ln(Σb.amount/Σb.busy), the paired prompts resampled together.
 */
function ratioEstimatorInterval(
  paired: { baseline: { amount: number; busyMs: number }[]; candidate: { amount: number; busyMs: number }[] },
  o: ResolvedWinGateOptions,
): { estimate: number; low: number; high: number } {
  const n = paired.baseline.length
  const ab = Float64Array.from(paired.baseline, (p) => p.amount)
  const ac = Float64Array.from(paired.candidate, (p) => p.amount)
  const tb = Float64Array.from(paired.baseline, (p) => p.busyMs)
  const tc = Float64Array.from(paired.candidate, (p) => p.busyMs)
  const logRatio = (pick: (k: number) => number): number => {
    let sab = 0
    let sac = 0
    let stb = 0
    let stc = 0
    for (let k = 0; k < n; k++) {
      const i = pick(k)
      sab += ab[i] as number
      sac += ac[i] as number
      stb += tb[i] as number
      stc += tc[i] as number
    }
    return Math.log(sac / stc) - Math.log(sab / stb)
  }
  const resampler = new Resampler(o.seed)
  const indices = new Int32Array(n)
  const replicates = new Float64Array(o.resamples)
  for (let r = 0; r < o.resamples; r++) {
    resampler.draw(indices, n)
    replicates[r] = logRatio((k) => indices[k] as number)
  }
  replicates.sort()
  const estimate = logRatio((k) => k)
  const dist: BootstrapDistribution = { estimate, replicates, z0: 0, acceleration: 0, resamples: o.resamples, seed: o.seed, dropped: 0 }
  return percentileInterval(dist, o.confidence, { expandForN: n })
}

/** A superiority decision of this gate from its parts. */
function superiority(
  o: ResolvedWinGateOptions,
  metric: ServiceMetric,
  outcome: GateDecision['outcome'],
  effect: GateDecision['effect'],
  rest: Pick<GateDecision, 'samples' | 'rule' | 'moreRequestsHint' | 'decideHint' | 'warnings'>,
): GateDecision {
  return { gate: o.gate, outcome, kind: 'superiority', metric, effect, ...rest }
}

function notEstimable(
  o: ResolvedWinGateOptions,
  metric: ServiceMetric,
  rule: string,
  samples: GateDecision['samples'],
  why: 'too-few-pairs' | 'too-few-launches',
  warnings: string[],
): GateDecision {
  return {
    gate: o.gate,
    outcome: 'inconclusive',
    kind: 'superiority',
    metric,
    effect: { estimate: null, low: null, high: null, unit: 'ratio', confidence: null, method: notEstimableMethod({ kind: why }) },
    samples,
    rule,
    moreRequestsHint: why === 'too-few-pairs' ? MIN_PAIRED_REQUESTS : null,
    decideHint: decideHint([why === 'too-few-pairs' ? tooFewSetting(MIN_PAIRED_REQUESTS, samples.paired) : tooFewLaunchesSetting()]),
    warnings,
  }
}

/**
 * A superiority gate on a service-level figure of the cell: aggregate output tokens per second
 * of wall clock (or completed requests per second), the headline number of a serving benchmark.
 * The effect is the ratio of the two cells' figures.
 *
 * One launch per arm: the figure is one number per arm, so its sampling spread comes from the
 * requests. In a closed loop at concurrency C the figure is about C·Σ tokens / Σ e2e (Little's
 * law), so the paired prompts are resampled together (a percentile bootstrap of that ratio
 * estimator's log-ratio) and the offsets of that interval are put around the log of the measured
 * ratio, then widened by the launch-noise floor. Repeated launches: the t-interval (see `launchLevelInterval`) over the
 * per-launch log figures, where the launch effect is measured.
 * @example serviceWinGate(o, 'outputThroughputTokPerS', [baseline], [candidate])
 */
export function serviceWinGate(
  o: ResolvedWinGateOptions,
  metric: ServiceMetric,
  baseline: readonly GateRecord[],
  candidate: readonly GateRecord[],
): GateDecision {
  return baseline.length > 1 || candidate.length > 1
    ? launchLevelServiceWin(o, metric, baseline, candidate)
    : singleLaunchServiceWin(o, metric, baseline[0] as GateRecord, candidate[0] as GateRecord)
}

function singleLaunchServiceWin(
  o: ResolvedWinGateOptions,
  metric: ServiceMetric,
  baseline: GateRecord,
  candidate: GateRecord,
): GateDecision {
  const threshold = 1 + o.margin
  const b = valuesByIndex(baseline, contribution(metric))
  const c = valuesByIndex(candidate, contribution(metric))
  const paired = pairByIndex(b, c)
  const n = paired.indices.length
  const samples = { baseline: b.size, candidate: c.size, paired: n }
  const rule = serviceWinRule({ metric, confidence: o.confidence, threshold })
  const warnings = launchNoiseWarnings(o.launchNoise)
  const figures = { baseline: figureOf(baseline, metric), candidate: figureOf(candidate, metric) }
  if (figures.baseline === null || figures.candidate === null || n < MIN_PAIRED_REQUESTS) {
    return notEstimable(o, metric, rule, samples, 'too-few-pairs', warnings)
  }
  const spread = ratioEstimatorInterval(paired, o)
  const measured = Math.log(figures.candidate / figures.baseline)
  const sampling: LogInterval = {
    estimate: measured,
    low: measured - (spread.estimate - spread.low),
    high: measured + (spread.high - spread.estimate),
  }
  const launchVariance = 2 * o.launchNoise ** 2
  const interval = widen(sampling, o.confidence, launchVariance)
  const logThreshold = Math.log(threshold)
  const outcome = interval.low > logThreshold ? 'pass' : interval.high < logThreshold ? 'fail' : 'inconclusive'
  let moreRequestsHint: number | null = null
  let hint: GateDecision['decideHint'] = null
  if (outcome === 'inconclusive') {
    const z = normalQuantile(1 - (1 - o.confidence) / 2)
    const sd = (((sampling.high - sampling.low) / 2) * Math.sqrt(n)) / z
    ;({ requests: moreRequestsHint, hint } = singleLaunchHint({
      gap: interval.estimate - logThreshold,
      sd,
      confidence: o.confidence,
      launchNoise: o.launchNoise,
      n,
      unit: 'paired requests per arm',
    }))
    if (moreRequestsHint === null && interval.estimate !== logThreshold && launchVariance > 0) {
      warnings.push(launchNoiseFloorWarning({ launchNoise: o.launchNoise, threshold }))
    }
  }
  const method = serviceWinMethod({
    metric,
    baseline: figures.baseline,
    candidate: figures.candidate,
    paired: n,
    resamples: o.resamples,
    seed: o.seed,
    launchNoise: o.launchNoise,
  })
  return superiority(o, metric, outcome, logEffect(interval, 'ratio', o.confidence, method), {
    samples,
    rule,
    moreRequestsHint,
    decideHint: hint,
    warnings,
  })
}

function launchLevelServiceWin(
  o: ResolvedWinGateOptions,
  metric: ServiceMetric,
  baseline: readonly GateRecord[],
  candidate: readonly GateRecord[],
): GateDecision {
  const threshold = 1 + o.margin
  const b = baseline
    .map((r) => figureOf(r, metric))
    .filter((v): v is number => v !== null)
    .map(Math.log)
  const c = candidate
    .map((r) => figureOf(r, metric))
    .filter((v): v is number => v !== null)
    .map(Math.log)
  const samples = { baseline: b.length, candidate: c.length, paired: 0 }
  const rule = serviceLaunchRule({ metric, confidence: o.confidence, threshold })
  const warnings: string[] = []
  if (b.length < baseline.length || c.length < candidate.length) warnings.push(launchesLeftOutWarning(`a ${metric}`))
  if (b.length < 2 || c.length < 2)
    return notEstimable(o, metric, rule, samples, 'too-few-launches', [...warnings, TOO_FEW_LAUNCHES_WARNING])
  const { interval, outcome, hint } = launchLevelVerdict(c, b, o.confidence, threshold)
  const method = serviceLaunchMethod({ metric, candidateLaunches: c.length, baselineLaunches: b.length, df: interval.df })
  return superiority(o, metric, outcome, logEffect(interval, 'ratio', o.confidence, method), {
    samples,
    rule,
    moreRequestsHint: null,
    decideHint: hint,
    warnings,
  })
}
