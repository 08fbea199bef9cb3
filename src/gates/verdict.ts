import { formatFixedPercent, formatInUnit } from '../number-format.ts'
import type { GateDecision } from '../schema/gate.ts'

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
