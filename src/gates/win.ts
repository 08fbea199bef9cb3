import type { GateDecision } from '../schema/gate.ts'
import { bcaInterval, bootstrapMeanOf } from '../stats/bootstrap.ts'
import { normalQuantile } from '../stats/distributions.ts'
import { groupSequentialBoundaries, lookConfidence } from '../stats/sequential.ts'
import {
  type GatePair,
  type GateRecord,
  launchesOf,
  launchLayout,
  launchSamples,
  MIN_PAIRED_REQUESTS,
  type OkRequest,
  pairByIndex,
  rateOf,
  selectTurns,
  turnsText,
  valuesByIndex,
} from './arms.ts'
import { atLeastStudentT, logEffect, type LogInterval, sampleSd, widen } from './interval.ts'
import { decideHint, launchLevelVerdict, singleLaunchHint, tooFewLaunchesSetting, tooFewSetting } from './decide-hints.ts'
import { launchWinMethod, notEstimableMethod, winMethod } from './method-text.ts'
import { candidateFailureRuleClause, launchWinRule, sequentialRuleClause, winRule } from './rule-text.ts'
import {
  candidateFailureWarning,
  LOOKS_IGNORED_WARNING,
  TOO_FEW_LAUNCHES_WARNING,
  launchesLeftOutWarning,
  launchNoiseFloorWarning,
  launchNoiseWarnings,
  type PairShortfall,
  tooFewPairsWarning,
  unpairedWarning,
} from './warning-text.ts'
import { EXACT_SIGNED_RANK_MAX_N, signedRankTest } from '../stats/signed-rank.ts'
import { serviceWinGate } from './service-win.ts'
import { withPreemptions } from './preemption.ts'
import {
  DEFAULT_WIN_ESTIMATOR,
  parseOptions,
  type RateMetric,
  type ResolvedWinGateOptions,
  ServiceMetric,
  type WinEstimator,
  type WinMetric,
  type WinGateName,
  WinGateOptions,
} from './gate-options.ts'

/** Each win gate's metric unless its options name another. */
export const GATE_METRIC: Record<WinGateName, WinMetric> = {
  toWinDecode: 'decodeTokPerS',
  toWinPrefill: 'effectivePrefillTokPerS',
  toWinThroughput: 'outputThroughputTokPerS',
}

/**
 * A superiority gate on a rate metric: is the candidate faster than the baseline by more than
 * the margin? The effect is the typical candidate/baseline ratio over paired requests (the same
 * prompt on both arms): by default the Hodges–Lehmann pseudo-median with its signed-rank
 * interval, or with `estimator: 'geometric-mean'` the geometric mean with a BCa bootstrap interval
 * of the mean log-ratio; either widened by the launch-noise floor (DEFAULT_WIN_ESTIMATOR says
 * why). Pass when the interval's lower bound exceeds 1 + margin; fail when its upper bound is
 * below it (confidently not a win); otherwise inconclusive, with the paired requests that would
 * likely decide it.
 *
 * With `looks`, the first k paired requests are judged at each look with α spent by a
 * Pocock-type function, stopping at the first decisive look. With several launches per arm the
 * test is at the launch level (see `winGate`'s launch rule in docs/gates.md).
 * @example winGate({ baseline, candidate }, { gate: 'toWinDecode', margin: 0.05 })
 */
export function winGate(pair: GatePair, options: WinGateOptions): GateDecision {
  const o = parseOptions(typeof options?.gate === 'string' ? options.gate : 'winGate', WinGateOptions, options)
  const metric = o.metric ?? GATE_METRIC[o.gate]
  const service = ServiceMetric.safeParse(metric)
  if (service.success && o.turns !== undefined) {
    throw new TypeError(`${o.gate}: turns judges requests, and ${metric} is a figure of the whole cell; remove turns`)
  }
  const layout = launchLayout(o.gate, selectTurns(o.gate, pair, o.turns))
  const decision = service.success
    ? serviceWinGate(o, service.data, layout.baseline, layout.candidate)
    : layout.repeated
      ? launchLevelWin(o, metric as RateMetric, layout.baseline, layout.candidate)
      : requestLevelWin(o, metric as RateMetric, layout.baseline[0] as GateRecord, layout.candidate[0] as GateRecord)
  const counted = countCandidateFailures(decision, layout.baseline, layout.candidate)
  // Preemptions are counted per cell, so against all of each cell's requests, whatever turns were judged.
  const shown = withPreemptions(counted, launchesOf(pair.baseline), launchesOf(pair.candidate))
  return o.turns === undefined ? shown : { ...shown, rule: shown.rule + turnsText(o.turns) }
}

