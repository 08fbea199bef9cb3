import { afterEach, describe, expect, test } from 'vitest'
import { CACHED_PROMPT_TOKENS_UNREPORTED } from '../metrics/cached-prompt.ts'
import type { Manifest } from '../schema/manifest.ts'
import { RunRecord } from '../schema/run.ts'
import { type SimServer, startSimServer } from '../sim/server.ts'
import type { SimOptions } from '../sim/sim-options.ts'
import { createEnvironment, type Environment } from './environment.ts'
import { reusesPrefixes } from './prefix-cache-isolation.ts'
import { runEngineCell } from './runner.ts'
import { resolveCellPlan } from './cell-options.ts'

const servers: SimServer[] = []
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.close()))
})

const noGpu = async (): Promise<Manifest['gpus']> => ({ status: 'absent', reason: 'test: no GPU probe' })
const env: Environment = { ...createEnvironment(), gpuFacts: noGpu, telemetry: false }

async function sim(options: SimOptions = {}): Promise<SimServer> {
  // 2000 system tokens at 20000 tok/s: 100 ms of prefill when nothing is cached.
  const s = await startSimServer({ model: 'm', prefillTokPerS: 20_000, decodeTokPerS: 4000, ...options })
  servers.push(s)
  return s
}

const groupsCell = {
  maxTokens: 4,
  usageCheck: { retokenize: false },
  workload: { kind: 'shared-prefix' as const, groups: 2, promptsPerGroup: 6, systemTokens: 2000, questionTokens: 32, seed: 7 },
}

const onSim = (server: SimServer) => runEngineCell(env, { kind: 'external', baseUrl: server.url, model: { id: 'm' } }, groupsCell)

describe('reusesPrefixes', () => {
  test.each([
    [{ kind: 'shared-prefix', promptTokens: 128 }, null, true],
    [{ kind: 'conversation', sessions: 2, turns: 2, userTokens: 32 }, null, true],
    [{ kind: 'synthetic-summary', prefixCache: { mode: 'shared', tokens: 64 } }, null, true],
    [{ kind: 'synthetic-summary' }, null, false],
    [{ kind: 'dataset', datasetPath: 'fixtures/datasets/arithmetic.jsonl' }, null, false],
  ] as const)('%j → %s', (workload, _arrival, expected) => {
    expect(reusesPrefixes(resolveCellPlan({ workload, requests: 4 }))).toBe(expected)
  })

  test('a replayed trace reuses prefixes (its hash_ids)', () => {
    expect(reusesPrefixes({ workload: { kind: 'synthetic-summary', prefixCache: { mode: 'unique' } }, arrival: { kind: 'trace' } })).toBe(
      true,
    )
    expect(reusesPrefixes({ workload: { kind: 'synthetic-summary', prefixCache: { mode: 'unique' } }, arrival: { kind: 'poisson' } })).toBe(
      false,
    )
  })
})

describe('a shared-prefix cell on the simulated engine', () => {
  test('with its prefix cache on: the engine-reported cached share is large and TTFT far below the cache-off cell', async () => {
    const cached = await onSim(await sim({ prefixCacheTokens: 1 << 16 }))
    const uncached = await onSim(await sim())
    for (const r of [cached, uncached]) {
      expect(RunRecord.parse(r).cellFailure).toBeNull()
      expect(r.completed).toBe(12)
    }
    // The first request of each group is cold; the other ten find their group's system prompt.
    expect(cached.requests.filter((r) => r.cachedPromptTokens === 0)).toHaveLength(2)
    expect(cached.metrics.cachedPromptShare).toBeGreaterThan(0.75)
    expect(cached.metrics.totalCachedPromptTokens).toBe(cached.requests.reduce((sum, r) => sum + (r.cachedPromptTokens ?? 0), 0))
    expect(cached.metrics.cachedPromptTokensUnknownReason).toBeNull()
    expect(cached.plan.prefixCacheReset).toEqual({ status: 'reset', endpoints: ['POST /reset_prefix_cache'], reason: null })

    // With the cache off the sim reports nothing: unknown with the reason, never 0.
    expect(uncached.metrics.totalCachedPromptTokens).toBeNull()
    expect(uncached.metrics.cachedPromptShare).toBeNull()
    expect(uncached.metrics.cachedPromptTokensUnknownReason).toBe(CACHED_PROMPT_TOKENS_UNREPORTED)
    const p50 = (r: RunRecord) => r.metrics.distributions.ttftMs.p50 as number
    expect(p50(cached)).toBeLessThan(p50(uncached) / 3)
  })

  test('the cell after it on the same engine starts cold: its cache was reset before it', async () => {
    const server = await sim({ prefixCacheTokens: 1 << 16 })
    const first = await onSim(server)
    const second = await onSim(server)
    // The same seed sends the same system prompts; without the reset the second cell's first requests would hit.
    expect(second.requests.map((r) => r.cachedPromptTokens)).toEqual(first.requests.map((r) => r.cachedPromptTokens))
    expect(second.plan.prefixCacheReset?.status).toBe('reset')
  })

  test('an engine without a reset: the cell runs and its record says why it was not reset', async () => {
    const record = await onSim(await sim({ prefixCacheTokens: 1 << 16, cacheReset: false }))
    expect(record.completed).toBe(12)
    expect(record.plan.prefixCacheReset).toMatchObject({ status: 'not-offered', reason: expect.stringMatching(/answers none of/) })
  })

  test('a cell that reuses no prefixes resets nothing', async () => {
    const server = await sim({ prefixCacheTokens: 1 << 16 })
    const record = await runEngineCell(env, { kind: 'external', baseUrl: server.url, model: { id: 'm' } }, { requests: 2, maxTokens: 4 })
    expect(record.plan.prefixCacheReset).toBeNull()
  })
})
