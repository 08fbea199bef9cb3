import { ServegateError } from '../errors.ts'
import { type Goodput, type ResolvedSLO, SLO, SLO_OBJECTIVES, type SLOObjective } from '../schema/load.ts'
import type { RequestRecord } from '../schema/run.ts'
import { wilsonInterval } from '../stats/wilson.ts'
import { nearestRank } from './distribution.ts'

type OkRequest = Extract<RequestRecord, { status: 'ok' }>

/**
 * Validates an SLO once at the boundary.
 * @throws ServegateError `CONFIG_INVALID` naming the field (`slo.ttftMs`, …) and the fix
 */
export function resolveSLO(input: SLO, field = 'slo'): ResolvedSLO {
  const parsed = SLO.safeParse(input)
  if (!parsed.success) {
    const issues = parsed.error.issues.map((i) => `${[field, ...i.path.map(String)].join('.')}: ${i.message}`)
    throw new ServegateError('CONFIG_INVALID', `invalid ${field}: ${issues.join('; ')}`)
  }
  return parsed.data
}

/** The SLO in words, e.g. `ttft ≤ 500 ms, tpot ≤ 50 ms, itl p99 ≤ 100 ms`. */
export function describeSLO(slo: ResolvedSLO): string {
  const parts: string[] = []
  if (slo.ttftMs !== null) parts.push(`ttft ≤ ${slo.ttftMs} ms`)
  if (slo.tpotMs !== null) parts.push(`tpot ≤ ${slo.tpotMs} ms`)
  if (slo.e2eMs !== null) parts.push(`e2e ≤ ${slo.e2eMs} ms`)
  if (slo.itlMs !== null) parts.push(`itl p${slo.itlPercentile} ≤ ${slo.itlMs} ms`)
  return parts.join(', ')
}

/** The nearest-rank percentile of one request's inter-chunk gaps; null with no gaps. */
function requestItl(r: OkRequest, percentile: number): number | null {
  if (r.itlMs === null || r.itlMs.length === 0) return null
  return nearestRank(Float64Array.from(r.itlMs).sort(), percentile)
}

/**
 * The objectives an ok request missed; empty when it is good. A ttft or e2e that was not
 * measured (a reply of reasoning only has no content) misses its objective; tpot and ITL are
 * undefined for a one-token reply (nothing to violate) and are then met.
 */
export function missedObjectives(r: OkRequest, slo: ResolvedSLO): SLOObjective[] {
  const missed: SLOObjective[] = []
  if (slo.ttftMs !== null && (r.ttftMs === null || r.ttftMs > slo.ttftMs)) missed.push('ttftMs')
  if (slo.tpotMs !== null && r.tpotMs !== null && r.tpotMs > slo.tpotMs) missed.push('tpotMs')
  if (slo.e2eMs !== null && (r.e2eMs === null || r.e2eMs > slo.e2eMs)) missed.push('e2eMs')
  if (slo.itlMs !== null) {
    const itl = requestItl(r, slo.itlPercentile)
    if (itl !== null && itl > slo.itlMs) missed.push('itlMs')
  }
  return missed
}

/** No misses yet, by objective and for failed requests. */
export function emptyMisses(): Goodput['missed'] {
  return { ...(Object.fromEntries(SLO_OBJECTIVES.map((o) => [o, 0])) as Record<SLOObjective, number>), failed: 0 }
}

/** Good requests so far, with misses by objective. */
export interface GoodCount {
  samples: number
  good: number
  missed: Goodput['missed']
}

/** Counts one measured request into `count`: a failed one is never good; a cancelled one is not counted. */
export function tallyGood(count: GoodCount, r: RequestRecord, slo: ResolvedSLO): void {
  if (r.status === 'cancelled') return
  count.samples++
  if (r.status === 'failed') {
    count.missed.failed++
    return
  }
  const misses = missedObjectives(r, slo)
  for (const objective of misses) count.missed[objective]++
  if (misses.length === 0) count.good++
}

/** Good requests among all measured ones (failed ones are never good), with misses by objective. */
export function countGood(records: Iterable<RequestRecord>, slo: ResolvedSLO): GoodCount {
  const count = { samples: 0, good: 0, missed: emptyMisses() }
  for (const r of records) tallyGood(count, r, slo)
  return count
}

/** Goodput from a count of good requests over the cell's wall clock (no rate when the wall clock is unknown, null). */
export function goodputOf({ samples, good, missed }: GoodCount, wallClockMs: number | null, slo: ResolvedSLO): Goodput {
  const wilson = wilsonInterval(good, samples)
  return {
    slo,
    samples,
    good,
    fraction: samples > 0 ? good / samples : null,
    wilson95Low: wilson.low,
    wilson95High: wilson.high,
    goodputReqPerS: wallClockMs !== null && wallClockMs > 0 && samples > 0 ? good / (wallClockMs / 1000) : null,
    missed,
  }
}

/**
 * Goodput of a cell: requests meeting every objective of the SLO, their share of all measured
 * requests with a Wilson 95% interval, and good requests per second of the cell's wall clock.
 * @example computeGoodput(record.requests, record.metrics.wallClockMs, resolveSLO({ ttftMs: 500, tpotMs: 50 }))
 */
export function computeGoodput(records: Iterable<RequestRecord>, wallClockMs: number | null, slo: ResolvedSLO): Goodput {
  return goodputOf(countGood(records, slo), wallClockMs, slo)
}
