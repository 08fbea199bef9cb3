/**
 * The words of a decision's `warnings`: what a reader should know before trusting the outcome
 * (left-out requests, a missing launch-noise floor, an interval that straddles its bound), built
 * from the numbers the gate computed.
 */
import { formatFixed, formatFixedPercent, formatPercent, formatRatio } from '../number-format.ts'
import { type BracketFacts, bracketText, type NotEstimable, notEstimableReason } from './method-text.ts'

/** The warning a single-launch gate carries when launch noise is off; none when it is on. */
export function launchNoiseWarnings(launchNoise: number): string[] {
  return launchNoise > 0
    ? []
    : [
        'launchNoise is 0: the interval covers request-to-request noise within one launch per arm only; ' +
          'if launches differ (2% is common), it overstates certainty. Repeat launches or set launchNoise.',
      ]
}

/** Requests with a value on one arm only, left out of the pairing. */
export function unpairedWarning(p: { unpaired: number; field: string }): string {
  return `${p.unpaired} request(s) with ${p.field} on one arm only were left out of the pairing`
}

/** Where a sequential win gate ran short of paired requests: overall, before its first look, or at every look taken. */
export type PairShortfall = { kind: 'overall' } | { kind: 'before-first-look'; firstLook: number } | { kind: 'at-looks' }

/** Too few paired requests for a win gate's interval. */
export function tooFewPairsWarning(p: { paired: number; field: string; min: number; shortfall: PairShortfall }): string {
  const where =
    p.shortfall.kind === 'before-first-look'
      ? ` and the records end before the design's first look at ${p.shortfall.firstLook}`
      : p.shortfall.kind === 'at-looks'
        ? ' at the looks the records reach'
        : ''
  return `only ${p.paired} paired request(s) with ${p.field}${where}; at least ${p.min} are needed for an interval`
}

/** The launch-noise floor alone is wider than the gap to the threshold: only repeated launches can decide. */
export function launchNoiseFloorWarning(p: { launchNoise: number; threshold: number }): string {
  return (
    `the launch-noise floor (${formatPercent(p.launchNoise)} per launch) alone is wider than the gap to ${formatRatio(p.threshold)}: ` +
    'more requests cannot decide this; repeat launches on both arms (A B B A) for the launch-level test'
  )
}

/** Sequential looks given to a launch-level gate. */
export const LOOKS_IGNORED_WARNING = 'looks are ignored at the launch level: the unit of the test is a launch, not a request'

/** A launch-level test short of launches. */
export const TOO_FEW_LAUNCHES_WARNING = 'the launch-level test needs at least two launches with values per arm'

/** Launches left out of a launch-level test: `what` they lacked, e.g. `any decodeTokPerS`. */
export function launchesLeftOutWarning(what: string): string {
  return `launches without ${what} were left out`
}

/** A p99 over fewer samples than it needs to be more than the maximum. */
export function descriptiveP99Warning(p: { samples: number; min: number }): string {
  return (
    `p99 over ${p.samples} < ${p.min} samples is descriptive only (it is the max or near it): ` + 'the interval is not a dependable bound'
  )
}

/** A latency gate's interval (ratio, or ms) that straddles its tolerance or bound. */
export function holdInconclusiveWarning(p: {
  confidence: number
  low: number
  high: number
  unit: 'ratio' | 'ms'
  bound: number
  /** What would settle it: more requests, or (the launch-noise floor dominating) only more launches. */
  settle?: 'requests' | 'launches'
}): string {
  const show = (v: number) => (p.unit === 'ratio' ? formatRatio(v) : `${v.toFixed(1)} ms`)
  const what = p.unit === 'ratio' ? `the tolerance ${formatRatio(p.bound)}` : `the bound ${p.bound} ms`
  const settle = p.settle === 'launches' ? 'only more launches would settle it' : 'more requests would settle it'
  return `inconclusive: the ${formatPercent(p.confidence)} interval [${show(p.low)}, ${show(p.high)}] straddles ${what}; passes with this annotation, ${settle}`
}

/** A non-regression gate without an effect, which passes. */
export function notEstimableWarning(r: NotEstimable): string {
  return `not estimable: ${notEstimableReason(r)}; passes with this annotation`
}

/** Arms that share too few prompts to pair, resampled independently instead. */
export const UNPAIRABLE_ARMS_WARNING = 'the arms share too few prompts to pair: the arms were resampled independently'

/** Launches pooled into one SLO share. */
export function pooledLaunchesWarning(launches: number): string {
  return `${launches} launches pooled: the interval covers request-to-request variation, not launch-to-launch variation`
}

/** Failed requests an SLO gate counted as not good. */
export function failedNotGoodWarning(failed: number): string {
  return `${failed} failed request(s) counted as not good`
}

/** An SLO gate that did not judge harness-limited records; `reasons` one per limited launch. */
export function harnessLimitedWarning(reasons: readonly string[]): string {
  return `not judged: the harness was the bottleneck (${reasons.join(' | ')}), so these latencies are not the engine's`
}

/** An SLO share's interval that straddles the required share. */
export function sloInconclusiveWarning(p: { confidence: number; low: number; high: number; required: number }): string {
  const [low, high, required] = [p.low, p.high, p.required].map((v) => formatFixed(v, 3))
  return `inconclusive: the ${formatPercent(p.confidence)} interval [${low}, ${high}] straddles ${required}`
}

