import { request } from 'undici'
import { afterEach, describe, expect, test } from 'vitest'
import { type SimServer, startSimServer } from './server.ts'
import type { SimOptions } from './sim-options.ts'

let sim: SimServer | null = null
afterEach(async () => {
  await sim?.close()
  sim = null
})

/** The sim's load gauges as its /metrics reports them (vLLM names). */
async function gauges(s: SimServer): Promise<{ running: number; waiting: number; kv: number }> {
  const text = await (await request(`${s.url}/metrics`)).body.text()
  const read = (name: string): number => Number(new RegExp(`^${name}\\{[^}]*\\} (\\S+)$`, 'm').exec(text)?.[1])
  return { running: read('vllm:num_requests_running'), waiting: read('vllm:num_requests_waiting'), kv: read('vllm:kv_cache_usage_perc') }
}

/** Starts `n` streams of 200 tokens at 100 tok/s, reads their first bytes, then goes away. */
async function abortMidStream(s: SimServer, n: number): Promise<void> {
  await Promise.all(
    Array.from({ length: n }, async () => {
      const abort = new AbortController()
      const res = await request(`${s.url}/v1/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'm', prompt: 'one two three', max_tokens: 200, stream: true }),
        signal: abort.signal,
      })
      for await (const chunk of res.body) {
        if ((chunk as Buffer).includes('"text"')) break
      }
      abort.abort()
      await res.body.dump().catch(() => undefined)
    }),
  )
}

async function settled(s: SimServer): Promise<{ running: number; waiting: number; kv: number }> {
  await new Promise((resolve) => setTimeout(resolve, 100))
  return gauges(s)
}

describe('a client that goes away mid-stream', () => {
  const options: SimOptions = { model: 'm', decodeTokPerS: 100 }

  test('frees its request at once: nothing running, nothing waiting, no KV', async () => {
    sim = await startSimServer(options)
    await abortMidStream(sim, 3)
    expect(await settled(sim)).toEqual({ running: 0, waiting: 0, kv: 0 })
  })

  test('with a KV budget and a batch limit, frees its seat and its KV for the next request', async () => {
    sim = await startSimServer({ ...options, maxBatch: 2, kvBudgetTokens: 1000 })
    await abortMidStream(sim, 2)
    expect(await settled(sim)).toEqual({ running: 0, waiting: 0, kv: 0 })
    expect(sim.stats().queued).toBe(0)
  })

  test('leakKvOnAbort: the request keeps running on /metrics and holds its KV for good', async () => {
    sim = await startSimServer({ ...options, leakKvOnAbort: true })
    await abortMidStream(sim, 3)
    expect(await settled(sim)).toEqual({ running: 3, waiting: 0, kv: 3 / 64 })
    expect(sim.stats().active).toBe(0)
  })

  test('leakKvOnAbort under a batch limit: the leaked seats are gone, so later requests wait', async () => {
    sim = await startSimServer({ ...options, maxBatch: 2, kvBudgetTokens: 1000, leakKvOnAbort: true })
    await abortMidStream(sim, 2)
    const leaked = await settled(sim)
    expect(leaked.running).toBe(2)
    expect(leaked.kv).toBeGreaterThan(0.2)
    const late = request(`${sim.url}/v1/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'm', prompt: 'one', max_tokens: 2, stream: true }),
    })
    await new Promise((resolve) => setTimeout(resolve, 200))
    expect(sim.stats().queued).toBe(1)
    expect((await gauges(sim)).waiting).toBe(1)
    await sim.close()
    await late.then((res) => res.body.dump()).catch(() => undefined)
  })
})
