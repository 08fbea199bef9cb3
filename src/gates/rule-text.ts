/**
 * The words of a decision's `rule`: what the gate tests and which bound decides each outcome,
 * built from the numbers the gate computed. Every rule is recorded in the evidence, so its words
 * change only on purpose.
 */
import { describeSLO } from '../metrics/goodput.ts'
import type { ResolvedSLO } from '../schema/load.ts'
import { formatFixed, formatPercent, formatRatio, formatRounded } from '../number-format.ts'
import type { LatencyMetric, RateMetric } from './gate-options.ts'

/** A rate metric as a rule names it. */
const RATE_WORDS: Record<RateMetric, string> = {
  decodeTokPerS: 'decode tok/s',
  effectivePrefillTokPerS: 'effective prefill tok/s',
  enginePrefillTokPerS: 'engine-reported prefill tok/s',
  throughputTokPerS: 'throughput (output tokens per service second)',
}

/** A latency metric as a rule names it. */
const LATENCY_WORDS: Record<LatencyMetric, string> = {
  ttft: 'TTFT',
  tpot: 'TPOT',
  e2e: 'e2e latency',
  itl: 'ITL',
  timeToFirstOutput: 'time to first output',
}

/** The one-sided level each side of a two-sided interval at `confidence` has: 98% → 99%. */
function oneSided(confidence: number): string {
  return formatPercent(1 - (1 - confidence) / 2)
}

/**
 * A request-level win: the interval of the paired ratio against 1 + margin.
 * @example winRule({ metric: 'decodeTokPerS', confidence: 0.98, threshold: 1.05 })
 */
export function winRule(p: { metric: RateMetric; confidence: number; threshold: number }): string {
  const threshold = formatRatio(p.threshold)
  return (
    `pass if the lower bound of the ${formatPercent(p.confidence)} interval of candidate/baseline ${RATE_WORDS[p.metric]} ` +
    `(a one-sided ${oneSided(p.confidence)} bound) exceeds ${threshold}; fail if its upper bound is below ${threshold}; ` +
    'otherwise inconclusive'
  )
}

/** The looks of a group-sequential win gate, appended to its rule. */
export interface SequentialRuleFacts {
  /** The plan's request counts at the looks, the last the planned total. */
  lookCounts: readonly number[]
  /** The overall two-sided confidence the looks spend. */
  confidence: number
  /** Whether a look was decisive. */
  decided: boolean
  /** 1-based place of the look judged, of `planned`. */
  position: number
  planned: number
  /** Paired requests judged at that look. */
  paired: number
}

/** The sequential clause of a win rule, starting with `; `. */
export function sequentialRuleClause(p: SequentialRuleFacts): string {
  const alpha = (1 - p.confidence) / 2
  return (
    `; looks at ${p.lookCounts.join(', ')} requests of the plan with ${formatPercent(alpha)} per side spent by a ` +
    `Pocock-type Lan–DeMets function (${formatPercent(p.confidence)} overall); ` +
    `${p.decided ? 'decided at' : 'undecided after'} look ${p.position} of ${p.planned} (${p.paired} paired requests)`
  )
}

/** A launch-level win: the t-interval over per-launch locations against 1 + margin. */
export function launchWinRule(p: {
  metric: RateMetric
  confidence: number
  threshold: number
  estimator: 'geometric-mean' | 'hodges-lehmann'
}): string {
  const threshold = formatRatio(p.threshold)
  const location = p.estimator === 'hodges-lehmann' ? 'pseudo-medians' : 'geometric means'
  return (
    `launch level: pass if the lower bound of the ${formatPercent(p.confidence)} t-interval over launches of candidate/baseline ` +
    `${RATE_WORDS[p.metric]} (ratio over launches of the per-launch ${location}) exceeds ${threshold}; ` +
    `fail if its upper bound is below ${threshold}; otherwise inconclusive`
  )
}

/** What a latency rule reads of the gate's options: exactly one of `notWorseThanPct` and `atMostMs`. */
export interface HoldLatencyRuleFacts {
  metric: LatencyMetric
  percentile: number
  confidence: number
  notWorseThanPct?: number | undefined
  atMostMs?: number | undefined
  /** Judged on per-launch percentiles (repeated launches). */
  launchLevel: boolean
}

/** A non-regression on a latency percentile, relative to the baseline or against a bound in ms. */
export function holdLatencyRule(p: HoldLatencyRuleFacts): string {
  const prefix = p.launchLevel ? 'launch level (geometric mean of per-launch percentiles): ' : ''
  const words = `${LATENCY_WORDS[p.metric]} p${p.percentile}`
  const level = formatPercent(p.confidence)
  const side = oneSided(p.confidence)
  if (p.notWorseThanPct !== undefined) {
    const tolerance = formatRatio(1 + p.notWorseThanPct / 100)
    return (
      `${prefix}fail if the lower bound of the ${level} interval of candidate/baseline ${words} (a one-sided ${side} bound) ` +
      `exceeds ${tolerance} (a regression beyond ${p.notWorseThanPct}%); pass if its upper bound is at most ${tolerance}; ` +
      'otherwise inconclusive, which passes with a warning'
    )
  }
  return (
    `${prefix}fail if the lower bound of the ${level} interval of the candidate's ${words} (a one-sided ${side} bound) ` +
    `exceeds ${p.atMostMs} ms; pass if its upper bound is at most ${p.atMostMs} ms; otherwise inconclusive, which passes with a warning`
  )
}

