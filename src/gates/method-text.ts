/**
 * The words of a decision's `effect.method`: the estimator, its interval and what it was
 * computed over, built from the numbers the gate computed. Recorded in the evidence beside the
 * effect, so a reader can tell how the interval was made.
 */
import type { CapacitySearch } from '../schema/capacity-record.ts'
import { formatByMagnitude, formatPercent, formatSeconds } from '../number-format.ts'

/** The launch-noise clause of a method, starting with `; `, or an empty string when there is no floor. */
function launchNoiseClause(launchNoise: number): string {
  return launchNoise > 0 ? `; launch noise ${formatPercent(launchNoise)} per launch added in quadrature` : ''
}

/** Why a gate has no effect to report. */
export type NotEstimable =
  | { kind: 'too-few-pairs' }
  | { kind: 'too-few-launches' }
  | { kind: 'no-scored-pairs' }
  | { kind: 'too-few-candidate-requests'; requests: number; field: string }
  | { kind: 'too-few-requests'; field: string; baseline: number; candidate: number }
  | { kind: 'zero-percentile' }

/** The reason a gate has no effect, in words. */
export function notEstimableReason(r: NotEstimable): string {
  switch (r.kind) {
    case 'too-few-pairs':
      return 'too few paired requests'
    case 'too-few-launches':
      return 'fewer than two launches with values per arm'
    case 'no-scored-pairs':
      return 'no question scored on both arms'
    case 'too-few-candidate-requests':
      return `only ${r.requests} candidate request(s) with ${r.field}`
    case 'too-few-requests':
      return `too few requests with ${r.field} (${r.baseline} baseline, ${r.candidate} candidate)`
    case 'zero-percentile':
      return 'a percentile is 0 or missing'
  }
}

/** The method of a decision without an effect. */
export function notEstimableMethod(r: NotEstimable): string {
  return `not estimable: ${notEstimableReason(r)}`
}

/** How a request-level win gate estimated the centre of the paired log-ratios. */
export type WinEstimate =
  | { estimator: 'geometric-mean'; paired: number; resamples: number; seed: number }
  | { estimator: 'hodges-lehmann'; paired: number; exact: boolean }

/** A request-level win gate's method, with its launch-noise floor and, when sequential, the look it stopped at. */
export function winMethod(p: WinEstimate & { launchNoise: number; look: { position: number; planned: number } | null }): string {
  const estimate =
    p.estimator === 'geometric-mean'
      ? `geometric mean of ${p.paired} paired ratios (mean log-ratio), BCa bootstrap (${p.resamples} resamples, seed ${p.seed}) ` +
        "expanded for small samples, each side at least the Student t interval's"
      : `Hodges–Lehmann pseudo-median of ${p.paired} paired log-ratios, Wilcoxon signed-rank interval ` +
        `(${p.exact ? 'exact' : 'normal approximation'}; robust to stalls on one arm)`
  const look = p.look === null ? '' : `; group-sequential look ${p.look.position} of ${p.look.planned}`
  return `${estimate}${launchNoiseClause(p.launchNoise)}${look}`
}

/** The t-interval over launches, as launch-level methods state it. */
function welchOverLaunches(p: { candidateLaunches: number; baselineLaunches: number; df: number }): string {
  const df = p.candidateLaunches === p.baselineLaunches ? `pooled df ${p.df}, equal launches per arm` : `Welch df ${p.df.toFixed(1)}`
  return `t-interval of the mean log over ${p.candidateLaunches} candidate and ${p.baselineLaunches} baseline launches (${df})`
}

/** A launch-level win gate's method: per-launch locations of the prompt-centred logs, a t-interval over launches. */
export function launchWinMethod(p: {
  candidateLaunches: number
  baselineLaunches: number
  df: number
  estimator: 'geometric-mean' | 'hodges-lehmann'
}): string {
  const location = p.estimator === 'hodges-lehmann' ? 'Hodges–Lehmann pseudo-medians' : 'means'
  return `launch level: per-launch ${location} of the log rate, each prompt centred on its mean over all launches; ${welchOverLaunches(p)}`
}

/** The requests a latency percentile's bootstrap resampled. */
export type HoldLatencySample =
  { kind: 'candidate-only' } | { kind: 'paired'; pairs: number } | { kind: 'independent'; candidate: number; baseline: number }

function holdSampleText(s: HoldLatencySample): string {
  switch (s.kind) {
    case 'candidate-only':
      return 'candidate only'
    case 'paired':
      return `ratio of percentiles over ${s.pairs} paired requests (pairs resampled together)`
    case 'independent':
      return `ratio of percentiles of ${s.candidate} candidate and ${s.baseline} baseline requests (independent)`
  }
}

/** A request-level latency gate's method; `clustered` when whole requests were resampled for their gaps (ITL). */
export function holdLatencyMethod(p: {
  sample: HoldLatencySample
  percentile: number
  resamples: number
  seed: number
  clustered: boolean
  launchNoise: number
}): string {
  return (
    `${holdSampleText(p.sample)}, nearest-rank p${p.percentile}, BCa bootstrap (${p.resamples} resamples, seed ${p.seed}), ` +
    `each side at least the percentile interval's${p.clustered ? ' over whole requests (clusters of gaps)' : ''}` +
    launchNoiseClause(p.launchNoise)
  )
}

