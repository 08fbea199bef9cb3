import type { GateDecision } from '../schema/gate.ts'

/** A decision's figure in its unit: 1.052×, 97.5%, 1.2 pt, 3.4 ms; — when absent. */
export function fmt(v: number | null, unit: GateDecision['effect']['unit']): string {
  if (v === null) return '—'
  if (unit === 'ratio') return `${v.toFixed(3)}×`
  if (unit === 'fraction') return `${(v * 100).toFixed(1)}%`
  if (unit === 'points') return `${v.toFixed(1)} pt`
  if (unit === 'ms') return `${v.toFixed(1)} ms`
  return String(v)
}

/** The samples of a decision in words: paired requests, one arm's requests, or each arm's count. */
export function samplesText(s: GateDecision['samples']): string {
  if (s.paired > 0) return `${s.paired} paired (${s.baseline}/${s.candidate})`
  if (s.baseline === 0) return `${s.candidate} samples`
  return `baseline ${s.baseline}, candidate ${s.candidate}, none paired`
}

/** One line for annotations and evidence: the verdict, the effect with its interval, the samples. */
export function verdictLine(d: GateDecision): string {
  const e = d.effect
  const bounds = e.low === null && e.high === null ? '' : ` [${fmt(e.low, e.unit)}, ${fmt(e.high, e.unit)}]`
  const ci = e.confidence === null ? bounds : `${bounds} at ${(e.confidence * 100).toFixed(0)}%`
  return `${d.gate} ${d.outcome.toUpperCase()}: ${d.metric} ${fmt(e.estimate, e.unit)}${ci}, ${samplesText(d.samples)}`
}
