/**
 * The trend of main in words: each gated figure of this run beside the runs of main on the same
 * testbed, for the board (Markdown) and the page.
 */
import { formatSignificant } from '../number-format.ts'
import type { EvidenceHistory, HistoryTrend, TrendPoint } from '../schema/evidence.ts'
import type { Testbed } from '../schema/noise.ts'

const LEVELS = '▁▂▃▄▅▆▇█'

/** The trend chart of main's history, drawn only when the evidence has a history with a trend. */
export const TREND_FILE = 'charts/trend-of-main.svg'

/**
 * The testbed in one line: runner label, GPUs, engine, model and cell shape.
 * @example testbedText(t) // 'h100-ci · NVIDIA H100 ×1 · vllm 0.11.0 · Llama-3.1-8B · c8 × 64 requests'
 */
export function testbedText(t: Testbed): string {
  const gpu = t.gpu.model === null ? 'no GPU' : `${t.gpu.model} ×${t.gpu.count}`
  const engine = t.engine.version === null ? t.engine.kind : `${t.engine.kind} ${t.engine.version}`
  const shape = `c${t.cell.concurrency} × ${t.cell.requests} requests${t.cell.maxTokens === null ? '' : `, max ${t.cell.maxTokens} tokens`}`
  return [t.runner ?? 'no runner label', gpu, engine, t.model, shape].join(' · ')
}

/** A point with its 95% interval where known: `61.2 [59.8, 62.6]`. */
function pointText(p: TrendPoint): string {
  const interval = p.low === null || p.high === null ? '' : ` [${formatSignificant(p.low)}, ${formatSignificant(p.high)}]`
  return `${formatSignificant(p.value)}${interval}`
}

/**
 * The runs of main as a sparkline, oldest first, then `▸` and this run's level on the same scale.
 * @example sparkline(trend) // '▃▄▃▅▄▃▄ ▸ █'
 */
function sparkline(trend: Pick<HistoryTrend, 'main' | 'current'>): string {
  const values = [...trend.main, ...(trend.current === null ? [] : [trend.current])].map((p) => Math.log(p.value))
  const low = Math.min(...values)
  const span = Math.max(...values) - low
  const level = (p: TrendPoint) =>
    LEVELS[span === 0 ? 3 : Math.min(LEVELS.length - 1, Math.floor(((Math.log(p.value) - low) / span) * LEVELS.length))] as string
  const main = trend.main.map(level).join('')
  return trend.current === null ? main : `${main} ▸ ${level(trend.current)}`
}

function median(values: readonly number[]): number {
  const s = [...values].sort((a, b) => a - b)
  const mid = Math.floor(s.length / 2)
  return s.length % 2 === 1 ? (s[mid] as number) : ((s[mid - 1] as number) + (s[mid] as number)) / 2
}

/** This run against the median of main's runs, in percent: `+3.1%`. */
function versusMainText(trend: Pick<HistoryTrend, 'main' | 'current'>): string {
  if (trend.current === null || trend.main.length === 0) return '—'
  const change = trend.current.value / median(trend.main.map((p) => p.value)) - 1
  return `${change >= 0 ? '+' : '−'}${Math.abs(change * 100).toFixed(1)}%`
}

/** Whether this run was appended to the history, in one sentence. */
export function appendedText(history: EvidenceHistory): string {
  return history.appended
    ? `This run was appended to the history of main (${history.path}).`
    : `This run was not appended to the history of main (${history.path}): ${history.reason ?? 'no reason recorded'}.`
}

/** The rows of the trend table: cell, metric, testbed, runs, sparkline, latest of main, this run, against main. */
export function trendRows(trends: readonly HistoryTrend[]): string[][] {
  return trends.map((t) => {
    const latest = t.main[t.main.length - 1]
    return [
      t.cell,
      t.metric,
      testbedText(t.testbed),
      String(t.main.length),
      sparkline(t),
      latest === undefined ? '—' : pointText(latest),
      t.current === null ? '—' : pointText(t.current),
      versusMainText(t),
    ]
  })
}

export const TREND_HEAD = [
  'Cell',
  'Metric',
  'Testbed',
  'Runs of main',
  'Main, oldest → latest ▸ this run',
  'Latest of main [95%]',
  'This run [95%]',
  'This run vs main (median)',
] as const
