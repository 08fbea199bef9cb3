/**
 * Network round trips to a remote target, summarized, and the latencies adjusted for them. Pure:
 * the probes (`runner/network-probes.ts`) take the samples, the record keeps them, the summary,
 * the evidence and the pair check read these figures.
 */
import type { Distribution, NetworkAdjustedFigures, NetworkProbes, NetworkRttSeries, RunRecord } from '../schema/run.ts'
import { nearestRank } from './distribution.ts'

/**
 * A probe kind's round trips over one phase: the samples in µs (rounded), the count of failed
 * probes, nearest-rank p50/p90/p99 in ms (of the µs samples, so they match the record's array).
 * @example rttSeries([20.04, 19.98, 20.3], 0).p50Ms // 20.04
 */
export function rttSeries(rttMs: readonly number[], failed: number): NetworkRttSeries {
  const rttUs = rttMs.map((ms) => Math.max(0, Math.round(ms * 1000)))
  if (rttUs.length === 0) return { samples: 0, failed, rttUs, p50Ms: null, p90Ms: null, p99Ms: null }
  const sorted = Float64Array.from(rttUs).sort()
  const at = (p: number): number => nearestRank(sorted, p) / 1000
  return { samples: rttUs.length, failed, rttUs, p50Ms: at(50), p90Ms: at(90), p99Ms: at(99) }
}

/**
 * A latency distribution less a round trip: each figure minus `rttMs`, never clamped at 0 (a
 * figure below it says the estimate is off, and is shown as it is); null stays null.
 * Subtracting one constant from every request moves every percentile and the mean by it.
 */
export function adjustedFigures(d: Distribution, rttMs: number): NetworkAdjustedFigures {
  const less = (v: number | null): number | null => (v === null ? null : v - rttMs)
  return { mean: less(d.mean), p50: less(d.p50), p90: less(d.p90), p95: less(d.p95), p99: less(d.p99) }
}

/**
 * The round trip a record's latencies are adjusted by, and which estimator gave it: the p50 of
 * the HTTP probes before the measured phase, or of the handshakes where no HTTP probe answered;
 * null when no probe answered.
 */
export function networkEstimate(
  probes: Pick<NetworkProbes, 'http' | 'handshake'>,
): { estimator: 'http-p50-before' | 'handshake-p50-before'; rttMs: number } | null {
  if (probes.http.before.p50Ms !== null) return { estimator: 'http-p50-before', rttMs: probes.http.before.p50Ms }
  if (probes.handshake.before.p50Ms !== null) return { estimator: 'handshake-p50-before', rttMs: probes.handshake.before.p50Ms }
  return null
}

/** The record's `network.adjusted`: TTFT and e2e less the estimate; null when there is none. */
export function networkAdjusted(
  probes: Pick<NetworkProbes, 'http' | 'handshake'>,
  distributions: Pick<RunRecord['metrics']['distributions'], 'ttftMs' | 'e2eMs'>,
): NetworkProbes['adjusted'] {
  const estimate = networkEstimate(probes)
  if (estimate === null) return null
  return {
    ...estimate,
    ttftMs: adjustedFigures(distributions.ttftMs, estimate.rttMs),
    e2eMs: adjustedFigures(distributions.e2eMs, estimate.rttMs),
  }
}

/** How the estimator reads in text: `HTTP RTT p50 before the cell` or `TCP handshake p50 before the cell`. */
export function estimatorText(estimator: 'http-p50-before' | 'handshake-p50-before'): string {
  return estimator === 'http-p50-before' ? 'HTTP RTT p50 before the cell' : 'TCP handshake p50 before the cell'
}
