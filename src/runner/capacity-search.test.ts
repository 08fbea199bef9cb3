import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { CapacitySearch } from '../schema/capacity-record.ts'
import { simCapacity } from '../sim/saturation.ts'
import type { SimOptions } from '../sim/sim-options.ts'
import { type SimServer, startSimServer } from '../sim/server.ts'
import { type CapacityOptions, fewestPassingRequests, resolveCapacityOptions, searchCapacity as searchResolved } from './capacity-search.ts'
import { runCell } from './measure-cell.ts'
import { failedCellRecord } from './run-record.ts'
import type { CellPlan } from './cell-options.ts'

// 4 seats, 10 ms steps, 8-token replies: the engine saturates at exactly 50 req/s (simCapacity).
const SIM: SimOptions = { model: 'm', maxBatch: 4, decodeTokPerS: 100, batchSlowdown: 0, prefillTokPerS: 200_000 }
/** The search as a declaration runs it: options resolved first, so a bad one rejects before any probe. */
const searchCapacity = async (o: CapacityOptions, ...rest: Parameters<typeof searchResolved> extends [unknown, ...infer R] ? R : never) =>
  searchResolved(resolveCapacityOptions(o), ...rest)

const CELL: CellPlan = {
  maxTokens: 8,
  workload: { promptTokens: 64, outputControl: { mode: 'observe' } },
  // The sim shares this process's event loop on a 2-core machine shared with other work; the
  // harness check is tested on its own below, so here only gross lateness stops a probe.
  sendLagLimitMs: 100,
  eventLoopDelayLimitMs: 200,
}

let sim: SimServer
beforeAll(async () => {
  sim = await startSimServer(SIM)
})
afterAll(() => sim.close())

const measure = (cell: CellPlan) => runCell({ ...cell, baseUrl: sim.url, model: 'm' })

