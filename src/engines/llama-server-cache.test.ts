import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { llamaServerPath } from '../../scripts/build-llama-server.ts'
import { type TinyGguf, writeTinyGguf } from '../../scripts/make-tiny-gguf.ts'
import { createEnvironment, type Environment } from '../runner/environment.ts'
import { runEngineCell } from '../runner/runner.ts'
import type { Manifest } from '../schema/manifest.ts'
import { RunRecord } from '../schema/run.ts'

// CI builds llama-server first (npm run build:llama-server); a machine without it skips these.
const binary = await llamaServerPath()
const noGpu = async (): Promise<Manifest['gpus']> => ({ status: 'absent', reason: 'no nvidia-smi on this machine' })
const env: Environment = { ...createEnvironment(), gpuFacts: noGpu, telemetry: false }

describe.skipIf(binary === null)('the real llama-server’s prompt cache', () => {
  let dir = ''
  let model: TinyGguf
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'servegate-llama-cache-'))
    model = await writeTinyGguf(join(dir, 'tiny.gguf'))
  })
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true })
  })

  test('a shared system prompt: cached tokens read from its replies, its slot erased before the cell', { timeout: 120_000 }, async () => {
    const record = await runEngineCell(
      env,
      {
        kind: 'llama-server',
        executable: binary as string,
        model: { id: 'tiny-llama', path: model.path },
        slots: 1,
        threads: 1,
        maxContext: 2048,
        // Without its host-memory prompt cache the slot erase empties everything it caches.
        extraArgs: ['--cache-ram', '0'],
        logDir: join(dir, 'logs'),
        startupTimeoutMs: 60_000,
      },
      {
        maxTokens: 4,
        usageCheck: { retokenize: false },
        workload: { kind: 'shared-prefix', groups: 1, promptsPerGroup: 4, systemTokens: 384, questionTokens: 16, seed: 9 },
      },
    )
    expect(RunRecord.parse(record).cellFailure).toBeNull()
    expect(record.completed).toBe(4)
    expect(record.plan.prefixCacheReset).toEqual({ status: 'reset', endpoints: ['GET /slots', 'POST /slots/0?action=erase'], reason: null })
    const cached = record.requests.map((r) => r.cachedPromptTokens as number)
    // The first request finds nothing (its slot was erased); the others find the system prompt in the slot.
    expect(cached[0]).toBe(0)
    for (const c of cached.slice(1)) expect(c).toBeGreaterThan(300)
    expect(record.metrics.cachedPromptShare).toBeGreaterThan(0.5)
  })
})
