/**
 * A decision's decisive figure in one line, as the terminal and the UI annotation show it: the
 * metric, the effect with its interval, the bound it had to clear, and the outcome, e.g.
 * `toWinDecode c4: decode +94.6% [+71%, +121%] > +5%: pass (98% interval, 128 paired (128/128))`.
 * Pure: the matchers (in the workers) and the reporter (in vitest's main process) both use it.
 */
import { formatFixedPercent, formatSignificant } from '../number-format.ts'
import type { GateDecision } from '../schema/gate.ts'
import type { DecisionMeta } from '../schema/task-meta.ts'
import { expectedText } from './expected-text.ts'
import { samplesText } from './verdict.ts'

/** A metric as a figure line names it, by the field the decision names. */
const METRIC_WORDS: Record<string, string> = {
  decodeTokPerS: 'decode',
  effectivePrefillTokPerS: 'prefill',
  enginePrefillTokPerS: 'engine prefill',
  throughputTokPerS: 'throughput',
  outputThroughputTokPerS: 'aggregate tok/s',
  requestRateReqPerS: 'request rate',
  ttftMs: 'TTFT',
  tpotMs: 'TPOT',
  e2eMs: 'e2e',
  itlMs: 'ITL',
  timeToFirstOutputMs: 'time to first output',
}

/** The gates whose metric is a sentence (an SLO, a capacity, a cache share): named by what they count. */
const GATE_WORDS: Partial<Record<GateDecision['gate'], string>> = {
  toMeetSLO: 'good share',
  'capacity probe': 'good share',
  toSustainMoreThan: 'capacity',
  toReuseCache: 'cached share',
}

function metricWords(d: GateDecision): string {
  const byGate = GATE_WORDS[d.gate]
  if (byGate !== undefined) return byGate
  const [field = '', ...rest] = d.metric.split(' ')
  return [METRIC_WORDS[field] ?? field, ...rest].join(' ')
}

/** A change as a signed percentage: `+94.6%`, `-3.1%`, `0%`. */
function signedPercent(fraction: number): string {
  const pct = formatSignificant(fraction * 100)
  return fraction > 0 ? `+${pct}%` : `${pct}%`
}

/** A figure in a decision's unit: a ratio as the change it is, a difference with its sign. */
function figure(value: number | null, unit: GateDecision['effect']['unit']): string {
  if (value === null) return '—'
  if (unit === 'ratio') return signedPercent(value - 1)
  if (unit === 'fraction') return formatFixedPercent(value)
  if (unit === 'points') return `${value > 0 ? '+' : ''}${value.toFixed(1)} pt`
  if (unit === 'ms') return `${formatSignificant(value)} ms`
  return String(value)
}

const numberOption = (options: Record<string, unknown>, key: string): number | null =>
  typeof options[key] === 'number' ? options[key] : null

/** The bound the interval had to clear, from the gate's resolved options; null when none applies. */
function bound(d: GateDecision, options: Record<string, unknown>): string | null {
  switch (d.gate) {
    case 'toWinDecode':
    case 'toWinPrefill':
    case 'toWinThroughput':
      return `> ${signedPercent(numberOption(options, 'margin') ?? 0)}`
    case 'toHoldLatency': {
      const pct = numberOption(options, 'notWorseThanPct')
      const ms = numberOption(options, 'atMostMs')
      return pct !== null ? `≤ ${signedPercent(pct / 100)}` : ms !== null ? `≤ ${formatSignificant(ms)} ms` : null
    }
    case 'toStayWithinAccuracyGap': {
      const points = numberOption(options, 'points')
      return points === null ? null : `> -${points} pt`
    }
    case 'toMeetSLO': {
      const percentile = numberOption(options, 'percentile')
      return percentile === null ? null : `≥ ${formatSignificant(percentile)}%`
    }
    case 'toSustainMoreThan':
      return `≥ ${signedPercent(numberOption(options, 'by') ?? 0)}`
    case 'toReuseCache': {
      const atLeast = numberOption(options, 'atLeast')
      return atLeast === null ? null : `≥ ${formatFixedPercent(atLeast)}`
    }
    case 'capacity probe':
      return null
  }
}

/** The outcome, and for a `.not` assertion whether it held as expected. */
function outcomeText(v: Pick<DecisionMeta, 'decision' | 'passed' | 'isNot'>): string {
  if (!v.isNot) return v.decision.outcome
  return v.passed ? `${v.decision.outcome} (asserted .not)` : `${v.decision.outcome}, ${expectedText(v.decision.gate)}`
}

/**
 * One decision's decisive figure in a line: gate and cell, the metric, the effect and its
 * interval (a ratio as the change it is), the bound it had to clear, the outcome (a held `.not`
 * as expected), then the interval's confidence and the samples.
 * @example figureLine({ cell: 'c4', decision, options: { margin: 0.05 }, passed: true, isNot: false })
 * // 'toWinDecode c4: decode +94.6% [+71%, +121%] > +5%: pass (98% interval, 128 paired (128/128))'
 */
export function figureLine(v: Pick<DecisionMeta, 'cell' | 'decision' | 'options' | 'passed' | 'isNot'>): string {
  const d = v.decision
  const e = d.effect
  const interval = e.low === null && e.high === null ? '' : ` [${figure(e.low, e.unit)}, ${figure(e.high, e.unit)}]`
  const estimate = e.estimate === null ? 'not estimable' : figure(e.estimate, e.unit)
  const clear = bound(d, v.options)
  const confidence = e.confidence === null || interval === '' ? '' : `${formatFixedPercent(e.confidence, 0)} interval, `
  return (
    `${d.gate} ${v.cell}: ${metricWords(d)} ${estimate}${interval}${clear === null ? '' : ` ${clear}`}: ${outcomeText(v)} ` +
    `(${confidence}${samplesText(d.samples)})`
  )
}
