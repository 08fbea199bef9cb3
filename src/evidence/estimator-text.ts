import type { GateDecision } from '../schema/gate.ts'

/**
 * How a gate estimated its Δ, short: the first clause of its effect's method without asides, so a
 * table can say which Δ it shows beside a chart's (the heatmaps and bars compare the arms' p50s).
 * @example estimatorText(d) // 'geometric mean of 64 paired ratios'
 * // (its method: 'geometric mean of 64 paired ratios (mean log-ratio), BCa bootstrap …')
 */
export function estimatorText(d: GateDecision): string {
  const plain = d.effect.method.replace(/\s*\([^()]*\)/g, '')
  return (plain.split(/[,;] /)[0] ?? plain).trim()
}
