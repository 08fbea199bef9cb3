import { distribution } from '../metrics/distribution.ts'
import { type EngineOccupancy, LlamaServerTimings, type TimingAgreement, type TimingDelta } from '../schema/telemetry.ts'
import { ENGINE_METRIC_NAMES, type MetricSource } from './prometheus.ts'

/**
 * How far an engine's time may exceed the client's before it counts as a disagreement:
 * max(`ms`, `fraction` × client time). Clocks, rounding and the first token's sampling make a
 * millisecond or two of overshoot normal.
 */
export interface AgreementTolerance {
  /** @default 5 */
  ms: number
  /** @default 0.05 */
  fraction: number
}

const DEFAULT_TOLERANCE: AgreementTolerance = { ms: 5, fraction: 0.05 }

type Metric = TimingAgreement['metric']

/** One request's engine-side and client-side duration of the same thing, ms (null when unknown). */
export interface TimingPair {
  engineMs: number | null
  clientMs: number | null
}

export interface ComparisonLabel {
  metric: Metric
  /** e.g. `llama-server timings.prompt_ms`. */
  engineSource: string
  /** e.g. `timeToFirstOutputMs`. */
  clientSource: string
}

const EXPECTATION = "engine ≤ client expected: the client's time also holds queueing, network and scheduling"

function allowance(clientMs: number, tolerance: AgreementTolerance): number {
  return Math.max(tolerance.ms, tolerance.fraction * clientMs)
}

/**
 * Compares per-request engine and client durations. Pure. Gap = client − engine (positive is
 * expected); the verdict is `engine-slower-than-client` when any request's engine time exceeds
 * its client time by more than the tolerance, which only a harness bug explains.
 * @example compareTimings({ metric: 'prefill', engineSource: 'e', clientSource: 'c', pairs: [{ engineMs: 40, clientMs: 52 }] }).verdict //
 * 'agree'
 */
export function compareTimings(input: ComparisonLabel & { pairs: readonly TimingPair[]; tolerance?: AgreementTolerance }): TimingAgreement {
  const tolerance = input.tolerance ?? DEFAULT_TOLERANCE
  const gaps: number[] = []
  let engineExceedsClient = 0
  let worst: { engineMs: number; clientMs: number } | null = null
  for (const { engineMs, clientMs } of input.pairs) {
    if (engineMs === null || clientMs === null || !Number.isFinite(engineMs) || !Number.isFinite(clientMs)) continue
    gaps.push(clientMs - engineMs)
    if (engineMs - clientMs > allowance(clientMs, tolerance)) {
      engineExceedsClient++
      if (worst === null || engineMs - clientMs > worst.engineMs - worst.clientMs) worst = { engineMs, clientMs }
    }
  }
  const d = distribution(gaps)
  const common = {
    metric: input.metric,
    engineSource: input.engineSource,
    clientSource: input.clientSource,
    samples: gaps.length,
    meanGapMs: d.mean,
    medianGapMs: d.p50,
    p95GapMs: d.p95,
    engineExceedsClient,
    toleranceMs: tolerance.ms,
    toleranceFraction: tolerance.fraction,
  }
  if (gaps.length === 0) {
    return { ...common, verdict: 'insufficient-data', note: `no request had both an engine and a client ${input.metric} time` }
  }
  if (worst !== null) {
    return {
      ...common,
      verdict: 'engine-slower-than-client',
      note:
        `${engineExceedsClient} of ${gaps.length} requests: engine ${input.metric} above the client's ` +
        `beyond max(${tolerance.ms} ms, ${tolerance.fraction * 100}%), ` +
        `worst engine ${worst.engineMs.toFixed(1)} ms vs client ${worst.clientMs.toFixed(1)} ms; ` +
        'a harness timing bug (or a clock mix-up) is likely',
    }
  }
  return { ...common, verdict: 'agree', note: `${EXPECTATION}; median gap ${(d.p50 as number).toFixed(1)} ms over ${gaps.length} requests` }
}

/** One request as the client measured it, with llama-server's `timings` object (or null). */
export interface LlamaServerRequestTimings {
  /** The `timings` object from the response (final stream chunk); validated here. */
  timings: unknown
  timeToFirstOutputMs: number | null
  generationMs: number | null
}

/**
 * llama-server's per-request `timings` against the client: `prompt_ms` (prompt evaluation) vs the
 * client's time to first output, and `predicted_ms` (first → last generated token) vs the client's
 * generation time. A request without a valid `timings` object is skipped. Pure.
 */
export function compareLlamaServerTimings(
  requests: readonly LlamaServerRequestTimings[],
  tolerance?: AgreementTolerance,
): TimingAgreement[] {
  const parsed = requests.map((r) => ({ ...r, engine: LlamaServerTimings.safeParse(r.timings) }))
  const withTolerance = tolerance === undefined ? {} : { tolerance }
  return [
    compareTimings({
      metric: 'prefill',
      engineSource: 'llama-server timings.prompt_ms',
      clientSource: 'timeToFirstOutputMs',
      pairs: parsed.map((r) => ({ engineMs: r.engine.success ? r.engine.data.prompt_ms : null, clientMs: r.timeToFirstOutputMs })),
      ...withTolerance,
    }),
    compareTimings({
      metric: 'generation',
      engineSource: 'llama-server timings.predicted_ms',
      clientSource: 'generationMs',
      pairs: parsed.map((r) => ({ engineMs: r.engine.success ? r.engine.data.predicted_ms : null, clientMs: r.generationMs })),
      ...withTolerance,
    }),
  ]
}

