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
import type { EngineConfig } from './config.ts'

// CI builds llama-server first (npm run build:llama-server); a machine without it skips these.
const binary = await llamaServerPath()
const noGpu = async (): Promise<Manifest['gpus']> => ({ status: 'absent', reason: 'no nvidia-smi on this machine' })
const testEnv: Environment = { ...createEnvironment(), gpuFacts: noGpu }

describe.skipIf(binary === null)('the real llama-server, launched through its adapter', () => {
  let dir = ''
  let model: TinyGguf
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'servegate-llama-'))
    model = await writeTinyGguf(join(dir, 'tiny.gguf'))
  })
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true })
  })

  const engine = (slots: number): EngineConfig => ({
    kind: 'llama-server',
    executable: binary as string,
    model: { id: 'tiny-llama', path: model.path },
    slots,
    threads: 1,
    maxContext: 4096,
    logDir: join(dir, 'logs'),
    startupTimeoutMs: 60_000,
  })

  test(
    'prompts are calibrated with its own tokenizer and chat template; prefill time grows with prompt length',
    { timeout: 120_000 },
    async () => {
      const cell = (promptTokens: number) => ({ requests: 6, maxTokens: 4, workload: { promptTokens, seed: promptTokens } })
      const short = await runEngineCell(testEnv, engine(1), cell(128))
      const long = await runEngineCell(testEnv, engine(1), cell(3000))
      for (const [record, planned] of [
        [short, 128],
        [long, 3000],
      ] as const) {
        expect(RunRecord.parse(record).cellFailure).toBeNull()
        expect(record.completed).toBe(6)
        expect(record.plan.workload.calibration).toMatchObject({ method: 'engine-tokenizer', outsideTolerance: 0 })
        expect(record.plan.workload.calibration?.tokenizer).toMatch(/apply-template/)
        const tolerance = Math.max(8, Math.ceil(planned * 0.005))
        for (const r of record.requests) expect(Math.abs((r.promptTokens as number) - planned)).toBeLessThanOrEqual(tolerance)
      }
      const ttfo = (r: RunRecord) => r.metrics.distributions.timeToFirstOutputMs.p50 as number
      expect(ttfo(long)).toBeGreaterThan(2 * ttfo(short))
      const m = long.manifest as Manifest
      expect(m.engine.kind).toBe('llama-server')
      expect(m.engine.version.value).toMatch(/^b\d+-[0-9a-f]+$/)
      expect(m.engine.argv).toEqual(expect.arrayContaining(['--alias', 'tiny-llama', '-np', '1', '-t', '1', '--metrics', '-c', '4096']))
      expect(m.model.fingerprint.value).toBe(model.sha256)
    },
  )

  test('ignore_eos gives exactly max_tokens completion tokens, one token per chunk', { timeout: 60_000 }, async () => {
    const record = await runEngineCell(
      testEnv,
      engine(2),
      { requests: 6, concurrency: 2, maxTokens: 24, workload: { promptTokens: 64, outputControl: { mode: 'strict', knob: 'ignore_eos' } } },
      {},
    )
    expect(record.failures).toEqual({})
    expect(record.metrics.outputControl).toEqual({ samples: 6, exact: 6, rate: 1, unobservable: 0 })
    for (const r of record.requests) {
      expect(r.completionTokens).toBe(24)
      expect(r.completionTokenSource).toBe('usage')
      expect(r.contentChunks).toBe(24)
    }
  })

  test(
    'the tiny model as its own draft: greedy drafts are all accepted, by its counters and by each reply',
    { timeout: 120_000 },
    async () => {
      const record = await runEngineCell(
        testEnv,
        { ...(engine(1) as Extract<EngineConfig, { kind: 'llama-server' }>), draftModel: model.path },
        { requests: 4, maxTokens: 32, workload: { promptTokens: 64, sampling: { temperature: 0 } } },
      )
      expect(RunRecord.parse(record).cellFailure).toBeNull()
      expect(record.manifest?.engine.argv).toEqual(expect.arrayContaining(['-md', model.path, '--spec-type', 'draft-simple']))
      const s = record.metrics.specDecode
      expect(s?.source).toBe('prometheus-counters')
      expect(s?.drafts).toBeGreaterThan(0)
      expect(s?.acceptanceRate).toBeGreaterThan(0.95)
      // Several tokens per verification step: the draft's own guesses, then the bonus token.
      expect(s?.meanAcceptanceLength).toBeGreaterThan(2)
      for (const r of record.requests) {
        const drafted = r.engineTimings?.['draft_n'] as number
        expect(drafted).toBeGreaterThan(0)
        expect(r.engineTimings?.['draft_n_accepted']).toBeGreaterThan(0.95 * drafted)
      }
    },
  )
})
