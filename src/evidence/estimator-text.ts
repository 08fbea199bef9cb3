import { formatPercent } from '../number-format.ts'
import type { GateDecision } from '../schema/gate.ts'
import type { NoiseFloor } from '../schema/noise.ts'

/**
 * How a gate estimated its Δ, short: the first clause of its effect's method without asides, so a
 * table can say which Δ it shows beside a chart's (the heatmaps and bars compare the arms' p50s).
 * @example estimatorText(d) // 'geometric mean of 64 paired ratios'
 * // (its method: 'geometric mean of 64 paired ratios (mean log-ratio), BCa bootstrap …')
 */
export function estimatorText(d: GateDecision): string {
  const plain = d.effect.method.replace(/\s*\([^()]*\)/g, '')
  const estimator = (plain.split(/[,;] /)[0] ?? plain).trim()
  return d.noiseFloor === undefined ? estimator : `${estimator}; ${noiseFloorText(d.noiseFloor)}`
}

/**
 * Where a gate's launch-noise floor came from, short, for a table cell.
 * @example noiseFloorText(floor) // 'launch noise 3.1% (measured 2026-12-01, 5 launches)'
 */
export function noiseFloorText(floor: NoiseFloor): string {
  const value = `launch noise ${formatPercent(floor.value)}`
  switch (floor.source) {
    case 'option':
      return `${value} (spec option)`
    case 'measured':
      return `${value} (measured ${floor.measured?.measuredAt.slice(0, 10) ?? '?'}, ${floor.measured?.launches ?? '?'} launches)`
    case 'history':
      return `${value} (${floor.history?.runs ?? '?'} runs of main)`
    case 'assumed':
      return `${value} (assumed: run servegate calibrate)`
  }
}
