import { afterEach, describe, expect, test } from 'vitest'
import type { RunRecord } from '../schema/run.ts'
import type { SimOptions } from '../sim/sim-options.ts'
import { type SimServer, startSimServer } from '../sim/server.ts'
import { calibrationTolerance } from '../workload/prepare.ts'
import { runCell } from './measure-cell.ts'

const servers: SimServer[] = []
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.close()))
})

async function sim(options: SimOptions = {}): Promise<SimServer> {
  const s = await startSimServer({ model: 'm', prefillTokPerS: 200_000, decodeTokPerS: 4000, ...options })
  servers.push(s)
  return s
}

/** Each test its own seed: the once-per-plan calibration cache never crosses tests. */
let seed = 52_000
const nextSeed = () => seed++

describe('drawn prompt and output sizes', () => {
  test('both arms get identical bytes; the plan keeps every draw; each prompt is fitted to its own size', async () => {
    const a = await sim({ model: 'baseline-model' })
    const b = await sim({ model: 'candidate-model' })
    const cell = {
      requests: 12,
      concurrency: 3,
      maxTokens: { uniform: [4, 12] as [number, number] },
      workload: { promptTokens: { lognormal: { median: 120, sigma: 0.4 } }, seed: nextSeed() },
      usageCheck: { retokenize: false },
    }
    const ra = await runCell({ baseUrl: a.url, model: 'baseline-model', ...cell })
    const rb = await runCell({ baseUrl: b.url, model: 'candidate-model', ...cell })
    expect([ra.completed, rb.completed]).toEqual([12, 12])
    const [wa, wb] = [ra.plan.workload, rb.plan.workload]
    expect(wb.requestStreamSha256).toBe(wa.requestStreamSha256)
    expect([wa.wireStreamSha256, wb.wireStreamSha256]).toEqual([wa.requestStreamSha256, wa.requestStreamSha256])
    expect(wb.lengths).toEqual(wa.lengths)

    const prompts = wa.lengths?.promptTokens
    const maxes = wa.lengths?.maxTokens
    expect(prompts?.distribution).toEqual({ lognormal: { median: 120, sigma: 0.4 } })
    expect(prompts?.tokens).toHaveLength(12)
    expect(new Set(prompts?.tokens).size).toBeGreaterThan(4)
    expect(maxes?.distribution).toEqual({ uniform: [4, 12] })
    expect(maxes?.tokens.every((t) => t >= 4 && t <= 12)).toBe(true)
    expect(wa.promptTokens).toBe(Math.round(prompts?.meanTokens ?? 0))
    expect(ra.plan.maxTokens).toBeNull()
    // Calibrated with the engine's tokenizer: each request's prompt is its own draw, as the engine counts it.
    expect(wa.calibration?.method).toBe('engine-tokenizer')
    for (const r of ra.requests) {
      const drawn = prompts?.tokens[r.index] as number
      expect(Math.abs((r.promptTokens as number) - drawn)).toBeLessThanOrEqual(calibrationTolerance(drawn))
    }
    expect(b.stats().tokenizeRequests).toBe(0)
  })

  test('output control: each drawn max_tokens is held exactly and checked against it', async () => {
    const s = await sim({ outputTokens: 2 })
    const r = await runCell({
      baseUrl: s.url,
      model: 'm',
      requests: 10,
      concurrency: 2,
      maxTokens: { normal: { mean: 20, sd: 6 } },
      workload: { promptTokens: 64, seed: nextSeed(), outputControl: { mode: 'strict' } },
    })
    const drawn = r.plan.workload.lengths?.maxTokens?.tokens ?? []
    expect(new Set(drawn).size).toBeGreaterThan(3)
    expect(r.completed).toBe(10)
    expect(r.requests.map((q) => q.completionTokens)).toEqual(r.requests.map((q) => drawn[q.index]))
    expect(r.metrics.outputControl).toMatchObject({ samples: 10, exact: 10, rate: 1 })
  })

  test('strict output control on an engine that ignores the knob names the drawn size it missed', async () => {
    const s = await sim({ outputTokens: 3, ignoreOutputKnobs: true })
    const r = await runCell({
      baseUrl: s.url,
      model: 'm',
      requests: 4,
      maxTokens: { uniform: [10, 20] },
      workload: { promptTokens: 64, seed: nextSeed(), outputControl: { mode: 'strict' } },
    })
    const drawn = r.plan.workload.lengths?.maxTokens?.tokens ?? []
    expect(r.failures).toEqual({ CONTRACT_INVALID: 4 })
    const messages = r.requests.map((q) => (q.status === 'failed' ? q.error.message : ''))
    expect(messages).toEqual(drawn.map((t) => `output control strict: 3 completion tokens, expected exactly ${t}`))
  })

  test('the context check takes the largest draw: a request the model cannot hold fails before any load', async () => {
    const s = await sim({ maxModelLen: 400 })
    const cell = {
      baseUrl: s.url,
      model: 'm',
      requests: 50,
      workload: { seed: nextSeed(), promptTokens: { uniform: [200, 395] as [number, number] } },
    }
    // 50 draws from 200 … 395: some request draws more than 384, which leaves no room for 16 output tokens.
    const error = await runCell({ ...cell, maxTokens: 16 }).then(
      () => null,
      (e: Error) => e,
    )
    expect(error?.message).toMatch(
      /^request \d+ draws workload\.promptTokens \(--prompt-tokens\) (\d+) \+ maxTokens \(--max-tokens\) 16 = \d+, which exceeds the model's context of 400 tokens/,
    )
    expect(s.stats().requests).toBe(0)
    const ok: RunRecord = await runCell({
      ...cell,
      maxTokens: 8,
      requests: 4,
      workload: { seed: nextSeed(), promptTokens: { uniform: [100, 300] } },
    })
    expect(ok.completed).toBe(4)
  })
})
