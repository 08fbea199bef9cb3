import { request } from 'undici'
import { afterEach, describe, expect, test } from 'vitest'
import { parseExposition } from '../telemetry/exposition.ts'
import { readEngineMetrics } from '../telemetry/prometheus.ts'
import { type SimServer, startSimServer } from './server.ts'
import { SimSpecDecode } from './spec-decode.ts'

let sim: SimServer | null = null
afterEach(async () => {
  await sim?.close()
  sim = null
})

describe('SimSpecDecode', () => {
  test('steps of accepted drafts and a bonus token emit every token after the first; accepted ÷ drafted is the rate', () => {
    const spec = new SimSpecDecode({ draftTokens: 4, acceptanceRate: 0.5 })
    for (let i = 0; i < 50; i++) spec.add(101)
    const c = spec.counters()
    // Every token after the first came from a step: its accepted drafts plus its bonus token.
    expect(c.acceptedTokens + c.drafts).toBe(50 * 100)
    expect(c.draftTokens).toBe(4 * c.drafts)
    // The last step of a reply accepts only what is left, so the share runs a little under the rate.
    expect(c.acceptedTokens / c.draftTokens).toBeGreaterThan(0.47)
    expect(c.acceptedTokens / c.draftTokens).toBeLessThanOrEqual(0.5)
    // Accepted tokens are a prefix of the draft: position p is accepted no more often than p − 1.
    expect(c.acceptedPerPosition.reduce((a, b) => a + b, 0)).toBe(c.acceptedTokens)
    for (let p = 1; p < 4; p++) expect(c.acceptedPerPosition[p]).toBeLessThanOrEqual(c.acceptedPerPosition[p - 1] as number)
  })

  test('a reply of one token drafts nothing; rate 1 accepts every draft', () => {
    const spec = new SimSpecDecode({ draftTokens: 3, acceptanceRate: 1 })
    spec.add(1)
    expect(spec.counters().drafts).toBe(0)
    spec.add(9)
    expect(spec.counters()).toEqual({ drafts: 2, draftTokens: 6, acceptedTokens: 6, acceptedPerPosition: [2, 2, 2] })
  })
})

describe('the sim exports speculative decoding as the engines do', () => {
  for (const dialect of ['vllm', 'llama-server'] as const) {
    test(`${dialect}: its spec_decode counters, read back by servegate's own reader`, async () => {
      sim = await startSimServer({ model: 'm', decodeTokPerS: 5000, dialect, speculative: { draftTokens: 3, acceptanceRate: 0.7 } })
      for (let i = 0; i < 4; i++) {
        const res = await request(`${sim.url}/v1/completions`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ model: 'm', prompt: 'one two', max_tokens: 31, stream: true }),
        })
        await res.body.text()
      }
      const text = await (await request(`${sim.url}/metrics`)).body.text()
      const s = readEngineMetrics(parseExposition(text), dialect, 'm').specDecode
      expect(s?.acceptedTokens).toBe(4 * 30 - (s?.drafts as number))
      expect((s?.acceptedTokens as number) / (s?.draftTokens as number)).toBeCloseTo(0.7, 1)
      expect(s?.acceptedByPosition).toHaveLength(3)
    })
  }

  test('without speculative, no such series', async () => {
    sim = await startSimServer({ model: 'm' })
    const text = await (await request(`${sim.url}/metrics`)).body.text()
    expect(text).not.toMatch(/spec_decode/)
  })
})
