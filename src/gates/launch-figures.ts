import { nearestRank } from '../metrics/distribution.ts'
import type { RunRecord } from '../schema/run.ts'
import { NOISE_PROFILE_SCHEMA_ID, type NoiseProfile } from '../schema/noise.ts'
import { bootstrapRatioOfPercentiles } from '../stats/bootstrap.ts'
import { type GateRecord, LATENCY_FIELD, latencyOf, type OkRequest, pairByIndex, rateOf, valuesByIndex } from './arms.ts'
import type { LatencyMetric, RateMetric, ServiceMetric } from './gate-options.ts'
import { launchSpread, testbedOf } from './noise-floor.ts'

/** The per-request rate metrics a win gate judges, each launch summarized by its geometric mean. */
const RATE_METRICS: readonly RateMetric[] = ['decodeTokPerS', 'effectivePrefillTokPerS', 'enginePrefillTokPerS', 'throughputTokPerS']

/** The latency metrics and percentiles a hold gate judges, each launch summarized by its nearest-rank percentile. */
const HOLD_METRICS: readonly LatencyMetric[] = ['ttft', 'tpot', 'e2e', 'itl', 'timeToFirstOutput']
const HOLD_PERCENTILES = [50, 90, 95, 99] as const

/** The service-level figures a win gate judges (`toWinThroughput` the first): the cell's aggregates, one per launch. */
const SERVICE_METRICS: readonly ServiceMetric[] = ['outputThroughputTokPerS', 'requestRateReqPerS']

/** How one gated metric is read from a launch. */
type MetricReader =
  | { kind: 'rate'; name: string; value: (r: OkRequest) => number | null }
  | { kind: 'percentile'; name: string; p: number; value: (r: OkRequest) => number | readonly number[] | null }
  | { kind: 'service'; name: ServiceMetric }

/**
 * Every metric a gate can judge, named as the gate's decision names it (`decodeTokPerS`,
 * `ttftMs p95`, `outputThroughputTokPerS`): the keys of a noise profile.
 */
const READERS: readonly MetricReader[] = [
  ...RATE_METRICS.map((name): MetricReader => ({ kind: 'rate', name, value: rateOf(name) })),
  ...HOLD_METRICS.flatMap((m) =>
    HOLD_PERCENTILES.map((p): MetricReader => ({ kind: 'percentile', name: `${LATENCY_FIELD[m]} p${p}`, p, value: latencyOf(m) })),
  ),
  ...SERVICE_METRICS.map((name): MetricReader => ({ kind: 'service', name })),
]

/** A gated metric's name in a profile. */
export const GATED_METRICS: readonly string[] = READERS.map((r) => r.name)

function geometricMean(values: Iterable<number>): number | null {
  let sum = 0
  let n = 0
  for (const v of values) {
    sum += Math.log(v)
    n++
  }
  return n === 0 ? null : Math.exp(sum / n)
}

function pooled(values: Iterable<number | readonly number[]>): number[] {
  const out: number[] = []
  for (const v of values) {
    if (typeof v === 'number') out.push(v)
    else out.push(...v)
  }
  return out.sort((a, b) => a - b)
}

/** One launch's figure of one metric, or null when the launch has none. */
function figureOf(reader: MetricReader, record: GateRecord): number | null {
  if (reader.kind === 'service') return record.metrics?.[reader.name] ?? null
  if (reader.kind === 'rate') return geometricMean(valuesByIndex(record, reader.value).values())
  const values = pooled(valuesByIndex(record, reader.value).values())
  return values.length === 0 ? null : nearestRank(values, reader.p)
}

/**
 * One launch's figure of every gated metric: a rate's geometric mean over the ok requests, a
 * latency's nearest-rank percentile (ITL gaps pooled), the cell's aggregates (output tok/s, requests/s).
 * Metrics the launch has no value for are left out.
 * @example launchFigures(record).decodeTokPerS // 61.2
 */
