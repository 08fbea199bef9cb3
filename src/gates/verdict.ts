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

/** One line for annotations and evidence: the verdict, the effect with its interval, the samples. */
export function verdictLine(d: GateDecision): string {
  const e = d.effect
  const ci = e.confidence === null ? '' : ` [${fmt(e.low, e.unit)}, ${fmt(e.high, e.unit)}] at ${(e.confidence * 100).toFixed(0)}%`
  return `${d.gate} ${d.outcome.toUpperCase()}: ${d.metric} ${fmt(e.estimate, e.unit)}${ci}, ${d.samples.paired} paired (${d.samples.baseline}/${d.samples.candidate})`
}