/**
 * Requests that failed on the candidate but completed on the baseline (launch by launch, the
 * same prompt), with the first one's index and code.
 */
function candidateOnlyFailures(
  baseline: readonly GateRecord[],
  candidate: readonly GateRecord[],
): { count: number; first: { index: number; code: string } | null } {
  let count = 0
  let first: { index: number; code: string } | null = null
  candidate.forEach((launch, k) => {
    const base = baseline[Math.min(k, baseline.length - 1)] as GateRecord
    const completed = new Set(base.requests.filter((r) => r.status === 'ok').map((r) => r.index))
    for (const r of launch.requests) {
      if (r.status !== 'failed' || !completed.has(r.index)) continue
      count++
      first ??= { index: r.index, code: r.error.code }
    }
  })
  return { count, first }
}

/**
 * A win is never claimed over requests the candidate failed: the paired comparison sees only
 * requests that completed on both arms, so a candidate that fails its slow requests would look
 * faster. Each request that failed on the candidate only counts as a loss: a passing verdict
 * becomes a failing one, and the rule and a warning say why.
 */
function countCandidateFailures(d: GateDecision, baseline: readonly GateRecord[], candidate: readonly GateRecord[]): GateDecision {
  const { count, first } = candidateOnlyFailures(baseline, candidate)
  if (count === 0 || first === null) return d
  return {
    ...d,
    outcome: d.outcome === 'pass' ? 'fail' : d.outcome,
    rule: `${d.rule}${candidateFailureRuleClause()}`,
    warnings: [...d.warnings, candidateFailureWarning(count, first)],
  }
}

interface Look {
  /** The plan's request count at this look: it judges the paired requests with index below it. */
  end: number
  /** Paired requests judged at this look. */
  n: number
  confidence: number
  /** 1-based place of this look in the design. */
  position: number
}

/** The design of a sequential gate: the plan's request counts at its looks, and the planned total. */
export interface LookDesign {
  looks: readonly number[]
  plannedRequests: number
}

/**
 * The design the gate follows: the options' looks if given, else the one the records carry (a
 * sequential pair measured in stages, see `pair({ stopEarly })`), else none. The planned total is
 * the design's, or the requests the records reach.
 */
function lookDesign(o: ResolvedWinGateOptions, baseline: GateRecord, candidate: GateRecord, reached: number): LookDesign | null {
  const recorded = baseline.plan?.sequential ?? candidate.plan?.sequential ?? null
  const plannedRequests = recorded?.plannedRequests ?? reached
  if (o.looks !== null) return { looks: o.looks, plannedRequests }
  return recorded === null ? null : { looks: recorded.looks, plannedRequests }
}

/**
 * The looks actually taken. Planned looks are request counts of the plan, the last one the
 * planned total; a look judges the paired requests with index below it, so a pair stopped
 * early in stages and the same gate read afterwards take the same looks. Information fractions
 * are variance-based, (s²/N + v)/(s²/k + v) with v the launch-noise variance, so a floor that
 * more requests cannot shrink is accounted for. s is the sd of the paired log-ratios of the first
 * look; with v = 0 the fractions are k/N and s drops out.
 */
function planLooks(
  o: ResolvedWinGateOptions,
  design: LookDesign | null,
  indices: readonly number[],
  reached: number,
  logRatios: Float64Array,
  launchVariance: number,
): { looks: Look[]; planned: number } {
  const pairedBelow = (end: number) => {
    let n = 0
    while (n < indices.length && (indices[n] as number) < end) n++
    return n
  }
  if (design === null) return { looks: [{ end: Infinity, n: indices.length, confidence: o.confidence, position: 1 }], planned: 1 }
  const alpha = (1 - o.confidence) / 2
  const total = design.plannedRequests
  const counts = lookCounts(design)
  // s from the first look's requests only: a runner deciding there and a gate reading the whole
  // record afterwards then draw the same boundaries.
  const sd = sampleSd(logRatios.subarray(0, Math.max(2, pairedBelow(counts[0] as number))))
  const variance = (k: number) => (sd * sd) / k + launchVariance
  const fractions: number[] = []
  for (const k of counts) {
    // Rounded to 0.01 so designs repeat (and their boundaries are cached); nudged to stay increasing.
    const raw = variance(k) > 0 ? variance(total) / variance(k) : k / total
    const previous = fractions.at(-1) ?? 0
    fractions.push(Math.min(1, Math.max(previous + 0.01, Math.round(raw * 100) / 100)))
  }
  fractions[fractions.length - 1] = 1
  // A fraction pushed to 1 early (launch noise dominating) merges the remaining looks into it.
  const usable = fractions.findIndex((t) => t >= 1)
  const boundaries = groupSequentialBoundaries(fractions.slice(0, usable + 1), alpha, 'pocock')
  // A look is taken only when the records reach it (a pair stopped at 32 has no look at 64); the
  // last planned look judges every paired request.
  const looks: Look[] = []
  for (let i = 0; i <= usable; i++) {
    if ((counts[i] as number) > reached) break
    const end = i === usable ? Infinity : (counts[i] as number)
    looks.push({ end, n: pairedBelow(end), confidence: lookConfidence((boundaries[i] as { z: number }).z), position: i + 1 })
  }
  return { looks, planned: usable + 1 }
}