/** A launch-level latency gate's method; `baselineLaunches` null for a bound in ms (one sample). */
export function launchHoldLatencyMethod(p: {
  percentile: number
  candidateLaunches: number
  baselineLaunches: number | null
  df: number
}): string {
  const interval =
    p.baselineLaunches === null
      ? `t-interval of the mean log over ${p.candidateLaunches} candidate launches (df ${p.df.toFixed(1)})`
      : welchOverLaunches({ candidateLaunches: p.candidateLaunches, baselineLaunches: p.baselineLaunches, df: p.df })
  return `launch level: per-launch nearest-rank p${p.percentile}, ${interval}`
}

/** An SLO gate's method; the goodput clause only when the records have a wall clock (null: unknown). */
export function sloMethod(p: { good: number; samples: number; wallClockMs: number | null; goodReqPerS: number | null }): string {
  const goodput =
    p.goodReqPerS === null || p.wallClockMs === null
      ? ''
      : ` over ${formatSeconds(p.wallClockMs, 2)} of wall clock: ${p.goodReqPerS.toFixed(2)} good req/s`
  return `Wilson score interval of ${p.good} good of ${p.samples} measured request(s)${goodput}`
}

/** An accuracy gate's method: the discordant questions, Newcombe's interval, McNemar's p. */
export function accuracyGapMethod(p: { questions: number; candidateOnly: number; baselineOnly: number; p: number }): string {
  return (
    `paired difference over ${p.questions} questions (${p.candidateOnly} right on the candidate only, ` +
    `${p.baselineOnly} on the baseline only): Newcombe's hybrid score interval (method 10), exact McNemar p = ${p.p.toPrecision(3)}`
  )
}

/** A capacity bracket [low, high) with open ends made explicit (0 and ∞), with how its search ended. */
export interface BracketFacts {
  low: number
  high: number
  axis: CapacitySearch['axis']
  status: CapacitySearch['status']
  probes: number
}

/**
 * A capacity bracket in words.
 * @example bracketText({ low: 48, high: 52, axis: 'rate', status: 'bracketed', probes: 3 })
 * // '[48.00, 52.00) req/s (bracketed, 3 probes)'
 */
export function bracketText(b: BracketFacts): string {
  const unit = b.axis === 'rate' ? ' req/s' : ' streams'
  const low = b.low === 0 ? '0' : b.low.toFixed(2)
  const high = Number.isFinite(b.high) ? b.high.toFixed(2) : '∞'
  return `[${low}, ${high})${unit} (${b.status}, ${b.probes} probes)`
}

/** A capacity comparison's method: both brackets, the estimate's construction, each probe's interval. */
export function sustainMethod(p: { candidate: BracketFacts; baseline: BracketFacts; probeConfidence: number }): string {
  return (
    `ratio of capacity brackets: candidate ${bracketText(p.candidate)} over baseline ${bracketText(p.baseline)}; ` +
    'estimate the ratio of geometric midpoints, bounds low/high and high/low; ' +
    `each probe decided by a ${formatPercent(p.probeConfidence)} Wilson interval`
  )
}

/** The accuracy method when questions repeat: per-question differences, bootstrapped over questions. */
export function accuracyGapClusterMethod(p: { questions: number; requests: number }): string {
  return (
    `mean of per-question accuracy differences over ${p.questions} distinct questions (${p.requests} paired requests), ` +
    'BCa bootstrap over questions (2000 resamples, seed 1), at least Student t'
  )
}

/** A service metric as methods and rules name it. */
const SERVICE_WORDS: Record<'outputThroughputTokPerS' | 'requestRateReqPerS', string> = {
  outputThroughputTokPerS: "aggregate output tok/s (the cell's completion tokens over its wall clock)",
  requestRateReqPerS: "request rate (the cell's completed requests over its wall clock)",
}

/** A single-launch service-level win: the measured ratio with the ratio estimator's bootstrap spread. */
export function serviceWinMethod(p: {
  metric: 'outputThroughputTokPerS' | 'requestRateReqPerS'
  baseline: number
  candidate: number
  paired: number
  resamples: number
  seed: number
  launchNoise: number
}): string {
  return (
    `ratio of the cells' ${SERVICE_WORDS[p.metric]}, ${formatByMagnitude(p.candidate)} / ${formatByMagnitude(p.baseline)}; ` +
    `sampling spread from a percentile bootstrap of Σ output / Σ e2e over ${p.paired} paired requests ` +
    `(${p.resamples} resamples, seed ${p.seed}, expanded for small samples)${launchNoiseClause(p.launchNoise)}`
  )
}

/** A launch-level service-level win: a t-interval over the per-launch log figures. */
export function serviceLaunchMethod(p: {
  metric: 'outputThroughputTokPerS' | 'requestRateReqPerS'
  candidateLaunches: number
  baselineLaunches: number
  df: number
}): string {
  return `launch level: each launch's ${SERVICE_WORDS[p.metric]}; ${welchOverLaunches(p)}`
}

/** How an accuracy gate's per-arm intervals were computed: per paired request, or per distinct question. */
export function accuracyArmsMethod(p: { clustered: boolean; confidence: number }): string {
  return p.clustered
    ? `${formatPercent(p.confidence)} Wilson interval over distinct questions, each question's share right counted as its ` +
        'outcome (conservative: a share varies less than a right-or-wrong answer)'
    : `${formatPercent(p.confidence)} Wilson interval of right answers over the paired questions`
}
