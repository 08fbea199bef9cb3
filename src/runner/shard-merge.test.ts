import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { computeCellMetrics } from '../metrics/cell-metrics.ts'
import { networkAdjusted } from '../metrics/network.ts'
import type { NetworkProbes, NetworkRttSeries, RunRecord } from '../schema/run.ts'
import { type SimServer, startSimServer } from '../sim/server.ts'
import { runCell } from './measure-cell.ts'
import { mergeShards, type ShardResult } from './shard-merge.ts'

let sim: SimServer
beforeAll(async () => {
  sim = await startSimServer({ model: 'm', decodeTokPerS: 2000, prefillTokPerS: 1_000_000, batchSlowdown: 0 })
})
afterAll(async () => {
  await sim.close()
})

/** Round trips of `ms` each, as the probes record them. */
function series(ms: number): NetworkRttSeries {
  return { samples: 10, failed: 0, rttUs: Array.from({ length: 10 }, () => ms * 1000), p50Ms: ms, p90Ms: ms, p99Ms: ms }
}

/** A remote target's probes: 20 ms over HTTP, 0.3 ms to the gateway's TCP handshake. */
const PROBES: Omit<NetworkProbes, 'adjusted'> = {
  host: '10.213.0.2:8000',
  intervalMs: 500,
  handshake: { before: series(0.3), during: series(0.3) },
  http: { endpoint: '/health', reason: null, before: series(20), during: series(20) },
}

/**
 * A shard of `record`: the requests whose index ≡ `index` mod `count`, its figures over them alone,
 * and (`probes`) the network its own probes measured, adjusted over its own requests as a shard does.
 */
function shardOf(record: RunRecord, index: number, count: number, probes: boolean): ShardResult {
  const requests = record.requests.filter((r) => r.index % count === index)
  const metrics = computeCellMetrics(requests, record.metrics.wallClockMs)
  const network = probes ? { network: { ...PROBES, adjusted: networkAdjusted(PROBES, metrics.distributions) } } : {}
  return {
    record: { ...record, requests, metrics, ...network },
    figures: {
      index,
      host: 'local',
      clockOffsetMs: 0,
      clockOffsetUncertaintyMs: 0.01,
      requests: requests.length,
      concurrency: null,
      sendLagP99Ms: null,
      clientCpuShare: null,
      harnessLimited: false,
      reasons: [],
    },
    streams: { request: [], wire: [] },
  }
}

describe('a merged record of a remote target', () => {
  test('adjusts TTFT and e2e over every shard’s requests, not shard 0’s alone', async () => {
    const whole = await runCell({ baseUrl: sim.url, model: 'm', requests: 24, concurrency: 4, maxTokens: 8, calibrate: false })
    // Each shard's own adjustment is over its half: the merged one must be over all of them.
    const merged = mergeShards([0, 1].map((i) => shardOf(whole, i, 2, true)))
    const ttft = merged.metrics.distributions.ttftMs
    expect(merged.network?.adjusted?.estimator).toBe('http-p50-before')
    expect(merged.network?.adjusted?.rttMs).toBe(20)
    expect(merged.network?.adjusted?.ttftMs.p50).toBe((ttft.p50 as number) - 20)
    expect(merged.network?.adjusted?.ttftMs.mean).toBe((ttft.mean as number) - 20)
    expect(merged.network?.adjusted?.e2eMs.p99).toBe((merged.metrics.distributions.e2eMs.p99 as number) - 20)
    expect(merged.network?.handshake).toEqual(PROBES.handshake)
    expect(merged.metrics.distributions.ttftMs.samples).toBe(24)
  })

  test('a loopback target merges with no network field', async () => {
    const whole = await runCell({ baseUrl: sim.url, model: 'm', requests: 8, concurrency: 2, maxTokens: 4, calibrate: false })
    const merged = mergeShards([0, 1].map((i) => shardOf(whole, i, 2, false)))
    expect('network' in merged).toBe(false)
  })
})

describe('a merged record of batched reads', () => {
  test("sums every shard's pauses and keeps the longest; a shard's record without the field leaves it out", async () => {
    const whole = await runCell({ baseUrl: sim.url, model: 'm', requests: 8, concurrency: 2, maxTokens: 4, calibrate: false })
    const withPauses = (shard: ShardResult, pauses: number, longestPauseMs: number): ShardResult => ({
      ...shard,
      record: { ...shard.record, harness: { ...shard.record.harness, readBatching: { pauses, pausedMs: pauses * 0.2, longestPauseMs } } },
    })
    const [a, b] = [0, 1].map((i) => shardOf(whole, i, 2, false)) as [ShardResult, ShardResult]
    const merged = mergeShards([withPauses(a, 10, 0.25), withPauses(b, 5, 0.31)])
    expect(merged.harness.readBatching?.pauses).toBe(15)
    expect(merged.harness.readBatching?.pausedMs).toBeCloseTo(3, 9)
    expect(merged.harness.readBatching?.longestPauseMs).toBe(0.31)
    const { readBatching: _, ...older } = b.record.harness
    const mixed = mergeShards([withPauses(a, 10, 0.25), { ...b, record: { ...b.record, harness: older } }])
    expect('readBatching' in mixed.harness).toBe(false)
  })
})
