import { afterEach, describe, expect, test } from 'vitest'
import { runCell } from '../runner/measure-cell.ts'
import type { RunRecord } from '../schema/run.ts'
import { simCapacity } from './saturation.ts'
import type { SimOptions } from './sim-options.ts'
import { type SimServer, startSimServer } from './server.ts'

let sim: SimServer | null = null
afterEach(async () => {
  await sim?.close()
  sim = null
})

describe('simCapacity', () => {
  test('seats / (output tokens × step): 4 seats, 10 ms steps, 8 tokens → 50 req/s, exact', () => {
    expect(
      simCapacity({ maxBatch: 4, decodeTokPerS: 100, batchSlowdown: 0, prefillTokPerS: 200_000 }, { promptTokens: 64, outputTokens: 8 }),
    ).toMatchObject({
      seats: 4,
      stepMs: 10,
      seatMs: 80,
      ratePerS: 50,
      exact: true,
    })
  })

  test('the KV budget limits the seats when it holds fewer requests than the batch', () => {
    const c = simCapacity(
      { maxBatch: 16, kvBudgetTokens: 300, decodeTokPerS: 100, batchSlowdown: 0, prefillTokPerS: 200_000 },
      { promptTokens: 64, outputTokens: 8 },
    )
    expect(c?.seats).toBe(4)
    expect(c?.ratePerS).toBe(50)
  })

  test('an approximation is said to be one; no limit, no capacity; a request larger than the budget is an error', () => {
    const slowdown = simCapacity(
      { maxBatch: 4, decodeTokPerS: 100, batchSlowdown: 0.1, prefillTokPerS: 200_000 },
      { promptTokens: 64, outputTokens: 8 },
    )
    expect(slowdown?.exact).toBe(false)
    expect(slowdown?.reason).toMatch(/batchSlowdown 0\.1/)
    expect(simCapacity({ decodeTokPerS: 100 }, { promptTokens: 64, outputTokens: 8 })).toBeNull()
    expect(() => simCapacity({ kvBudgetTokens: 50 }, { promptTokens: 64, outputTokens: 8 })).toThrow(/does not fit the budget of 50/)
  })
})

/** Completions per second while the engine was saturated: requests 20 to the last, by end time. */
function completionRate(record: RunRecord): number {
  const ends = record.requests.map((r) => (r.startOffsetMs as number) + (r.e2eMs as number)).sort((a, b) => a - b)
  return (ends.length - 21) / (((ends[ends.length - 1] as number) - (ends[20] as number)) / 1000)
}

describe('the capacity model against an open-loop load', () => {
  const options: SimOptions = { model: 'm', maxBatch: 4, decodeTokPerS: 100, batchSlowdown: 0, prefillTokPerS: 200_000 }
  const at = (ratePerS: number) =>
    runCell({
      baseUrl: (sim as SimServer).url,
      model: 'm',
      requests: 90,
      maxTokens: 8,
      workload: { promptTokens: 64, outputControl: { mode: 'observe' } },
      arrival: { kind: 'constant', ratePerS },
    })

  test(
    'below capacity nothing queues; above it the engine completes at its capacity ' + 'and the queueing delay grows request after request',
    async () => {
      sim = await startSimServer(options)
      const capacity = simCapacity(options, { promptTokens: 64, outputTokens: 8 })?.ratePerS as number
      const below = await at(0.8 * capacity)
      const ttft = (r: RunRecord) => r.requests.map((q) => q.ttftMs as number)
      // No queue: waits stay within a step or two (a busy machine may stall a few), and do not grow.
      const median = (v: number[]) => [...v].sort((x, y) => x - y)[Math.floor(v.length / 2)] as number
      expect(median(ttft(below))).toBeLessThan(25)
      expect(median(ttft(below).slice(-20)) - median(ttft(below).slice(0, 20))).toBeLessThan(15)
      expect(sim.stats().maxRunning).toBeLessThanOrEqual(4)

      const above = await at(1.5 * capacity)
      expect(above.completed).toBe(90)
      expect(completionRate(above) / capacity).toBeGreaterThan(0.95)
      expect(completionRate(above) / capacity).toBeLessThan(1.05)
      // 75 req/s against 50: the queue grows by 25 requests a second, each waiting 1/50 s longer per request queued ahead.
      const [first, last] = [ttft(above).slice(0, 5), ttft(above).slice(-5)]
      expect(Math.min(...last) - Math.max(...first)).toBeGreaterThan(300)
      expect(sim.stats().maxQueued).toBeGreaterThan(15)
      expect(sim.stats().maxRunning).toBe(4)
    },
  )

  test('the KV budget admits what fits and queues the rest; a request that can never fit gets a 400', async () => {
    sim = await startSimServer({ ...options, maxBatch: null, kvBudgetTokens: 2 * (64 + 16) })
    const record = await runCell({
      baseUrl: sim.url,
      model: 'm',
      requests: 8,
      concurrency: 4,
      maxTokens: 8,
      calibrate: false,
      workload: { promptTokens: 40, outputControl: { mode: 'observe' } },
    })
    expect(record.completed).toBe(8)
    expect(sim.stats().maxRunning).toBeLessThanOrEqual(2)
    expect(sim.stats().maxQueued).toBeGreaterThan(0)
    const metrics = await (await fetch(`${sim.url}/metrics`)).text()
    expect(metrics).toMatch(/^vllm:kv_cache_usage_perc\{model_name="m"\} 0$/m)
    const huge = await fetch(`${sim.url}/v1/completions`, {
      method: 'POST',
      body: JSON.stringify({ prompt: 'a b c', max_tokens: 500, stream: true }),
    })
    expect(huge.status).toBe(400)
    expect(await huge.text()).toMatch(
      /needs 503 KV tokens \(3 prompt \+ 500 output\) but the KV budget is 160 tokens; it could never be scheduled/,
    )
  })
})
