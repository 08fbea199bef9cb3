/**
 * The pair check on the arms' network paths (docs/gates.md, matched pairs): two arms compare only
 * when their requests crossed alike paths, as they compare only on the same GPU and driver.
 */
import { networkEstimate } from '../metrics/network.ts'
import { formatFixed } from '../number-format.ts'
import type { RunRecord } from '../schema/run.ts'

/**
 * How far apart two arms' round trips may be: the larger less the smaller at most
 * `max(absoluteMs, relative × the larger)`. 2 ms covers the jitter of a path within one zone; 25%
 * lets a long path vary as long paths do, while 0 ms against 20 ms is refused.
 */
const NETWORK_RTT_BOUND = { absoluteMs: 2, relative: 0.25 } as const

/** The bound as the docs and messages state it. */
export const NETWORK_RTT_BOUND_TEXT = `max(${NETWORK_RTT_BOUND.absoluteMs} ms, ${NETWORK_RTT_BOUND.relative * 100}% of the larger)`

/** True when two round trips, ms, differ by more than the bound. */
export function rttsDiffer(a: number, b: number): boolean {
  const high = Math.max(a, b)
  return high - Math.min(a, b) > Math.max(NETWORK_RTT_BOUND.absoluteMs, NETWORK_RTT_BOUND.relative * high)
}

type Launch = { label: string; r: Pick<RunRecord, 'network'> }

/**
 * Why the launches' network paths do not match; empty when they do, or when no launch went over a
 * network (loopback pairs, as before). A launch on a remote target (`network` recorded) against
 * one on loopback (none) is a mismatch naming both; remote launches compare their round trip by
 * the same estimator (HTTP p50 before the cell, or the handshake's where no HTTP endpoint
 * answered) within `NETWORK_RTT_BOUND`.
 */
export function networkMismatches(launches: readonly Launch[]): string[] {
  const remote = launches.filter(({ r }) => r.network !== undefined)
  if (remote.length === 0) return []
  const figure = ({ r }: Launch) => (r.network === undefined ? null : networkEstimate(r.network))
  const described = (l: Launch): string => {
    const e = figure(l)
    if (l.r.network === undefined) return `${l.label} loopback (no network probes)`
    if (e === null) return `${l.label} ${l.r.network.host} (no probe answered)`
    return `${l.label} ${e.estimator === 'http-p50-before' ? 'HTTP' : 'TCP handshake'} RTT p50 ${formatFixed(e.rttMs, 2)} ms`
  }
  if (remote.length < launches.length) {
    return [`network path: one arm remote, the other loopback (${launches.map(described).join(', ')})`]
  }
  const unknown = launches.filter((l) => figure(l) === null)
  if (unknown.length > 0)
    return [`network RTT: unknown for ${unknown.map((l) => l.label).join(', ')} (no probe answered), so the paths cannot be compared`]
  const estimates = launches.map((l) => ({ l, e: figure(l) as NonNullable<ReturnType<typeof figure>> }))
  if (new Set(estimates.map(({ e }) => e.estimator)).size > 1) {
    return [`network RTT: measured by different probes, so not comparable (${launches.map(described).join(', ')})`]
  }
  const rtts = estimates.map(({ e }) => e.rttMs)
  if (!rttsDiffer(Math.min(...rtts), Math.max(...rtts))) return []
  return [`network RTT: the arms' paths differ by more than ${NETWORK_RTT_BOUND_TEXT} (${launches.map(described).join(', ')})`]
}