/** Requests of the plan both records reached: one past the highest index either holds, whatever its status. */
function requestsReached(baseline: GateRecord, candidate: GateRecord): number {
  const top = (r: GateRecord) => r.requests.reduce((max, q) => Math.max(max, q.index), -1)
  return Math.min(top(baseline), top(candidate)) + 1
}

/** The request counts of a design's looks, as the rule states them. */
export function lookCounts(design: LookDesign): number[] {
  return [
    ...[...new Set(design.looks)].sort((a, b) => a - b).filter((k) => k < design.plannedRequests && k >= MIN_PAIRED_REQUESTS),
    design.plannedRequests,
  ]
}

function requestLevelWin(o: ResolvedWinGateOptions, metric: RateMetric, baseline: GateRecord, candidate: GateRecord): GateDecision {
  const value = rateOf(metric)
  const b = valuesByIndex(baseline, value)
  const c = valuesByIndex(candidate, value)
  const paired = pairByIndex(b, c)
  const n = paired.indices.length
  const threshold = 1 + o.margin
  const samples = { baseline: b.size, candidate: c.size, paired: n }
  const warnings = launchNoiseWarnings(o.launchNoise)
  const unpaired = Math.max(b.size, c.size) - n
  if (unpaired > 0) warnings.push(unpairedWarning({ unpaired, field: metric }))
  const baseRule = (confidence: number) => winRule({ metric, confidence, threshold })

  const tooFew = (judged: number, shortfall: PairShortfall): GateDecision => ({
    gate: o.gate,
    outcome: 'inconclusive',
    kind: 'superiority',
    metric,
    effect: {
      estimate: null,
      low: null,
      high: null,
      unit: 'ratio',
      confidence: null,
      method: notEstimableMethod({ kind: 'too-few-pairs' }),
    },
    samples,
    rule: baseRule(o.confidence),
    moreRequestsHint: Math.max(MIN_PAIRED_REQUESTS, o.looks?.[0] ?? 16),
    decideHint: decideHint([tooFewSetting(Math.max(MIN_PAIRED_REQUESTS, o.looks?.[0] ?? 16), judged)]),
    warnings: [...warnings, tooFewPairsWarning({ paired: judged, field: metric, min: MIN_PAIRED_REQUESTS, shortfall })],
  })
  if (n < MIN_PAIRED_REQUESTS) return tooFew(n, { kind: 'overall' })

  const logRatios = new Float64Array(n)
  for (let i = 0; i < n; i++) logRatios[i] = Math.log((paired.candidate[i] as number) / (paired.baseline[i] as number))
  const launchVariance = 2 * o.launchNoise ** 2
  const reached = requestsReached(baseline, candidate)
  const design = lookDesign(o, baseline, candidate, reached)
  const planLooksResult = planLooks(o, design, paired.indices, reached, logRatios, launchVariance)
  const planned = planLooksResult.planned
  // Looks with too few pairs to judge (many failed requests before them) are passed over.
  const looks = planLooksResult.looks.filter((l) => l.n >= MIN_PAIRED_REQUESTS)
  if (looks.length === 0) {
    const taken = planLooksResult.looks.at(-1)
    return tooFew(
      taken?.n ?? n,
      taken === undefined ? { kind: 'before-first-look', firstLook: lookCounts(design as LookDesign)[0] as number } : { kind: 'at-looks' },
    )
  }
  const logThreshold = Math.log(threshold)

  const estimator = o.estimator ?? DEFAULT_WIN_ESTIMATOR[o.gate]
  let decided: { look: number; interval: LogInterval; outcome: GateDecision['outcome'] } | null = null
  let last: LogInterval = { estimate: 0, low: 0, high: 0 }
  for (let k = 0; k < looks.length; k++) {
    const look = looks[k] as Look
    last = widen(requestInterval(estimator, logRatios.subarray(0, look.n), look.confidence, o), look.confidence, launchVariance)
    if (last.low > logThreshold) decided = { look: k, interval: last, outcome: 'pass' }
    else if (last.high < logThreshold) decided = { look: k, interval: last, outcome: 'fail' }
    if (decided !== null) break
  }
  const lookIndex = decided?.look ?? looks.length - 1
  const look = looks[lookIndex] as Look
  const interval = decided?.interval ?? last
  const outcome = decided?.outcome ?? 'inconclusive'

  let rule = baseRule(look.confidence)
  if (design !== null) {
    rule += sequentialRuleClause({
      lookCounts: lookCounts(design),
      confidence: o.confidence,
      decided: decided !== null,
      position: look.position,
      planned,
      paired: look.n,
    })
  }
  let moreRequestsHint: number | null = null
  let hint: GateDecision['decideHint'] = null
  if (outcome === 'inconclusive') {
    const unwidened = requestInterval(estimator, logRatios.subarray(0, look.n), look.confidence, o)
    ;({ requests: moreRequestsHint, hint } = singleLaunchHint({
      gap: interval.estimate - logThreshold,
      sd: equivalentSd(unwidened, look.n, look.confidence),
      confidence: look.confidence,
      launchNoise: o.launchNoise,
      n: look.n,
      unit: 'paired requests per arm',
    }))
    if (moreRequestsHint === null && Math.abs(interval.estimate - logThreshold) > 0 && launchVariance > 0) {
      warnings.push(launchNoiseFloorWarning({ launchNoise: o.launchNoise, threshold }))
    }
  }
  return {
    gate: o.gate,
    outcome,
    kind: 'superiority',
    metric,
    effect: logEffect(
      interval,
      'ratio',
      look.confidence,
      winMethod({
        ...(estimator === 'hodges-lehmann'
          ? { estimator, paired: look.n, exact: look.n <= EXACT_SIGNED_RANK_MAX_N }
          : { estimator, paired: look.n, resamples: o.resamples, seed: o.seed }),
        launchNoise: o.launchNoise,
        look: design === null ? null : { position: look.position, planned },
      }),
    ),
    samples,
    rule,
    moreRequestsHint,
    decideHint: hint,
    warnings,
  }
}

