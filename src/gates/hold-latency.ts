import { nearestRank } from '../metrics/distribution.ts'
import { P99_MIN_SAMPLES } from '../schema/constants.ts'
import { normalQuantile, studentTQuantile } from '../stats/distributions.ts'
import type { GateDecision } from '../schema/gate.ts'
import {
  bcaInterval,
  bootstrapPercentile,
  bootstrapRatioOfPercentiles,
  type BootstrapDistribution,
  percentileInterval,
} from '../stats/bootstrap.ts'
import {
  type GatePair,
  type GateRecord,
  LATENCY_FIELD,
  latencyOf,
  launchesOf,
  launchLayout,
  launchSamples,
  MIN_PAIRED_REQUESTS,
  type OkRequest,
  pairByIndex,
  selectTurns,
  turnsText,
  valuesByIndex,
} from './arms.ts'
import { launchLevelInterval, launchLevelOneSample, logEffect, type LogInterval, widen } from './interval.ts'
import { decideHint, repeatsHint, repeatsSetting, singleLaunchHint, tooFewLaunchesSetting } from './decide-hints.ts'
import { holdLatencyMethod, type HoldLatencySample, launchHoldLatencyMethod, type NotEstimable, notEstimableMethod } from './method-text.ts'
import { holdLatencyRule } from './rule-text.ts'
import { withPreemptions } from './preemption.ts'
import {
  descriptiveP99Warning,
  holdInconclusiveWarning,
  launchesLeftOutWarning,
  launchNoiseFloorWarning,
  launchNoiseWarnings,
  notEstimableWarning,
  UNPAIRABLE_ARMS_WARNING,
  unpairedWarning,
} from './warning-text.ts'
import { HoldLatencyGateOptions, parseOptions, type ResolvedHoldLatencyGateOptions } from './gate-options.ts'

type Latency = number | readonly number[]

/**
 * A non-regression gate on a latency percentile. With `notWorseThanPct`: the ratio of
 * nearest-rank percentiles candidate/baseline with a BCa bootstrap interval (pairs resampled
 * together when the arms share prompts), widened by the launch-noise floor; fail only when the
 * lower bound exceeds 1 + pct/100 (a confident regression beyond tolerance), pass when the upper
 * bound is within it, otherwise inconclusive (which the matcher passes with an annotation).
 * With `atMostMs`: the same on the candidate's percentile against an absolute bound.
 * @example holdLatencyGate({ baseline, candidate }, { metric: 'ttft', percentile: 95, notWorseThanPct: 10 })
 */
export function holdLatencyGate(pair: GatePair, options: HoldLatencyGateOptions): GateDecision {
  const o = parseOptions(typeof options?.gate === 'string' ? options.gate : 'toHoldLatency', HoldLatencyGateOptions, options)
  const layout = launchLayout(o.gate, selectTurns(o.gate, pair, o.turns))
  const decision = layout.repeated
    ? launchLevelHold(o, layout.baseline, layout.candidate)
    : requestLevelHold(o, layout.baseline[0] as GateRecord, layout.candidate[0] as GateRecord)
  // Preemptions are counted per cell, so against all of each cell's requests, whatever turns were judged.
  const shown = withPreemptions(decision, launchesOf(pair.baseline), launchesOf(pair.candidate))
  return o.turns === undefined ? shown : { ...shown, rule: shown.rule + turnsText(o.turns) }
}

/** The metric a hold gate's decision names, e.g. `ttftMs p95`. */
export function metricName(o: Pick<ResolvedHoldLatencyGateOptions, 'metric' | 'percentile'>): string {
  return `${LATENCY_FIELD[o.metric]} p${o.percentile}`
}

function ruleOf(o: ResolvedHoldLatencyGateOptions, launchLevel = false): string {
  const { metric, percentile, confidence, notWorseThanPct, atMostMs } = o
  return holdLatencyRule({ metric, percentile, confidence, notWorseThanPct, atMostMs, launchLevel })
}

function countValues(values: Iterable<Latency>): number {
  let n = 0
  for (const v of values) n += typeof v === 'number' ? 1 : v.length
  return n
}

function p99Warning(o: ResolvedHoldLatencyGateOptions, samples: number): string[] {
  return o.percentile === 99 && samples < P99_MIN_SAMPLES ? [descriptiveP99Warning({ samples, min: P99_MIN_SAMPLES })] : []
}

/** Outcome of a non-regression check against a bound on the ratio (or ms) scale. */
function judge(interval: LogInterval, bound: number): GateDecision['outcome'] {
  const logBound = Math.log(bound)
  if (interval.low > logBound) return 'fail'
  if (interval.high <= logBound) return 'pass'
  return 'inconclusive'
}

