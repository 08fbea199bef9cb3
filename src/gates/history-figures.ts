import { nearestRank } from '../metrics/distribution.ts'
import { type GateRecord, LATENCY_FIELD, latencyOf, rateOf, valuesByIndex } from './arms.ts'
import { type LatencyMetric, RateMetric, ServiceMetric } from './gate-options.ts'

/** One launch's figure of a gated metric as the history of main keeps it. */
export interface HistoryFigure {
  /** The figure: a geometric mean (rates), a nearest-rank percentile (latencies), the cell's figure (service rates). */
  value: number
  /** The relative standard error of `value` within the launch; null where none is estimated. */
  relativeSe: number | null
}

const Z95 = 1.96

const LATENCY_BY_FIELD = new Map(Object.entries(LATENCY_FIELD).map(([metric, field]) => [field, metric as LatencyMetric]))

/** `ttftMs p95` → the latency metric and the percentile; null for any other name. */
function latencyName(metric: string): { latency: LatencyMetric; percentile: number } | null {
  const m = /^(\S+) p(\d+(?:\.\d+)?)$/.exec(metric)
  const latency = m === null ? undefined : LATENCY_BY_FIELD.get(m[1] as string)
  const percentile = Number(m?.[2])
  return latency === undefined || !(percentile > 0 && percentile < 100) ? null : { latency, percentile }
}

/**
 * Whether the history of main keeps a figure for a gate decision's `metric`: the rate metrics
 * (`decodeTokPerS`, …), the cell's service rates (`outputThroughputTokPerS`,
 * `requestRateReqPerS`) and latency quantiles (`ttftMs p95`, …). Shares, accuracy and capacity
 * have no launch noise on a log scale and are not kept.
 */
export function isHistoryMetric(metric: string): boolean {
  return RateMetric.safeParse(metric).success || ServiceMetric.safeParse(metric).success || latencyName(metric) !== null
}

/**
 * A rate's figure: the geometric mean over the ok requests, and its relative standard error, the
 * sd of the logs over √n (null under two requests).
 */
function rateFigure(record: GateRecord, metric: RateMetric): HistoryFigure | null {
  // The ok requests as the gates and the noise profile read them (`launchFigures`): one value per index.
  const logs: number[] = []
  for (const v of valuesByIndex(record, rateOf(metric)).values()) if (v > 0 && Number.isFinite(v)) logs.push(Math.log(v))
  const n = logs.length
  if (n === 0) return null
  const mean = logs.reduce((a, b) => a + b, 0) / n
  const sd = n < 2 ? null : Math.sqrt(logs.reduce((s, x) => s + (x - mean) ** 2, 0) / (n - 1))
  return { value: Math.exp(mean), relativeSe: sd === null ? null : sd / Math.sqrt(n) }
}

/**
 * A latency quantile's figure: the nearest-rank percentile over the ok requests, and a
 * bootstrap-free relative standard error from the distribution-free order-statistic interval
 * (the values at ranks np ∓ 1.96·√(np(1−p)), a 95% interval): the log of their ratio over
 * 2 × 1.96. Null when that interval runs off the sample's ends, and for ITL, whose gaps within a
 * request are not independent draws.
 */
function latencyFigure(record: GateRecord, latency: LatencyMetric, percentile: number): HistoryFigure | null {
  const values: number[] = []
  for (const v of valuesByIndex(record, latencyOf(latency)).values()) {
    if (typeof v === 'number') values.push(v)
    else values.push(...v)
  }
  const sorted = values.filter((v) => Number.isFinite(v)).sort((a, b) => a - b)
  if (sorted.length === 0) return null
  const figure = nearestRank(sorted, percentile)
  if (!(figure > 0)) return null
  const n = sorted.length
  const p = percentile / 100
  const half = Z95 * Math.sqrt(n * p * (1 - p))
  const low = Math.floor(n * p - half)
  const high = Math.ceil(n * p + half)
  const lowValue = sorted[low - 1]
  const highValue = sorted[high - 1]
  const known = latency !== 'itl' && low >= 1 && high <= n && lowValue !== undefined && highValue !== undefined && lowValue > 0
  return { value: figure, relativeSe: known ? Math.log(highValue / lowValue) / (2 * Z95) : null }
}

/**
 * One launch's figure of a gate decision's `metric` (its name as the decision has it:
 * `decodeTokPerS`, `ttftMs p95`, `outputThroughputTokPerS`), the same figure a noise profile
 * keeps (`launchFigures`), with its standard error; null when the launch has none or the history
 * keeps no figure for the metric (`isHistoryMetric`).
 * @example historyFigure(record, 'decodeTokPerS') // { value: 61.2, relativeSe: 0.004 }
 */
export function historyFigure(record: GateRecord, metric: string): HistoryFigure | null {
  const rate = RateMetric.safeParse(metric)
  if (rate.success) return rateFigure(record, rate.data)
  const service = ServiceMetric.safeParse(metric)
  if (service.success) {
    const v = record.metrics?.[service.data] ?? null
    return v !== null && v > 0 && Number.isFinite(v) ? { value: v, relativeSe: null } : null
  }
  const latency = latencyName(metric)
  return latency === null ? null : latencyFigure(record, latency.latency, latency.percentile)
}