/** The interval of the paired log-ratios' centre by the chosen estimator, before any launch-noise floor. */
function requestInterval(estimator: WinEstimator, logRatios: Float64Array, confidence: number, o: ResolvedWinGateOptions): LogInterval {
  if (estimator === 'hodges-lehmann') {
    // Arms that agree on (nearly) every prompt, e.g. a record compared with itself: the signed-rank
    // test drops zero differences and needs two others; the honest interval is the range seen.
    if (logRatios.filter((v) => v !== 0).length < 2) {
      const sorted = Array.from(logRatios).sort((a, b) => a - b)
      return { estimate: sorted[Math.floor((sorted.length - 1) / 2)] ?? 0, low: sorted[0] ?? 0, high: sorted[sorted.length - 1] ?? 0 }
    }
    const r = signedRankTest(logRatios, confidence)
    return { estimate: r.estimate, low: r.low, high: r.high }
  }
  const n = logRatios.length
  const bca = bcaInterval(bootstrapMeanOf(logRatios, { seed: o.seed, resamples: o.resamples }), confidence, { expandForN: n })
  return atLeastStudentT(bca, sampleSd(logRatios), n, confidence)
}

/** The per-request sd an interval implies (its half-width is z·sd/√n), for sizing more requests. */
function equivalentSd(interval: LogInterval, n: number, confidence: number): number {
  const z = normalQuantile(1 - (1 - confidence) / 2)
  return (((interval.high - interval.low) / 2) * Math.sqrt(n)) / z
}

/**
 * Each launch's location of the log rate, with the prompts' own spread removed: every value is
 * centred by its prompt's mean log over all launches of both arms that have it, so a launch's
 * statistic varies only by its requests' noise and its launch effect (the prompts are the same
 * in every launch). The location is the mean of the centred logs (the log of a geometric mean)
 * or, for the Hodges–Lehmann estimator, their pseudo-median, which a stall moves by one rank.
 * Centring is the same for every launch, so the arms stay exchangeable under no effect; for the
 * mean it changes nothing but the constant. Null for a launch without values.
 */