/** The decision of a non-regression test from its log-scale interval: judged against the bound, warned when undecided. */
function regressionDecision(
  o: ResolvedHoldLatencyGateOptions,
  interval: LogInterval,
  bound: number,
  unit: 'ratio' | 'ms',
  method: string,
  samples: GateDecision['samples'],
  warnings: string[],
  rule: string,
  floorDominates: boolean,
  /** What would decide it, asked only when it is undecided. */
  hintOf: () => GateDecision['decideHint'],
): GateDecision {
  const outcome = judge(interval, bound)
  if (outcome === 'inconclusive') {
    const [low, high] = [Math.exp(interval.low), Math.exp(interval.high)]
    const settle = floorDominates ? 'launches' : 'requests'
    warnings.push(holdInconclusiveWarning({ confidence: o.confidence, low, high, unit, bound, settle }))
    if (floorDominates) warnings.push(launchNoiseFloorWarning({ launchNoise: o.launchNoise, threshold: bound }))
  }
  return {
    gate: o.gate,
    outcome,
    kind: 'non-regression',
    metric: metricName(o),
    effect: logEffect(interval, unit, o.confidence, method),
    samples,
    rule,
    moreRequestsHint: null,
    decideHint: outcome === 'inconclusive' ? hintOf() : null,
    warnings,
  }
}

function notEstimable(
  o: ResolvedHoldLatencyGateOptions,
  samples: GateDecision['samples'],
  reason: NotEstimable,
  warnings: string[],
): GateDecision {
  return {
    gate: o.gate,
    outcome: 'inconclusive',
    kind: 'non-regression',
    metric: metricName(o),
    effect: {
      estimate: null,
      low: null,
      high: null,
      unit: o.notWorseThanPct !== undefined ? 'ratio' : 'ms',
      confidence: null,
      method: notEstimableMethod(reason),
    },
    samples,
    rule: ruleOf(o),
    moreRequestsHint: null,
    decideHint: reason.kind === 'too-few-launches' ? decideHint([tooFewLaunchesSetting()]) : null,
    warnings: [...warnings, notEstimableWarning(reason)],
  }
}

function requestLevelHold(o: ResolvedHoldLatencyGateOptions, baseline: GateRecord, candidate: GateRecord): GateDecision {
  const value = latencyOf(o.metric)
  const b = valuesByIndex<Latency>(baseline, value)
  const c = valuesByIndex<Latency>(candidate, value)
  const boot = { p: o.percentile, seed: o.seed, resamples: o.resamples }
  const warnings = launchNoiseWarnings(o.launchNoise)
  const field = LATENCY_FIELD[o.metric]
  const method = (sample: HoldLatencySample) =>
    holdLatencyMethod({
      sample,
      percentile: o.percentile,
      resamples: o.resamples,
      seed: o.seed,
      clustered: o.metric === 'itl',
      launchNoise: o.launchNoise,
    })

  if (o.atMostMs !== undefined) {
    const samples = { baseline: b.size, candidate: c.size, paired: pairByIndex(b, c).indices.length }
    warnings.push(...p99Warning(o, countValues(c.values())))
    if (c.size < MIN_PAIRED_REQUESTS)
      return notEstimable(o, samples, { kind: 'too-few-candidate-requests', requests: c.size, field }, warnings)
    const dist = bootstrapPercentile([...c.values()] as number[] | number[][], boot)
    return decide(o, dist, samples, 1, o.atMostMs, 'ms', method({ kind: 'candidate-only' }), warnings)
  }

  const paired = pairByIndex(b, c)
  const samples = { baseline: b.size, candidate: c.size, paired: paired.indices.length }
  warnings.push(...p99Warning(o, Math.min(countValues(b.values()), countValues(c.values()))))
  let dist: BootstrapDistribution
  let sample: HoldLatencySample
  if (paired.indices.length >= MIN_PAIRED_REQUESTS) {
    const unpaired = Math.max(b.size, c.size) - paired.indices.length
    if (unpaired > 0) warnings.push(unpairedWarning({ unpaired, field }))
    dist = bootstrapRatioOfPercentiles(paired.candidate as number[] | number[][], paired.baseline as number[] | number[][], {
      ...boot,
      paired: true,
    })
    sample = { kind: 'paired', pairs: paired.indices.length }
  } else if (b.size >= MIN_PAIRED_REQUESTS && c.size >= MIN_PAIRED_REQUESTS) {
    warnings.push(UNPAIRABLE_ARMS_WARNING)
    dist = bootstrapRatioOfPercentiles([...c.values()] as number[] | number[][], [...b.values()] as number[] | number[][], {
      ...boot,
      paired: false,
    })
    sample = { kind: 'independent', candidate: c.size, baseline: b.size }
  } else {
    return notEstimable(o, samples, { kind: 'too-few-requests', field, baseline: b.size, candidate: c.size }, warnings)
  }
  return decide(o, dist, samples, 2, 1 + (o.notWorseThanPct as number) / 100, 'ratio', method(sample), warnings)
}

