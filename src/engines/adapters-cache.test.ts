import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { createEnvironment, type Environment } from '../runner/environment.ts'
import { runEngineCell } from '../runner/runner.ts'
import type { Manifest } from '../schema/manifest.ts'
import type { EngineConfig } from './config.ts'

const FAKES = fileURLToPath(new URL('../../fixtures/fakes/', import.meta.url))
const noGpu = async (): Promise<Manifest['gpus']> => ({ status: 'absent', reason: 'test: no GPU probe' })
const env: Environment = { ...createEnvironment(), gpuFacts: noGpu, telemetry: false }
/** Two groups of five requests, each group opening with its own 256-token system prompt. */
const cell = {
  maxTokens: 4,
  usageCheck: { retokenize: false },
  workload: { kind: 'shared-prefix' as const, groups: 2, promptsPerGroup: 5, systemTokens: 256, questionTokens: 24, seed: 3 },
}

let dir = ''
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'servegate-adapter-cache-'))
})
afterAll(async () => {
  await rm(dir, { recursive: true, force: true })
})

function fake(kind: 'vllm' | 'sglang' | 'llama-server', extra: Partial<EngineConfig> = {}): EngineConfig {
  const common = { model: { id: 'fake/model' }, logDir: join(dir, 'logs'), startupTimeoutMs: 20_000 }
  if (kind === 'vllm') return { kind, executable: join(FAKES, 'vllm'), ...common, ...extra } as EngineConfig
  if (kind === 'sglang') return { kind, python: join(FAKES, 'python'), ...common, ...extra } as EngineConfig
  return { kind, executable: join(FAKES, 'llama-server'), slots: 2, ...common, ...extra } as EngineConfig
}

describe('launched engines report cached prompt tokens and have their prefix cache reset before the cell', () => {
  test.each([
    ['vllm', ['--enable-prompt-tokens-details'], { status: 'reset', endpoints: ['POST /reset_prefix_cache'] }],
    ['sglang', ['--enable-cache-report'], { status: 'reset', endpoints: ['POST /reset_prefix_cache', 'POST /flush_cache'] }],
    [
      'llama-server',
      ['--slot-save-path', resolve(dir || '.', 'logs')],
      // Its host-memory prompt cache has no reset: the record says so.
      { status: 'partial', endpoints: ['GET /slots', 'POST /slots/0?action=erase', 'POST /slots/1?action=erase'] },
    ],
  ] as const)('%s', async (kind, flags, reset) => {
    const record = await runEngineCell(env, fake(kind), cell)
    expect(record.cellFailure).toBeNull()
    expect(record.completed).toBe(10)
    const argv = record.manifest?.engine.argv ?? []
    if (kind === 'llama-server') expect(argv).toEqual(expect.arrayContaining(['--slot-save-path', resolve(dir, 'logs')]))
    else expect(argv).toEqual(expect.arrayContaining([...flags]))
    expect(record.plan.prefixCacheReset).toMatchObject(reset)
    // Each group's first request is cold (a token-level cache still finds the template's opening tokens); the
    // four after it find its system prompt.
    expect(record.requests.filter((r) => (r.cachedPromptTokens as number) < 16)).toHaveLength(2)
    expect(record.metrics.cachedPromptShare).toBeGreaterThan(0.5)
  })

  test('a flag the config already gives is not given twice; vLLM told to leave dev mode off is not reset, and says why', async () => {
    const record = await runEngineCell(
      env,
      fake('vllm', { extraArgs: ['--enable-prompt-tokens-details'], env: { VLLM_SERVER_DEV_MODE: '0' } }),
      cell,
    )
    const argv = record.manifest?.engine.argv ?? []
    expect(argv.filter((a) => a === '--enable-prompt-tokens-details')).toHaveLength(1)
    expect(record.plan.prefixCacheReset).toMatchObject({ status: 'not-offered', reason: expect.stringMatching(/VLLM_SERVER_DEV_MODE=1/) })
  })

  test('vLLM without --enable-prompt-tokens-details reports nothing: unknown with the reason, never 0', async () => {
    // The fake, as the real vLLM, caches prefixes either way; only the figure is missing.
    const record = await runEngineCell(
      env,
      {
        kind: 'command',
        argv: [join(FAKES, 'vllm'), 'serve', '{modelId}', '--port', '{port}'],
        model: { id: 'fake/model' },
        healthPath: '/health',
        logDir: join(dir, 'logs'),
      },
      cell,
    )
    expect(record.completed).toBe(10)
    expect(record.metrics.totalCachedPromptTokens).toBeNull()
    expect(record.metrics.cachedPromptTokensUnknownReason).toMatch(/--enable-prompt-tokens-details/)
  })
})