function launchLocations(
  baseline: readonly GateRecord[],
  candidate: readonly GateRecord[],
  value: (r: OkRequest) => number | null,
  estimator: WinEstimator,
): { baseline: (number | null)[]; candidate: (number | null)[] } {
  const logs = [...baseline, ...candidate].map((record) => {
    const out = new Map<number, number>()
    for (const [index, v] of valuesByIndex(record, value)) out.set(index, Math.log(v))
    return out
  })
  const sums = new Map<number, { sum: number; n: number }>()
  for (const launch of logs) {
    for (const [index, v] of launch) {
      const s = sums.get(index) ?? { sum: 0, n: 0 }
      s.sum += v
      s.n++
      sums.set(index, s)
    }
  }
  const locations = logs.map((launch) => {
    if (launch.size === 0) return null
    const centred = new Float64Array(launch.size)
    let i = 0
    for (const [index, v] of launch) {
      const s = sums.get(index) as { sum: number; n: number }
      centred[i++] = v - s.sum / s.n
    }
    return estimator === 'hodges-lehmann' ? pseudoMedian(centred) : centred.reduce((a, v) => a + v, 0) / centred.length
  })
  return { baseline: locations.slice(0, baseline.length), candidate: locations.slice(baseline.length) }
}

/** Above this many values the pseudo-median is taken over an evenly spaced subsample of Walsh averages' inputs. */
const MAX_WALSH_VALUES = 1500

/** The Hodges–Lehmann pseudo-median: the median of all pairwise (Walsh) averages, self-pairs included. */
function pseudoMedian(values: Float64Array): number {
  const sorted = Float64Array.from(values).sort()
  const step = Math.max(1, Math.ceil(sorted.length / MAX_WALSH_VALUES))
  const x = step === 1 ? sorted : sorted.filter((_, i) => i % step === 0)
  const n = x.length
  const walsh = new Float64Array((n * (n + 1)) / 2)
  let k = 0
  for (let i = 0; i < n; i++) for (let j = i; j < n; j++) walsh[k++] = ((x[i] as number) + (x[j] as number)) / 2
  walsh.sort()
  const m = walsh.length
  return m % 2 === 1 ? (walsh[(m - 1) / 2] as number) : ((walsh[m / 2 - 1] as number) + (walsh[m / 2] as number)) / 2
}

function launchLevelWin(
  o: ResolvedWinGateOptions,
  metric: RateMetric,
  baseline: readonly GateRecord[],
  candidate: readonly GateRecord[],
): GateDecision {
  const value = rateOf(metric)
  const threshold = 1 + o.margin
  const estimator = o.estimator ?? DEFAULT_WIN_ESTIMATOR[o.gate]
  const locations = launchLocations(baseline, candidate, value, estimator)
  const b = locations.baseline.filter((v): v is number => v !== null)
  const c = locations.candidate.filter((v): v is number => v !== null)
  const samples = launchSamples(baseline, candidate, value)
  const warnings: string[] = []
  if (o.looks !== null) warnings.push(LOOKS_IGNORED_WARNING)
  if (b.length < baseline.length || c.length < candidate.length) warnings.push(launchesLeftOutWarning(`any ${metric}`))
  const rule = launchWinRule({ metric, confidence: o.confidence, threshold, estimator })
  if (b.length < 2 || c.length < 2) {
    return {
      gate: o.gate,
      outcome: 'inconclusive',
      kind: 'superiority',
      metric,
      effect: {
        estimate: null,
        low: null,
        high: null,
        unit: 'ratio',
        confidence: null,
        method: notEstimableMethod({ kind: 'too-few-launches' }),
      },
      samples,
      rule,
      moreRequestsHint: null,
      decideHint: decideHint([tooFewLaunchesSetting()]),
      warnings: [...warnings, TOO_FEW_LAUNCHES_WARNING],
    }
  }
  const { interval, outcome, hint } = launchLevelVerdict(c, b, o.confidence, threshold)
  return {
    gate: o.gate,
    outcome,
    kind: 'superiority',
    metric,
    effect: logEffect(
      interval,
      'ratio',
      o.confidence,
      launchWinMethod({ candidateLaunches: c.length, baselineLaunches: b.length, df: interval.df, estimator }),
    ),
    samples,
    rule,
    moreRequestsHint: null,
    decideHint: hint,
    warnings,
  }
}