/** An SLO: the Wilson interval of the good share against the required share. */
export function sloRule(p: { slo: ResolvedSLO; percentile: number; confidence: number }): string {
  const required = formatFixed(p.percentile / 100, 3)
  return (
    `pass if the lower bound of the ${formatPercent(p.confidence)} Wilson interval of the share of requests meeting ` +
    `${describeSLO(p.slo)} (a one-sided ${oneSided(p.confidence)} bound) is at least ${required}; ` +
    `fail if its upper bound is below ${required}; otherwise inconclusive, which fails: the SLO must be shown met`
  )
}

/** An accuracy gap: McNemar and Newcombe's interval against a drop of `points`; the output length only warns. */
export function accuracyGapRule(p: { confidence: number; points: number; outputLengthPct: number }): string {
  return (
    `fail if the candidate is worse with exact McNemar p < ${formatRounded(1 - p.confidence, 4)} and the upper bound of the ` +
    `${formatPercent(p.confidence)} interval of candidate − baseline accuracy (a one-sided ${oneSided(p.confidence)} bound, ` +
    `Newcombe's paired method) is below −${p.points} points; pass if its lower bound is above −${p.points} points; ` +
    `otherwise inconclusive, which passes with a warning; a mean output-length gap of ${p.outputLengthPct}% or more is a warning only`
  )
}

/** A capacity comparison: the candidate's bracket against (1 + by) × the baseline's. */
export function sustainRule(p: { by: number }): string {
  const factor = formatRatio(1 + p.by)
  return (
    `pass if the candidate's bracket low (the highest value shown to meet the SLO) is at least ${factor} × the baseline's ` +
    `bracket high; fail if the candidate's bracket high is at most ${factor} × the baseline's bracket low; ` +
    'otherwise inconclusive (the brackets overlap), which fails'
  )
}

/** The Holm step a decision was taken at, appended to its rule. */
export interface HolmRuleFacts {
  /** Gates in the family. */
  gates: number
  familyConfidence: number
  /** Whether the round decided any gate (else the rest stay inconclusive at its level). */
  decided: boolean
  step: number
  /** Gates still open at this step. */
  open: number
  /** The two-sided confidence every open gate was decided at. */
  confidence: number
}

/** The Holm clause of a rule, starting with `; `. */
export function holmRuleClause(p: HolmRuleFacts): string {
  return (
    `; Holm-adjusted across ${p.gates} gates (family ${formatPercent(p.familyConfidence)}): ` +
    `${p.decided ? 'decided' : 'undecided'} at step ${p.step}, ${p.open} gate(s) open, confidence ${formatPercent(p.confidence)}`
  )
}

/** Appended to a win rule when the candidate failed requests the baseline completed. */
export function candidateFailureRuleClause(): string {
  return '; a request that failed on the candidate only counts as a loss, so the gate cannot pass while there is one'
}

/** The accuracy rule when questions repeat: the question, not the request, is the unit. */
export function accuracyGapClusterRule(p: { confidence: number; points: number }): string {
  return (
    `fail if the upper bound of the ${formatPercent(p.confidence)} interval of candidate − baseline accuracy over distinct questions ` +
    `(a one-sided ${oneSided(p.confidence)} bound; each question's accuracy its share right over its requests) is below ` +
    `−${p.points} points; pass if its lower bound is above −${p.points} points; otherwise inconclusive, which passes with a warning`
  )
}

const SERVICE_RULE_WORDS: Record<'outputThroughputTokPerS' | 'requestRateReqPerS', string> = {
  outputThroughputTokPerS: 'aggregate output tok/s of the cell',
  requestRateReqPerS: 'completed requests per second of the cell',
}

/** A single-launch service-level win: the interval of the cells' figure ratio against 1 + margin. */
export function serviceWinRule(p: {
  metric: 'outputThroughputTokPerS' | 'requestRateReqPerS'
  confidence: number
  threshold: number
}): string {
  const threshold = formatRatio(p.threshold)
  return (
    `pass if the lower bound of the ${formatPercent(p.confidence)} interval of candidate/baseline ${SERVICE_RULE_WORDS[p.metric]} ` +
    `(a one-sided ${oneSided(p.confidence)} bound) exceeds ${threshold}; fail if its upper bound is below ${threshold}; ` +
    'otherwise inconclusive'
  )
}

/** A launch-level service-level win: a t-interval over per-launch figures against 1 + margin. */
export function serviceLaunchRule(p: {
  metric: 'outputThroughputTokPerS' | 'requestRateReqPerS'
  confidence: number
  threshold: number
}): string {
  const threshold = formatRatio(p.threshold)
  return (
    `launch level: pass if the lower bound of the ${formatPercent(p.confidence)} t-interval over launches of candidate/baseline ` +
    `${SERVICE_RULE_WORDS[p.metric]} (ratio of the geometric means over launches) exceeds ${threshold}; ` +
    `fail if its upper bound is below ${threshold}; otherwise inconclusive`
  )
}
