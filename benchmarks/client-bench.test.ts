import { connect } from 'node:net'
import { describe, expect, test } from 'vitest'
import type { Distribution } from '../src/schema/run.ts'
import { chunkHead, DONE_EVENT, roleEvent, tokenEvent, usageEvent } from './chunks.ts'
import { intFlag } from '../src/cli/flags.ts'
import { ingestRequests, ladderWorkerCounts } from './client-bench.ts'
import { ladderServerCpus } from './cpu.ts'
import { measureIngest } from './ingest.ts'
import { measureItl, serverStamps } from './itl.ts'
import { runMicro } from './micro.ts'
import { startServerProcess } from './servers/spawn.ts'

/** Resolves with the error code of a connection attempt, or 'connected'. */
function tryConnect(port: number): Promise<string> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1')
    socket.once('connect', () => {
      socket.destroy()
      resolve('connected')
    })
    socket.once('error', (error: NodeJS.ErrnoException) => resolve(error.code ?? error.message))
  })
}

function expectFinite(d: Distribution): void {
  expect(d.samples).toBeGreaterThan(0)
  for (const v of [d.mean, d.p50, d.p99, d.max]) expect(Number.isFinite(v)).toBe(true)
}

describe('client bench (smoke, no timing thresholds)', () => {
  test('micro-benchmarks give finite rates', async () => {
    const results = await runMicro(20)
    expect(results.map((r) => r.name)).toHaveLength(3)
    for (const r of results) {
      expect(Number.isFinite(r.opsPerS) && r.opsPerS > 0).toBe(true)
      expect(Number.isFinite(r.itemsPerS) && r.itemsPerS > 0).toBe(true)
    }
  })

  test('ingest: every request ok, finite figures, server gone afterwards', async () => {
    const server = await startServerProcess('zeroDelay')
    try {
      expect(await tryConnect(server.port)).toBe('connected')
      const result = await measureIngest({ origin: server.origin, concurrency: 4, requests: 8, tokens: 1000, deadlineMs: 20_000 })
      expect(result.failures).toEqual([])
      expect(result.okRequests).toBe(8)
      expect(result.completionTokens).toBe(8000)
      for (const v of [result.wallS, result.tokPerS, result.cpuShare]) expect(Number.isFinite(v) && v > 0).toBe(true)
    } finally {
      await server.close()
    }
    expect(await tryConnect(server.port)).toBe('ECONNREFUSED')
  })

  test('ITL: every request ok, every token delivered, finite figures, server gone afterwards', async () => {
    const server = await startServerProcess('paced', ['--interval-ms', '10'])
    try {
      // A generous deadline: this checks structure, not timing.
      const result = await measureItl({ origin: server.origin, intervalMs: 10, concurrency: 4, chunks: 20, rounds: 1, deadlineFactor: 20 })
      expect(result.failures).toEqual([])
      expect(result.okRequests).toBe(4)
      expect(result.deliveredTokens).toBe(result.offeredTokens)
      expect(result.itlErrorMs.samples).toBe(4 * 19)
      for (const d of [result.itlErrorMs, result.clientErrorMs, result.serverErrorMs, result.arrivalLatencyMs]) expectFinite(d)
      expect(Number.isFinite(result.cpuShare)).toBe(true)
    } finally {
      await server.close()
    }
    expect(await tryConnect(server.port)).toBe('ECONNREFUSED')
  })

  test('serverStamps reads the "t" of content chunks only, across any read split', () => {
    const head = chunkHead(3)
    const body = Buffer.from(
      roleEvent(head) + tokenEvent(head, 0, null, 10.5) + tokenEvent(head, 1, 'length', 20.25) + usageEvent(head, 32, 2) + DONE_EVENT,
    )
    expect(serverStamps(body)).toEqual([10.5, 20.25])
  })

  test('ingestRequests gives whole rounds of C, at least two', () => {
    expect(ingestRequests(16, 800_000, 1000, 0.8)).toBe(640)
    expect(ingestRequests(256, 800_000, 1000, 0.8)).toBe(768)
    expect(ingestRequests(64, 1000, 1000, 0.1)).toBe(128)
  })
})

describe("the ladder's server CPUs", () => {
  test('the last CPU below 8, the last quarter from 8 up, never every CPU, none on one', () => {
    expect(ladderServerCpus(1)).toEqual([])
    expect(ladderServerCpus(2)).toEqual([1])
    expect(ladderServerCpus(4)).toEqual([3])
    expect(ladderServerCpus(16)).toEqual([12, 13, 14, 15])
    expect(ladderServerCpus(64)).toHaveLength(16)
    expect(ladderServerCpus(64)[0]).toBe(48)
    expect(ladderServerCpus(16, 6)).toEqual([10, 11, 12, 13, 14, 15])
    // The cell's thread keeps at least one CPU.
    expect(ladderServerCpus(2, 5)).toEqual([1])
  })

  test('--ladder-server-cpus takes a whole number ≥ 1 and names itself otherwise', () => {
    expect(intFlag('--ladder-server-cpus', undefined, 1)).toBeUndefined()
    expect(intFlag('--ladder-server-cpus', '6', 1)).toBe(6)
    expect(() => intFlag('--ladder-server-cpus', '0', 1)).toThrow(/--ladder-server-cpus: "0" is not valid; pass an integer ≥ 1/)
    expect(() => intFlag('--ladder-server-cpus', 'four', 1)).toThrow(/--ladder-server-cpus: "four" is not valid/)
  })

  test('--ladder-workers takes whole numbers ≥ 0 separated by commas and names itself otherwise', () => {
    expect(ladderWorkerCounts(undefined)).toBeUndefined()
    expect(ladderWorkerCounts('0, 4,8')).toEqual([0, 4, 8])
    for (const bad of ['', '0,,4', '-1', '2.5', 'all']) {
      expect(() => ladderWorkerCounts(bad)).toThrow(/--ladder-workers: whole numbers ≥ 0 separated by commas/)
    }
  })
})