/** Arms with different launch counts: only the first `paired` of each were paired. */
export function unevenLaunchesWarning(p: { baseline: number; candidate: number; paired: number }): string {
  return `${p.baseline} baseline and ${p.candidate} candidate launches: only the first ${p.paired} of each were paired`
}

/** Launches pooled into one accuracy table. */
export function pooledQuestionsWarning(launches: number): string {
  return `${launches} launches per arm pooled: a question asked in every launch counts once per launch`
}

/** Mean completion lengths that differ by at least the gate's threshold. */
export function outputLengthWarning(p: {
  /** candidate/baseline − 1 of the total completion tokens. */
  gap: number
  candidateMeanTokens: number
  baselineMeanTokens: number
  questions: number
  thresholdPct: number
}): string {
  return (
    `mean output length differs by ${formatFixedPercent(p.gap)} (candidate ${p.candidateMeanTokens.toFixed(1)} ` +
    `vs baseline ${p.baselineMeanTokens.toFixed(1)} completion tokens over ${p.questions} paired questions), ` +
    `at or beyond ${p.thresholdPct}%: review verbosity or truncation`
  )
}

/** An accuracy gate with no question scored on both arms, which passes. */
export const NO_SCORED_PAIRS_WARNING =
  'no question was scored on both arms, so accuracy was not measured: give the cell a dataset workload ' +
  "(workload: { kind: 'dataset', dataset: … }) whose rows have reference answers, or see why every reply failed; the gate fails"

/** An accuracy interval (points) that includes a drop of the gate's size, with the questions that would decide it. */
export function accuracyInconclusiveWarning(p: {
  confidence: number
  low: number
  high: number
  points: number
  p: number | null
  /** The observed candidate − baseline accuracy, points. */
  estimate: number
  /** Questions now: paired requests, or distinct questions when they repeat. */
  questions: number
  /** Whether questions repeat (then more requests on the same ones do not help). */
  clustered: boolean
  /** The questions that would likely decide it; null when none would. */
  questionsNeeded: number | null
}): string {
  const mcnemar = p.p === null ? '' : ` (McNemar p = ${p.p.toPrecision(3)})`
  const unit = p.clustered ? 'distinct questions' : 'questions scored on both arms'
  const now = p.clustered ? `now ${p.questions}; more requests on the same questions do not help` : `now ${p.questions}`
  const settle =
    p.questionsNeeded === null
      ? `the observed ${p.estimate.toFixed(1)} pt sits on the margin (a drop of ${p.points} pt), so no practical number of ${unit} (${now}) would decide it`
      : `about ${p.questionsNeeded.toLocaleString('en-US')} ${unit} (${now}) would likely decide it if the observed ` +
        `${p.estimate.toFixed(1)} pt and its spread held`
  return (
    `inconclusive: the ${formatPercent(p.confidence)} interval [${p.low.toFixed(1)}, ${p.high.toFixed(1)}] points ` +
    `includes a drop of ${p.points} points or more${mcnemar}; ${settle}; passes with this annotation`
  )
}

/** A candidate confidently more accurate than the baseline: a change worth reviewing, not only "within the gap". */
export function accuracyImprovedWarning(p: { estimate: number; low: number; high: number; confidence: number }): string {
  return (
    `the candidate improved accuracy by ${p.estimate.toFixed(1)} pt [${p.low.toFixed(1)}, ${p.high.toFixed(1)}] ` +
    `(${formatPercent(p.confidence)} interval above 0): the arms do not answer alike; review what differs ` +
    '(sampling, chat template, quantization) before reading their speed as like for like'
  )
}

/** A warning of one arm's capacity search, passed on. */
export function searchWarning(arm: 'candidate' | 'baseline', warning: string): string {
  return `${arm} search: ${warning}`
}

/** A capacity search that did not bracket its capacity to its resolution. */
export function unsettledSearchWarning(p: { arm: 'candidate' | 'baseline'; bracket: BracketFacts; openEnded: boolean }): string {
  return (
    `${p.arm} search ${p.bracket.status}: its bracket ${bracketText(p.bracket)} is ` +
    (p.openEnded ? 'open at one end' : 'wider than its resolution')
  )
}

/** Capacity brackets that overlap, so the comparison is undecided. */
export function bracketsOverlapWarning(p: { candidate: BracketFacts; baseline: BracketFacts }): string {
  return (
    `inconclusive: the brackets overlap (candidate ${bracketText(p.candidate)}, baseline ${bracketText(p.baseline)}); ` +
    'narrow them with more probes or a smaller resolution'
  )
}

/** The candidate failed requests that the baseline completed: they are losses, not left out. */
export function candidateFailureWarning(count: number, first: { index: number; code: string }): string {
  const requests = `${count} request${count === 1 ? '' : 's'}`
  return `the candidate failed ${requests} the baseline completed (first: request ${first.index}, ${first.code}): counted as losses, so no win is claimed`
}

/** More requests than distinct questions: they are judged as clusters, not as independent pairs. */
export function repeatedQuestionsWarning(p: { questions: number; requests: number }): string {
  return (
    `${p.requests} paired requests asked only ${p.questions} distinct questions: judged per question, ` +
    'not as independent pairs; more distinct questions, not more requests, narrow the interval'
  )
}