/**
 * An engine histogram's total over a window (sum of seconds, request count) against the client's
 * per-request times of the same requests. Only means can be compared (medians and per-request
 * excesses are null); if the engine's mean exceeds the client's beyond tolerance, at least one
 * request's did. The counts must match, or the windows do not cover the same requests. Pure.
 */
export function compareHistogramTotals(
  input: ComparisonLabel & {
    engine: TimingDelta | null
    engineMissingReason?: string
    clientMs: readonly number[]
    tolerance?: AgreementTolerance
  },
): TimingAgreement {
  const tolerance = input.tolerance ?? DEFAULT_TOLERANCE
  const client = input.clientMs.filter((v) => Number.isFinite(v))
  const base = {
    metric: input.metric,
    engineSource: input.engineSource,
    clientSource: input.clientSource,
    samples: 0,
    meanGapMs: null,
    medianGapMs: null,
    p95GapMs: null,
    engineExceedsClient: null,
    toleranceMs: tolerance.ms,
    toleranceFraction: tolerance.fraction,
  }
  const engine = input.engine
  if (engine === null)
    return { ...base, verdict: 'insufficient-data', note: input.engineMissingReason ?? 'the engine reported no total for this window' }
  if (engine.count === null) {
    return {
      ...base,
      verdict: 'insufficient-data',
      note: 'the engine keeps a plain counter without a request count; compare its per-request timings instead',
    }
  }
  if (engine.count === 0 || client.length === 0) {
    return {
      ...base,
      verdict: 'insufficient-data',
      note: `nothing to compare: the engine counted ${engine.count} requests, the client measured ${client.length}`,
    }
  }
  if (engine.count !== client.length) {
    return {
      ...base,
      samples: engine.count,
      verdict: 'insufficient-data',
      note:
        `the engine counted ${engine.count} requests in the window, the client measured ${client.length}: ` +
        'the scrapes do not bracket exactly the measured requests (warm-up inside the window, or a scrape missed)',
    }
  }
  const engineMeanMs = (engine.secondsSum * 1000) / engine.count
  const clientMeanMs = client.reduce((a, b) => a + b, 0) / client.length
  const gap = clientMeanMs - engineMeanMs
  const common = { ...base, samples: engine.count, meanGapMs: gap }
  if (-gap > allowance(clientMeanMs, tolerance)) {
    return {
      ...common,
      verdict: 'engine-slower-than-client',
      note:
        `engine mean ${input.metric} ${engineMeanMs.toFixed(1)} ms exceeds the client's mean ${clientMeanMs.toFixed(1)} ms ` +
        `beyond max(${tolerance.ms} ms, ${tolerance.fraction * 100}%): ` +
        "at least one request's engine time exceeded the client's; a harness timing bug is likely",
    }
  }
  return {
    ...common,
    verdict: 'agree',
    note: `${EXPECTATION}; mean gap ${gap.toFixed(1)} ms over ${engine.count} requests (histogram totals: no per-request gaps)`,
  }
}

function sourceName(source: MetricSource): string {
  if (source.name === null) return 'not exposed'
  const match =
    source.match === undefined
      ? ''
      : `{${Object.entries(source.match)
          .map(([k, v]) => `${k}="${v}"`)
          .join(',')}}`
  return `${source.name}${match} (sum/count)`
}

/**
 * The engine's histogram totals of a cell (vLLM, SGLang, TensorRT-LLM) against the client's
 * times of the same requests: model prefill and engine time-to-first-token vs the client's time to
 * first output, decode vs the client's generation time. llama-server's counters carry no request
 * count: use {@link compareLlamaServerTimings}. Pure.
 */
export function compareEngineHistograms(
  occupancy: EngineOccupancy,
  client: { timeToFirstOutputMs: readonly number[]; generationMs: readonly number[] },
  tolerance?: AgreementTolerance,
): TimingAgreement[] {
  const names = ENGINE_METRIC_NAMES[occupancy.kind]
  const withTolerance = tolerance === undefined ? {} : { tolerance }
  const rows: Array<[Metric, 'prefill' | 'ttft' | 'decode', MetricSource, string, readonly number[]]> = [
    ['prefill', 'prefill', names.prefillSeconds, 'timeToFirstOutputMs', client.timeToFirstOutputMs],
    ['time-to-first-token', 'ttft', names.ttftSeconds, 'timeToFirstOutputMs', client.timeToFirstOutputMs],
    ['generation', 'decode', names.decodeSeconds, 'generationMs', client.generationMs],
  ]
  return rows.map(([metric, key, source, clientSource, clientMs]) =>
    compareHistogramTotals({
      metric,
      engineSource: sourceName(source),
      clientSource,
      engine: occupancy.timings[key],
      engineMissingReason: occupancy.reasons[`timings.${key}`] ?? (source.name === null ? source.reason : undefined),
      clientMs,
      ...withTolerance,
    }),
  )
}
