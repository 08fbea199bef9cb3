import { formatFixedPercent, formatInUnit, formatPercent, formatRounded } from '../number-format.ts'
import type { AccuracyDetail, ArmAccuracy, GateDecision } from '../schema/gate.ts'

/** The samples of a decision in words: paired requests, one arm's requests, or each arm's count. */
export function samplesText(s: GateDecision['samples']): string {
  if (s.paired > 0) return `${s.paired} paired (${s.baseline}/${s.candidate})`
  if (s.baseline === 0) return `${s.candidate} samples`
  return `baseline ${s.baseline}, candidate ${s.candidate}, none paired`
}

/** One line for annotations and evidence: the verdict, the effect with its interval, the samples. */
export function verdictLine(d: GateDecision): string {
  const e = d.effect
  const bounds = e.low === null && e.high === null ? '' : ` [${formatInUnit(e.low, e.unit)}, ${formatInUnit(e.high, e.unit)}]`
  const ci = e.confidence === null ? bounds : `${bounds} at ${formatFixedPercent(e.confidence, 0)}`
  return `${d.gate} ${d.outcome.toUpperCase()}: ${d.metric} ${formatInUnit(e.estimate, e.unit)}${ci}, ${samplesText(d.samples)}`
}

/** One arm's accuracy in words: `80.0% [72.7%, 85.8%] (160/200 questions)`. */
function armAccuracyText(a: ArmAccuracy, unit: AccuracyDetail['unit']): string {
  const units = unit === 'question' ? 'distinct questions' : 'questions'
  return `${formatFixedPercent(a.rate)} [${formatFixedPercent(a.low)}, ${formatFixedPercent(a.high)}] (${formatRounded(a.correct, 2)}/${a.scored} ${units})`
}

/**
 * Each arm's accuracy with its interval, for an accuracy gate's matcher message and summaries.
 * @example accuracyArmsText(d.accuracy)
 * // 'baseline 80.0% [72.7%, 85.8%] (160/200 questions), candidate 60.0% [51.8%, 67.7%] (120/200 questions), 98% Wilson'
 */
export function accuracyArmsText(a: AccuracyDetail): string {
  return (
    `baseline ${armAccuracyText(a.baseline, a.unit)}, candidate ${armAccuracyText(a.candidate, a.unit)}, ` +
    `${formatPercent(a.confidence)} Wilson${a.unit === 'question' ? ' over distinct questions' : ''}`
  )
}

/**
 * What would decide an undecided decision, for a finding or a reason: its `decideHint` text, or
 * for evidence written before it was kept, its `moreRequestsHint` in words; '' when it has neither.
 * @example decideText(d) // 'to decide it, set requests: 412 (about 412 paired requests per arm would likely decide it …)'
 */
export function decideText(d: Pick<GateDecision, 'decideHint' | 'moreRequestsHint' | 'samples'>): string {
  if (d.decideHint !== null) return d.decideHint.text
  if (d.moreRequestsHint === null) return ''
  return `about ${d.moreRequestsHint} ${d.samples.baseline === 0 ? 'requests' : 'paired requests per arm'} would likely decide it`
}
