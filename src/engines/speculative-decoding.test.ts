import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { createEnvironment, type Environment } from '../runner/environment.ts'
import { runEngineCell } from '../runner/runner.ts'
import type { Manifest } from '../schema/manifest.ts'
import { RunRecord } from '../schema/run.ts'
import { ADAPTERS } from './adapters.ts'
import { type EngineConfig, type LaunchedConfig, resolveEngineConfig } from './config.ts'

// Draft acceptance through the launch path, against the fakes (fixtures/fakes/engine.ts), whose
// /metrics carry the engines' own speculative decoding counters once their flags turn drafting on.
const FAKES = fileURLToPath(new URL('../../fixtures/fakes/', import.meta.url))
const noGpu = async (): Promise<Manifest['gpus']> => ({ status: 'absent', reason: 'test: no GPU probe' })
const testEnv: Environment = { ...createEnvironment({ telemetry: { metricsIntervalMs: 20 } }), gpuFacts: noGpu }
const CELL = { requests: 6, concurrency: 2, maxTokens: 33, workload: { promptTokens: 32 } }

let dir = ''
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'servegate-spec-'))
})
afterAll(async () => {
  await rm(dir, { recursive: true, force: true })
})

const llama = (extra: Partial<Extract<EngineConfig, { kind: 'llama-server' }>> = {}): EngineConfig => ({
  kind: 'llama-server',
  executable: join(FAKES, 'llama-server'),
  model: { id: 'tiny', path: '/w/tiny.gguf' },
  logDir: join(dir, 'logs'),
  ...extra,
})
const argv = (config: EngineConfig, gpuHost = false): string[] =>
  ADAPTERS['llama-server'].argv(resolveEngineConfig(config) as LaunchedConfig, 8000, { gpuHost })

describe('engine.llamaServer({ draftModel })', () => {
  test('passes the draft as -md with --spec-type draft-simple, offloaded like the model; nothing without one', () => {
    expect(argv(llama())).not.toContain('-md')
    expect(argv(llama({ draftModel: '/w/draft.gguf' }))).toEqual(
      expect.arrayContaining(['-md', '/w/draft.gguf', '--spec-type', 'draft-simple']),
    )
    expect(argv(llama({ draftModel: '/w/draft.gguf' }))).not.toContain('-ngld')
    expect(argv(llama({ draftModel: '/w/draft.gguf' }), true)).toEqual(expect.arrayContaining(['-ngl', '999', '-ngld', '999']))
    // An older build drafts with -md alone and refuses --spec-type.
    const older = argv(llama({ draftModel: '/w/draft.gguf', draftType: null }))
    expect(older).toContain('-md')
    expect(older).not.toContain('--spec-type')
    expect(() => resolveEngineConfig(llama({ draftModel: '' }))).toThrow(/draftModel/)
  })

  test("a launched llama-server's draft acceptance comes from its /metrics counters, drafts included", async () => {
    const record = RunRecord.parse(await runEngineCell(testEnv, llama({ draftModel: '/w/draft.gguf', slots: 2 }), CELL))
    expect(record.cellFailure).toBeNull()
    const s = record.metrics.specDecode
    expect(s).toMatchObject({ source: 'prometheus-counters', note: null })
    // Every token after each reply's first came from a verification step: its accepted drafts and a bonus token.
    expect((s?.acceptedTokens as number) + (s?.drafts as number)).toBe(6 * 32)
    expect(s?.draftTokens).toBe(3 * (s?.drafts as number))
    expect(s?.acceptanceRate).toBeGreaterThan(0.6)
    expect(s?.acceptanceRate).toBeLessThanOrEqual(0.7)
    expect(s?.meanAcceptanceLength).toBeCloseTo(1 + (s?.acceptedTokens as number) / (s?.drafts as number), 12)
    expect(s?.acceptanceRateByPosition).toHaveLength(3)
  })
})

describe('vLLM with --speculative-config', () => {
  test("its spec_decode counters over the measured requests only (warm-up's drafts excluded)", async () => {
    const vllm: EngineConfig = {
      kind: 'vllm',
      executable: join(FAKES, 'vllm'),
      model: { id: 'Qwen/Qwen3-8B' },
      logDir: join(dir, 'logs'),
      extraArgs: ['--speculative-config', '{"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 4}'],
    }
    const record = await runEngineCell(testEnv, vllm, { ...CELL, warmupRequests: 2 })
    const s = record.metrics.specDecode
    expect(s?.source).toBe('prometheus-counters')
    expect((s?.acceptedTokens as number) + (s?.drafts as number)).toBe(6 * 32)
    expect(s?.draftTokens).toBe(4 * (s?.drafts as number))
    expect(s?.acceptanceRateByPosition).toHaveLength(4)
  })

  test('without it, no figure: null, never 0', async () => {
    const vllm: EngineConfig = { kind: 'vllm', executable: join(FAKES, 'vllm'), model: { id: 'Qwen/Qwen3-8B' }, logDir: join(dir, 'logs') }
    const record = await runEngineCell(testEnv, vllm, { ...CELL, requests: 2 })
    expect(record.cellFailure).toBeNull()
    expect(record.metrics.specDecode).toBeNull()
  })
})
