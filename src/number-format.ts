/**
 * How servegate writes numbers in rules, methods, warnings, tables and summary lines: one
 * module, so the same figure reads the same in a matcher message, the board and the CLI.
 * Pure, and imports only a type, so the reporter, the matchers and the CLI can all use it.
 */
import type { GateDecision } from './schema/gate.ts'

/** What every table cell and summary line shows for a value that is absent. */
export const ABSENT = '—'

/**
 * A number rounded to `decimals` places, without trailing zeros.
 * @example formatRounded(0.0200001, 4) // '0.02'
 */
export function formatRounded(value: number, decimals: number): string {
  return String(Number(value.toFixed(decimals)))
}

/**
 * A number with a fixed count of decimals; {@link ABSENT} when null or undefined.
 * @default decimals 1
 * @example formatFixed(312.46) // '312.5'
 */
export function formatFixed(value: number | null | undefined, decimals = 1): string {
  return value === null || value === undefined ? ABSENT : value.toFixed(decimals)
}

/**
 * A number for a table cell: `digits` significant figures, whole when it has more integer
 * digits than that; {@link ABSENT} when null, undefined or not finite.
 * @default digits 3
 * @example formatSignificant(1234.5) // '1235'; formatSignificant(0.012345) // '0.0123'
 */
export function formatSignificant(value: number | null | undefined, digits = 3): string {
  if (value === null || value === undefined || !Number.isFinite(value)) return ABSENT
  if (Math.abs(value) >= 10 ** digits) return Math.round(value).toString()
  return Number(value.toPrecision(digits)).toString()
}

/**
 * A number with decimals by its magnitude: none from 1000, one from 100, two from 1, else
 * three; {@link ABSENT} when null.
 * @example formatByMagnitude(1234.5) // '1235'; formatByMagnitude(12.345) // '12.35'
 */
export function formatByMagnitude(value: number | null): string {
  if (value === null) return ABSENT
  const abs = Math.abs(value)
  return abs >= 1000 ? value.toFixed(0) : abs >= 100 ? value.toFixed(1) : abs >= 1 ? value.toFixed(2) : value.toFixed(3)
}

/**
 * A fraction as a percentage with as many decimals as it needs: above ½ (a confidence) enough
 * to show its tail, otherwise at most two.
 * @example formatPercent(0.95) // '95%'; formatPercent(0.9962) // '99.62%'; formatPercent(0.02) // '2%'
 */
export function formatPercent(fraction: number): string {
  const tail = 1 - fraction
  const decimals = fraction > 0.5 && tail > 0 ? Math.min(8, Math.max(0, Math.ceil(-Math.log10(tail)) - 1)) : 2
  return `${formatRounded(fraction * 100, decimals)}%`
}

/**
 * A fraction as a percentage with a fixed count of decimals; {@link ABSENT} when null.
 * @default decimals 1
 * @example formatFixedPercent(0.9512) // '95.1%'
 */
export function formatFixedPercent(fraction: number | null, decimals = 1): string {
  return fraction === null ? ABSENT : `${(fraction * 100).toFixed(decimals)}%`
}

/**
 * A ratio with three decimals, as gate rules state thresholds.
 * @example formatRatio(1.1) // '1.100'
 */
export function formatRatio(value: number): string {
  return value.toFixed(3)
}

/**
 * Milliseconds as seconds with a fixed count of decimals.
 * @example formatSeconds(4000, 2) // '4.00 s'
 */
export function formatSeconds(ms: number, decimals: number): string {
  return `${(ms / 1000).toFixed(decimals)} s`
}

/**
 * Milliseconds as whole seconds elapsed (rounded down; never negative).
 * @example formatWholeSeconds(45_900) // '45 s'
 */
export function formatWholeSeconds(ms: number): string {
  return `${Math.floor(Math.max(0, ms) / 1000)} s`
}

/**
 * A decision's figure in its unit; {@link ABSENT} when null.
 * @example formatInUnit(1.0523, 'ratio') // '1.052×'; formatInUnit(0.975, 'fraction') // '97.5%'
 */
export function formatInUnit(value: number | null, unit: GateDecision['effect']['unit']): string {
  if (value === null) return ABSENT
  if (unit === 'ratio') return `${formatRatio(value)}×`
  if (unit === 'fraction') return formatFixedPercent(value)
  if (unit === 'points') return `${value.toFixed(1)} pt`
  if (unit === 'ms') return `${value.toFixed(1)} ms`
  return String(value)
}
