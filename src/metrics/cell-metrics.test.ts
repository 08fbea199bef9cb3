import { describe, expect, test } from 'vitest'
import { okRequest } from '../../fixtures/gate-fixture.ts'
import { packGaps } from '../schema/itl-packed.ts'
import type { RequestRecord } from '../schema/run.ts'
import { CellTally, computeCellMetrics } from './cell-metrics.ts'
import { SLO } from '../schema/load.ts'

/** Gaps of whole microseconds, as records keep them: 9.5–10.5 ms with a slow one now and then. */
function gapsOf(index: number, n: number): number[] {
  return Array.from(
    { length: n },
    (_, i) => (9500 + ((index * 7919 + i * 104729) % 1000) + (index % 2 === 0 && i % 97 === 0 ? 30_000 : 0)) / 1000,
  )
}

/** The same ok request twice: its gaps as an array, and packed as a spill reads it back. */
function both(index: number, n: number): { decoded: RequestRecord; packed: RequestRecord } {
  const itlMs = gapsOf(index, n)
  const fields = { ttftMs: 40 + index, e2eMs: 40 + index + n * 10, completionTokens: n + 1 }
  return {
    decoded: okRequest(index, { ...fields, itlMs }),
    packed: okRequest(index, { ...fields, itlMs: null, itlPacked: packGaps(itlMs) }),
  }
}

describe('CellTally pools every request’s gaps into one array when the metrics are taken', () => {
  const requests = Array.from({ length: 40 }, (_, i) => both(i, 50 + i * 13))

  test('packed records (a spill read back) give exactly the metrics of the same records decoded', () => {
    const decoded = computeCellMetrics(
      requests.map((r) => r.decoded),
      60_000,
    )
    const packed = computeCellMetrics(
      requests.map((r) => r.packed),
      60_000,
    )
    expect(packed).toEqual(decoded)
    expect(packed.distributions.itlMs.samples).toBe(requests.reduce((n, r) => n + (r.decoded.itlMs?.length ?? 0), 0))
    // A mix of both, in plan order, reads the same too.
    const mixed = computeCellMetrics(
      requests.map((r, i) => (i % 2 === 0 ? r.packed : r.decoded)),
      60_000,
    )
    expect(mixed).toEqual(decoded)
  })

  test('the pooled figures are those of the gaps in one array: mean, sd and nearest-rank percentiles', () => {
    const all = requests.flatMap((r) => r.decoded.itlMs ?? [])
    const itl = computeCellMetrics(
      requests.map((r) => r.packed),
      60_000,
    ).distributions.itlMs
    const sorted = [...all].sort((a, b) => a - b)
    expect(itl.min).toBe(sorted[0])
    expect(itl.max).toBe(sorted.at(-1))
    expect(itl.p50).toBe(sorted[Math.ceil(0.5 * sorted.length) - 1])
    expect(itl.p99).toBe(sorted[Math.ceil(0.99 * sorted.length) - 1])
    expect(itl.mean).toBeCloseTo(all.reduce((a, b) => a + b, 0) / all.length, 9)
  })

  test('an ITL objective judges a packed request by its own gaps, as a decoded one', () => {
    const slo = SLO.parse({ itlMs: 25, itlPercentile: 99 })
    const decoded = computeCellMetrics(
      requests.map((r) => r.decoded),
      60_000,
      slo,
    )
    const packed = computeCellMetrics(
      requests.map((r) => r.packed),
      60_000,
      slo,
    )
    expect(packed.goodput).toEqual(decoded.goodput)
    // Short even requests hold a slow gap at their p99 and miss; odd ones have none.
    expect(decoded.goodput?.missed.itlMs).toBeGreaterThan(0)
    expect(decoded.goodput?.good).toBeGreaterThan(0)
  })

  test('corrupt packed gaps fail the tally naming the request and the field', () => {
    const tally = new CellTally()
    const good = requests[0]?.packed as RequestRecord
    const cut = { ...good, itlPacked: { ...(good.itlPacked as NonNullable<RequestRecord['itlPacked']>), count: 10_000 } }
    expect(() => tally.add(cut)).toThrow(/^request 0: itlPacked\.count: count is 10000 but the \d+ bytes hold at most/)
  })
})