describe('searchCapacity against the simulated engine', () => {
  test('the bracket it finds holds the known capacity (up to the overload a probe cannot see), within the resolution, every probe recorded', async () => {
    const known = simCapacity(SIM, { promptTokens: 64, outputTokens: 8 })
    expect(known).toMatchObject({ ratePerS: 50, exact: true })
    const probes: number[] = []
    const search = await searchCapacity(
      // Probes of 1.5 s: at 20% over capacity the queue passes 150 ms about 0.75 s in. The SLO
      // leaves room for a scheduling stall of the busy machine below capacity.
      { cell: CELL, slo: { ttftMs: 150 }, percentile: 90, bracket: { start: 30, max: 240, resolution: 0.25 }, probeSeconds: 1.5 },
      measure,
      'sim-capacity-rate',
      { onProbe: (p) => probes.push(p.value) },
    )
    expect(CapacitySearch.parse(search)).toBeTruthy()
    expect(search.status).toBe('bracketed')
    const { low, high } = search.bracket as { low: number; high: number }
    // A 1.5 s probe passes an overload below about 150 ms / (0.9 × 1.5 s) = 11%: the bracket holds
    // the rate that meets the SLO over a probe, which lies between the capacity and that much above it.
    const tolerance = search.overloadTolerance as number
    const seconds = Math.max(49, Math.ceil(1.5 * low)) / low
    expect(tolerance).toBeCloseTo(0.15 / (0.9 * seconds), 9)
    expect(search.warnings[0]).toMatch(
      /^a \d+\.\d s probe cannot see an overload below about \d+\.\d% \(a 150 ms bound over 90% of its length\)/,
    )
    expect(low).toBeLessThanOrEqual((known?.ratePerS as number) * (1 + tolerance))
    expect(high).toBeGreaterThan(known?.ratePerS as number)
    expect(high / low).toBeLessThanOrEqual(1.25)
    expect(search.probes.map((p) => p.value)).toEqual(probes)
    expect(search.records.map((r) => r.runId)).toEqual(search.probes.map((p) => p.runId))
    for (const [i, record] of search.records.entries()) {
      expect(record.plan.arrival).toMatchObject({ kind: 'constant', ratePerS: search.probes[i]?.value })
      expect(record.metrics.goodput?.slo.ttftMs).toBe(150)
      expect(record.requests).toHaveLength(Math.max(49, Math.ceil(1.5 * (search.probes[i]?.value as number))))
    }
    expect(search.summary).toMatch(
      /^capacity in \[\d+\.\d\d, \d+\.\d\d\) req\/s \(×1\.\d\d\) under ttft ≤ 150 ms for 90% of requests; bracketed after \d probe\(s\)$/,
    )
  })

  test('a concurrency search brackets the seats: beyond 4 streams requests queue', async () => {
    // 20 ms steps: a fifth stream waits a whole 160 ms seat time, four never wait.
    const slow = await startSimServer({ ...SIM, decodeTokPerS: 50 })
    const search = await searchCapacity(
      { cell: CELL, slo: { ttftMs: 100 }, bracket: { axis: 'concurrency', start: 4, max: 5 }, requestsPerProbe: 49 },
      (cell) => runCell({ ...cell, baseUrl: slow.url, model: 'm' }),
      'sim-capacity-concurrency',
    ).finally(() => slow.close())
    expect(search).toMatchObject({ status: 'bracketed', bracket: { low: 4, high: 5 } })
    expect(search.records.every((r) => r.plan.arrival === null)).toBe(true)
  })

  test('a probe whose client cannot send on time ends the search: nothing is claimed beyond it', async () => {
    const search = await searchCapacity(
      { cell: { ...CELL, sendLagLimitMs: 1e-9 }, slo: { ttftMs: 40 }, bracket: { start: 200 }, requestsPerProbe: 49, probeSeconds: 0.1 },
      measure,
      'limited',
    )
    expect(search).toMatchObject({ status: 'harness-limited', bracket: { low: null, high: null } })
    expect(search.probes[0]?.invalid).toMatch(/^send lag p99 .* > 1e-9 ms/)
    expect(search.summary).toMatch(/capacity not found .*; harness-limited after 1 probe\(s\): send lag p99/)
  })

  test('a failed probe cell ends it too; bad options are refused before any probe', async () => {
    const failed = async () =>
      failedCellRecord(
        { baseUrl: 'http://127.0.0.1:1', model: 'm' },
        { code: 'ENGINE_EXITED', message: 'engine exited with code 1', httpStatus: null, retryAfterS: null },
      )
    expect((await searchCapacity({ cell: CELL, slo: { ttftMs: 40 }, bracket: { start: 4 } }, failed, 'x')).status).toBe('cell-failed')
    expect(fewestPassingRequests(0.9, 0.98)).toBe(49)
    const never = () => {
      throw new Error('no probe should run')
    }
    await expect(
      searchCapacity({ cell: CELL, slo: { ttftMs: 40 }, bracket: { start: 4 }, requestsPerProbe: 20 }, never, 'x'),
    ).rejects.toThrow(
      /^invalid capacity search: requestsPerProbe: 20 requests can never show 90% good at 0\.98 confidence .*; use at least 49$/,
    )
    await expect(searchCapacity({ cell: CELL, slo: {}, bracket: { start: 4 } }, never, 'x')).rejects.toThrow(
      /slo\.ttftMs: give at least one objective/,
    )
    await expect(
      searchCapacity(
        { cell: { ...CELL, arrival: { kind: 'poisson', ratePerS: 1 } }, slo: { ttftMs: 1 }, bracket: { axis: 'concurrency', start: 4 } },
        never,
        'x',
      ),
    ).rejects.toThrow(/cell\.arrival: a concurrency search runs closed-loop probes/)
    await expect(searchCapacity({ cell: CELL, slo: { ttftMs: 1 }, bracket: { start: 4, min: 8 } }, never, 'x')).rejects.toThrow(
      /bracket\.start: 4 must lie within \[min 8, max 64\]/,
    )
  })
})
