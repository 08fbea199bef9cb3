import { request } from 'undici'
import { afterEach, describe, expect, test } from 'vitest'
import { computeCellMetrics } from '../metrics/cell-metrics.ts'
import { SLO } from '../schema/load.ts'
import { RunRecord, StoredRunRecord } from '../schema/run.ts'
import { type SimServer, startSimServer } from '../sim/server.ts'
import type { SimOptions } from '../sim/sim-options.ts'
import { cancelPlan, isCancelled } from '../workload/cancel-plan.ts'
import { resolveCellPlan } from './cell-options.ts'
import { runCell } from './measure-cell.ts'

let sim: SimServer | null = null
afterEach(async () => {
  await sim?.close()
  sim = null
})

async function start(options: SimOptions = {}): Promise<SimServer> {
  // 100 tok/s: a 40-token reply takes about 400 ms, so an abort 100 ms after send always lands mid-stream.
  sim = await startSimServer({ model: 'm', prefillTokPerS: 50_000, decodeTokPerS: 100, batchSlowdown: 0, ...options })
  return sim
}

/** The sim's load gauges as its /metrics reports them (vLLM names). */
async function gauges(s: SimServer): Promise<{ running: number; waiting: number; kv: number }> {
  const text = await (await request(`${s.url}/metrics`)).body.text()
  const read = (name: string): number => Number(new RegExp(`^${name}\\{[^}]*\\} (\\S+)$`, 'm').exec(text)?.[1])
  return { running: read('vllm:num_requests_running'), waiting: read('vllm:num_requests_waiting'), kv: read('vllm:kv_cache_usage_perc') }
}

const CELL = { model: 'm', concurrency: 4, requests: 16, maxTokens: 40, workload: { promptTokens: 64, seed: 7 } } as const

describe('which requests a cell cancels', () => {
  test('a seeded function of the index alone: the same for any count, near the share, another seed another set', () => {
    const plan = cancelPlan({ share: 0.3, afterMs: 50, drainWithinMs: null }, 7, 1000)
    expect(cancelPlan({ share: 0.3, afterMs: 50, drainWithinMs: null }, 7, 400).indices).toEqual(plan.indices.filter((i) => i < 400))
    expect(plan.indices.length).toBeGreaterThan(250)
    expect(plan.indices.length).toBeLessThan(350)
    for (const i of plan.indices) expect(isCancelled(7, 0.3, i)).toBe(true)
    expect(cancelPlan({ share: 0.3, afterMs: 50, drainWithinMs: null }, 8, 1000).indices).not.toEqual(plan.indices)
    expect(cancelPlan({ share: 1, afterMs: 0, drainWithinMs: null }, 7, 5).indices).toEqual([0, 1, 2, 3, 4])
  })

  test('checked at declaration: the share is above 0 and at most 1, the delay not negative, no other key', () => {
    expect(() => resolveCellPlan({ cancel: { share: 0, afterMs: 10 } }, 'pair "x"')).toThrow(/cancel\.share: must be above 0/)
    expect(() => resolveCellPlan({ cancel: { share: 1.5, afterMs: 10 } })).toThrow(/cancel\.share/)
    expect(() => resolveCellPlan({ cancel: { share: 0.5, afterMs: -1 } })).toThrow(/cancel\.afterMs/)
    expect(() => resolveCellPlan({ cancel: { share: 0.5, after: 10 } })).toThrow(/cancel/)
    expect(resolveCellPlan({ cancel: { share: 0.5, afterMs: 10 } }).cancel).toEqual({ share: 0.5, afterMs: 10, drainWithinMs: null })
  })
})

