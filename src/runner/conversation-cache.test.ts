import { afterEach, expect, test } from 'vitest'
import type { Manifest } from '../schema/manifest.ts'
import type { PairResult } from '../schema/results.ts'
import { type SimServer, startSimServer } from '../sim/server.ts'
import type { SimOptions } from '../sim/sim-options.ts'
import { createEnvironment, type Environment } from './environment.ts'
import { runEngineCell } from './runner.ts'

const servers: SimServer[] = []
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.close()))
})

const noGpu = async (): Promise<Manifest['gpus']> => ({ status: 'absent', reason: 'test: no GPU probe' })
const env: Environment = { ...createEnvironment(), gpuFacts: noGpu, telemetry: false }

async function arm(options: SimOptions) {
  // 5000 prompt tokens/s: a turn-3 prompt of ~600 tokens prefills in ~120 ms cold, a few ms from the cache.
  const sim = await startSimServer({ model: 'm', prefillTokPerS: 5000, decodeTokPerS: 4000, ...options })
  servers.push(sim)
  const cell = {
    concurrency: 4,
    maxTokens: 4,
    usageCheck: { retokenize: false },
    workload: {
      kind: 'conversation' as const,
      sessions: 8,
      turns: 3,
      userTokens: 96,
      systemTokens: 192,
      history: 'replayed' as const,
      seed: 4,
    },
  }
  return runEngineCell(env, { kind: 'external', baseUrl: sim.url, model: { id: 'm' } }, cell)
}

test('a replayed conversation, cache off against cache on: a matched pair; the cached arm reuses its cache and wins prefill from turn 2', async () => {
  const baseline = await arm({})
  const candidate = await arm({ prefixCacheTokens: 1 << 18 })
  const p: PairResult = { kind: 'pair', id: 'conv', baseline: [baseline], candidate: [candidate], launchOrder: ['baseline', 'candidate'] }
  expect(candidate.plan.workload.requestStreamSha256).toBe(baseline.plan.workload.requestStreamSha256)
  expect(candidate.plan.workload.wireStreamSha256).toBe(baseline.plan.workload.wireStreamSha256)
  // Turn 1 finds only the shared system prompt (after the first session's); turns 2 and 3 their whole history.
  for (const r of candidate.requests)
    if ((r.turn as number) >= 2) expect(r.cachedPromptTokens).toBeGreaterThan(0.6 * (r.promptTokens as number))
  // The cell keeps the hit share by turn: the history pays from turn 2. The cache-off sim reports no
  // cached tokens at all: unknown, never 0.
  const share = (r: typeof baseline) => r.metrics.byTurn?.map((t) => t.cachedPromptShare)
  expect((share(candidate)?.[1] as number) > 0.6 && (share(candidate)?.[2] as number) > 0.6).toBe(true)
  expect(share(baseline)).toEqual([null, null, null])
  expect(p).toBeMatchedPair()
  expect(p).toReuseCache({ atLeast: 0.6, arm: 'candidate' })
  expect(p).not.toReuseCache({ atLeast: 0.6, arm: 'baseline' })
  expect(p).not.toReuseCache({ atLeast: 0.6 })
  expect(p).toWinPrefill({ margin: 0.5, turns: { from: 2 } })
})