export function launchFigures(record: GateRecord): Record<string, number> {
  const out: Record<string, number> = {}
  for (const reader of READERS) {
    const v = figureOf(reader, record)
    if (v !== null && v > 0 && Number.isFinite(v)) out[reader.name] = v
  }
  return out
}

/**
 * Every gated metric's launch-to-launch spread over k launches of one engine config
 * (`launchSpread` of the launches' figures). A metric enters only when every launch has a figure.
 */
export function profileMetrics(records: readonly GateRecord[]): NoiseProfile['metrics'] {
  const figures = records.map(launchFigures)
  const metrics: NoiseProfile['metrics'] = {}
  for (const name of GATED_METRICS) {
    const values = figures.map((f) => f[name])
    if (values.every((v): v is number => v !== undefined)) metrics[name] = launchSpread(values)
  }
  return metrics
}

/**
 * The noise profile of k launches of one engine config (`profileMetrics`), keyed by the testbed
 * of the first launch with the runner's label.
 * @throws RangeError with fewer than two launches
 */
export function noiseProfile(records: readonly RunRecord[], p: { runner: string | null; measuredAt: string }): NoiseProfile {
  const first = records[0]
  if (first === undefined || records.length < 2) throw new RangeError(`noiseProfile: needs at least 2 launches, got ${records.length}`)
  return {
    schema: NOISE_PROFILE_SCHEMA_ID,
    servegateVersion: first.servegateVersion,
    measuredAt: p.measuredAt,
    testbed: testbedOf(first, p.runner),
    launches: records.length,
    metrics: profileMetrics(records),
  }
}

/** Seed of the percentile bootstrap that sizes a latency gate's request part. */
const SPREAD_SEED = 1
const SPREAD_RESAMPLES = 400

/**
 * The request part of a single-launch gate on `metric`, as one request's sd of the paired log
 * ratio (s, so that the gate's interval has variance s²/n + 2·floor² at n paired requests),
 * from the launches themselves: each launch paired with the next, as an A/A pair.
 * - a rate: the sd of the pair's per-request log ratios around their mean (the launch's shift
 *   is the mean, and drops out), pooled over the pairs;
 * - a latency percentile: the variance of the paired percentile-ratio bootstrap at the pair's
 *   n, times n, pooled.
 * Null for a cell-level figure (one per launch: no request part) or without two paired launches.
 */
export function requestSpread(records: readonly GateRecord[], metric: string): { sd: number; requests: number } | null {
  const reader = READERS.find((r) => r.name === metric)
  if (reader === undefined || reader.kind === 'service') return null
  let sumSq = 0
  let df = 0
  let requests = 0
  for (let i = 0; i + 1 < records.length; i++) {
    const paired = pairByIndex(
      valuesByIndex(records[i] as GateRecord, reader.value),
      valuesByIndex(records[i + 1] as GateRecord, reader.value),
    )
    const n = paired.indices.length
    if (n < 2) continue
    requests = Math.max(requests, n)
    if (reader.kind === 'rate') {
      const logs = paired.candidate.map((c, k) => Math.log((c as number) / (paired.baseline[k] as number)))
      const mean = logs.reduce((a, b) => a + b, 0) / n
      sumSq += logs.reduce((s, x) => s + (x - mean) ** 2, 0)
      df += n - 1
    } else {
      const dist = bootstrapRatioOfPercentiles(paired.candidate as number[] | number[][], paired.baseline as number[] | number[][], {
        p: reader.p,
        paired: true,
        seed: SPREAD_SEED,
        resamples: SPREAD_RESAMPLES,
      })
      const r = dist.replicates
      const mean = r.reduce((a, b) => a + b, 0) / Math.max(1, r.length)
      const variance = r.reduce((s, x) => s + (x - mean) ** 2, 0) / Math.max(1, r.length - 1)
      sumSq += variance * n * (n - 1)
      df += n - 1
    }
  }
  return df === 0 ? null : { sd: Math.sqrt(sumSq / df), requests }
}