describe('a cancellation cell on the simulated engine', () => {
  test('cancelled requests are recorded as such, none counted as failed, and the engine is back to idle', { timeout: 30_000 }, async () => {
    const s = await start()
    const record = await runCell({ ...CELL, baseUrl: s.url, cancel: { share: 0.5, afterMs: 100 } })
    const parsed = RunRecord.parse(record)
    const chosen = parsed.plan.cancel?.indices ?? []
    expect(chosen).toEqual(cancelPlan({ share: 0.5, afterMs: 100, drainWithinMs: null }, 7, 16).indices)
    expect(chosen.length).toBeGreaterThan(0)
    const cancelled = record.requests.filter((r) => r.status === 'cancelled').map((r) => r.index)
    expect(cancelled).toEqual(chosen)
    expect(record.cancelled).toBe(chosen.length)
    expect(record.failed).toBe(0)
    expect(record.failures).toEqual({})
    expect(record.completed).toBe(16 - chosen.length)
    // Aborted mid-stream, about 100 ms after the send (a whole reply takes 400 ms): partial timings
    // and a part of the reply kept, excluded from every distribution.
    for (const r of record.requests.filter((q) => q.status === 'cancelled')) {
      expect(r.timeToFirstOutputMs).not.toBeNull()
      expect(r.e2eMs).toBeGreaterThan(50)
      expect(r.contentChunks).toBeLessThan(40)
    }
    expect(record.metrics.distributions.e2eMs.samples).toBe(16 - chosen.length)
    expect(record.metrics.distributions.ttftMs.samples).toBe(16 - chosen.length)
    expect(record.drain).toMatchObject({ checked: true, passed: true, running: 0, waiting: 0, kvUsageBefore: 0, kvUsageAfter: 0 })
    expect(record.drain?.url).toBe(`${s.url}/metrics`)
    expect(record.cellFailure).toBeNull()
    expect(await gauges(s)).toEqual({ running: 0, waiting: 0, kv: 0 })
  })

  test('a request that ends before its abort is recorded as it ended', { timeout: 30_000 }, async () => {
    const s = await start({ decodeTokPerS: 2000 })
    const record = await runCell({ ...CELL, baseUrl: s.url, cancel: { share: 1, afterMs: 5000 } })
    expect(record.plan.cancel?.indices).toHaveLength(16)
    expect(record.cancelled).toBe(0)
    expect(record.completed).toBe(16)
    expect(record.drain?.passed).toBe(true)
  })

  test('an engine that leaks KV on abort fails the cell with the figures', { timeout: 30_000 }, async () => {
    const s = await start({ leakKvOnAbort: true })
    const record = await runCell({ ...CELL, baseUrl: s.url, cancel: { share: 0.5, afterMs: 100, drainWithinMs: 600 } })
    const leaked = record.cancelled
    expect(leaked).toBeGreaterThan(0)
    expect(record.failed).toBe(0)
    expect(record.drain).toMatchObject({ checked: true, passed: false, settledMs: null, running: leaked, waiting: 0, kvUsageBefore: 0 })
    expect(record.drain?.kvUsageAfter).toBeCloseTo(leaked / 64, 9)
    expect(record.drain?.reason).toMatch(new RegExp(`still ${leaked} running, KV usage .* above its pre-cell 0`))
    expect(record.cellFailure?.code).toBe('ENGINE_NOT_DRAINED')
    expect(record.cellFailure?.message).toMatch(
      new RegExp(`within 600 ms after a cell that cancelled ${leaked} request\\(s\\): running ${leaked}, waiting 0`),
    )
    expect((await gauges(s)).running).toBe(leaked)
  })

  test(
    'a replayed conversation goes on past a cancelled turn; by turn, cancelled turns are neither ok nor failed',
    { timeout: 30_000 },
    async () => {
      const s = await start()
      const workload = { kind: 'conversation', sessions: 4, turns: 3, userTokens: 24, assistantTokens: 8, seed: 7 } as const
      const record = await runCell({
        baseUrl: s.url,
        model: 'm',
        concurrency: 4,
        maxTokens: 40,
        workload,
        cancel: { share: 0.5, afterMs: 100 },
      })
      expect(record.requests).toHaveLength(12)
      expect(record.cancelled).toBe(record.plan.cancel?.indices.length)
      expect(record.cancelled).toBeGreaterThan(0)
      expect(record.failed).toBe(0)
      const byTurn = record.metrics.byTurn ?? []
      expect(byTurn.reduce((n, t) => n + t.completed + t.failed, 0)).toBe(12 - record.cancelled)
      expect(record.drain?.passed).toBe(true)
    },
  )

  test('an engine without Prometheus names servegate knows is recorded as not checked, without waiting for it', async () => {
    // TensorRT-LLM's /metrics is JSON iteration stats, its Prometheus text elsewhere.
    const s = await start({ decodeTokPerS: 2000, dialect: 'trtllm' })
    const began = performance.now()
    const record = await runCell({ ...CELL, baseUrl: s.url, cancel: { share: 0.5, afterMs: 5 } })
    expect(record.drain).toMatchObject({ checked: false, passed: null, readings: 0, url: `${s.url}/metrics` })
    expect(record.drain?.reason).toMatch(/could not be read after the cell: .*exports none of the names servegate knows/)
    expect(record.cellFailure).toBeNull()
    expect(performance.now() - began).toBeLessThan(5000)
  })

  test('a cell without cancellations checks nothing and records no plan', async () => {
    const s = await start({ decodeTokPerS: 2000 })
    const record = await runCell({ ...CELL, baseUrl: s.url })
    expect(record.plan.cancel).toBeNull()
    expect(record.drain).toBeNull()
    expect(record.cancelled).toBe(0)
  })
})

describe('cancelled records', () => {
  test('a record written before cancellations reads with none', async () => {
    const s = await start({ decodeTokPerS: 2000 })
    const record = await runCell({ ...CELL, baseUrl: s.url })
    const old = JSON.parse(JSON.stringify(record)) as Record<string, unknown>
    delete old.cancelled
    delete old.drain
    delete (old.plan as Record<string, unknown>).cancel
    delete (old.metrics as Record<string, unknown>).specDecode
    const read = StoredRunRecord.parse(old)
    expect(read.cancelled).toBe(0)
    expect(read.drain).toBeNull()
    expect(read.plan.cancel).toBeNull()
    expect(read.metrics.specDecode).toBeNull()
  })

  test('a cancelled request is neither completed nor failed, and no goodput sample', async () => {
    const s = await start({ decodeTokPerS: 2000 })
    const record = await runCell({ ...CELL, baseUrl: s.url, requests: 4 })
    const [a, b, ...rest] = record.requests
    const requests = [{ ...a, status: 'cancelled' as const }, b, ...rest] as RunRecord['requests']
    const m = computeCellMetrics(requests, 1000, SLO.parse({ ttftMs: 10_000 }))
    expect(m.distributions.e2eMs.samples).toBe(3)
    expect(m.goodput?.samples).toBe(3)
  })
})