function decide(
  o: ResolvedHoldLatencyGateOptions,
  dist: BootstrapDistribution,
  samples: GateDecision['samples'],
  arms: 1 | 2,
  bound: number,
  unit: 'ratio' | 'ms',
  method: string,
  warnings: string[],
): GateDecision {
  if (!Number.isFinite(dist.estimate)) return notEstimable(o, samples, { kind: 'zero-percentile' }, warnings)
  const launchVariance = arms * o.launchNoise ** 2
  const plain = atLeastPercentile(dist, o.confidence)
  const interval = widen(plain, o.confidence, launchVariance)
  // More requests narrow only the request part of the interval: when the launch-noise floor alone
  // is wider than the gap to the bound, only more launches can settle an undecided verdict.
  const z = normalQuantile(1 - (1 - o.confidence) / 2)
  const gap = dist.estimate - Math.log(bound)
  const floorDominates = launchVariance > 0 && z * Math.sqrt(launchVariance) >= Math.abs(gap)
  const hintOf = () => {
    // The requests the interval rests on, and its side toward the bound as an equivalent sd.
    const n = arms === 1 ? samples.candidate : samples.paired > 0 ? samples.paired : Math.min(samples.baseline, samples.candidate)
    const half = gap < 0 ? plain.high - plain.estimate : plain.estimate - plain.low
    const unit = arms === 1 ? 'requests' : samples.paired > 0 ? 'paired requests per arm' : 'requests per arm'
    return singleLaunchHint({ gap, sd: (half * Math.sqrt(n)) / z, confidence: o.confidence, launchNoise: o.launchNoise, n, unit, arms })
      .hint
  }
  return regressionDecision(o, interval, bound, unit, method, samples, warnings, ruleOf(o), floorDominates, hintOf)
}

/**
 * The BCa interval with each side at least as wide as the percentile interval's. BCa's
 * acceleration comes from the jackknife, which is inconsistent for percentiles (Efron 1982,
 * ch. 3): alone, BCa misses the 1% level at the tolerance, and the guarded interval keeps it
 * (docs/gates.md, `holdLatencyGate`).
 */
function atLeastPercentile(dist: BootstrapDistribution, confidence: number): LogInterval {
  const bca = bcaInterval(dist, confidence)
  const plain = percentileInterval(dist, confidence)
  return { estimate: dist.estimate, low: Math.min(bca.low, plain.low), high: Math.max(bca.high, plain.high) }
}

/** Log of one launch's nearest-rank percentile over all its values (ITL gaps pooled), or null. */
function logPercentile(record: GateRecord, value: (r: OkRequest) => Latency | null, p: number): number | null {
  const pooled: number[] = []
  for (const v of valuesByIndex(record, value).values()) {
    if (typeof v === 'number') pooled.push(v)
    else pooled.push(...v)
  }
  if (pooled.length === 0) return null
  const x = nearestRank(
    pooled.sort((a, b) => a - b),
    p,
  )
  return x > 0 ? Math.log(x) : null
}

function launchLevelHold(
  o: ResolvedHoldLatencyGateOptions,
  baseline: readonly GateRecord[],
  candidate: readonly GateRecord[],
): GateDecision {
  const value = latencyOf(o.metric)
  const b = baseline.map((r) => logPercentile(r, value, o.percentile)).filter((v): v is number => v !== null)
  const c = candidate.map((r) => logPercentile(r, value, o.percentile)).filter((v): v is number => v !== null)
  const samples = launchSamples(baseline, candidate, value)
  const warnings: string[] = []
  if (b.length < baseline.length || c.length < candidate.length)
    warnings.push(launchesLeftOutWarning(`a positive ${LATENCY_FIELD[o.metric]} p${o.percentile}`))
  const absolute = o.atMostMs !== undefined
  if (c.length < 2 || (!absolute && b.length < 2)) {
    return notEstimable(o, samples, { kind: 'too-few-launches' }, warnings)
  }
  const interval = absolute ? launchLevelOneSample(c, o.confidence) : launchLevelInterval(c, b, o.confidence)
  const bound = absolute ? (o.atMostMs as number) : 1 + (o.notWorseThanPct as number) / 100
  const unit = absolute ? 'ms' : 'ratio'
  const method = launchHoldLatencyMethod({
    percentile: o.percentile,
    candidateLaunches: c.length,
    baselineLaunches: absolute ? null : b.length,
    df: interval.df,
  })
  const arms = absolute ? 1 : 2
  // One launch's sd of the log percentile, from the interval's half-width.
  const t = studentTQuantile(1 - (1 - o.confidence) / 2, interval.df)
  const sd = ((interval.high - interval.estimate) / t) * Math.sqrt(absolute ? c.length : Math.min(b.length, c.length) / 2)
  const hintOf = () => {
    const launches = repeatsHint(Math.abs(interval.estimate - Math.log(bound)), sd, o.confidence, Math.max(b.length, c.length), arms)
    return launches === null ? null : decideHint([repeatsSetting(launches, { launchSd: sd })])
  }
  return regressionDecision(o, interval, bound, unit, method, samples, warnings, ruleOf(o, true), false, hintOf)
}
