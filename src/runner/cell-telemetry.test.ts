import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { llamaServerPath } from '../../scripts/build-llama-server.ts'
import { writeTinyGguf } from '../../scripts/make-tiny-gguf.ts'
import { RunRecord } from '../schema/run.ts'
import { createEnvironment } from './environment.ts'
import { runEngineCell } from './runner.ts'

const FAKES = fileURLToPath(new URL('../../fixtures/fakes/', import.meta.url))
const NVIDIA_SMI = join(FAKES, 'nvidia-smi')
let dir = ''
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'servegate-telemetry-'))
})
afterAll(async () => {
  delete process.env.FAKE_NVIDIA_SMI_LOAD_FILE
  await rm(dir, { recursive: true, force: true })
})

describe('telemetry during a cell on a launched engine', () => {
  test(
    'GPU facts and samples from nvidia-smi, engine occupancy from its metrics, host memory from the cgroup',
    { timeout: 60_000 },
    async () => {
      const loadFile = join(dir, 'gpu-busy')
      process.env.FAKE_NVIDIA_SMI_LOAD_FILE = loadFile
      // One nvidia-smi, configured once: the manifest's facts and the sampler both use it.
      const env = createEnvironment({ nvidiaSmi: NVIDIA_SMI, telemetry: { gpuIntervalMs: 50, metricsIntervalMs: 50 } })
      const record = await runEngineCell(
        env,
        {
          kind: 'vllm',
          executable: join(FAKES, 'vllm'),
          model: { id: 'fake/m' },
          gpus: '0',
          env: { FAKE_ENGINE_DECODE_TOK_PER_S: '50' },
          logDir: join(dir, 'logs'),
        },
        { requests: 16, concurrency: 4, maxTokens: 20, workload: { promptTokens: 64 } },
        {
          // The fake GPU draws load power once requests are flowing.
          onProgress: () => void writeFile(loadFile, ''),
        },
      )
      expect(RunRecord.parse(record).cellFailure).toBeNull()
      expect(record.manifest?.gpus).toMatchObject({
        status: 'ok',
        devices: [{ index: 0, name: 'NVIDIA H100 80GB HBM3', driverVersion: '550.54.15' }],
      })
      const t = record.telemetry
      expect(t?.gpu.status).toBe('ok')
      if (t?.gpu.status === 'ok') {
        expect(t.gpu.facts).toHaveLength(1)
        const summary = t.gpu.summary
        expect(summary.status).toBe('ok')
        if (summary.status === 'ok')
          expect(summary.worst.activePowerP95W?.value).toBeGreaterThan(summary.devices[0]?.idlePowerW ?? Infinity)
      }
      expect(t?.engine).toMatchObject({ status: 'ok', concurrency: { requested: 4, reached: true } })
      if (t?.engine.status === 'ok') expect(t.engine.occupancy.runningMax).toBe(4)
      // The engine's own histograms (prefill, time to first token, decode) against the client's times.
      const agreement = t?.timingAgreement
      expect(agreement?.status).toBe('ok')
      if (agreement?.status === 'ok') {
        expect(agreement.comparisons.map((c) => [c.metric, c.samples, c.verdict])).toEqual([
          ['prefill', 16, 'agree'],
          ['time-to-first-token', 16, 'agree'],
          ['generation', 16, 'agree'],
        ])
      }
      expect(['ok', 'absent']).toContain(t?.hostMemory.status)
    },
  )

  test('no GPU: every GPU figure is absent with nvidia-smi’s own reason', { timeout: 30_000 }, async () => {
    const record = await runEngineCell(
      createEnvironment({ nvidiaSmi: join(FAKES, 'nvidia-smi-broken') }),
      { kind: 'vllm', executable: join(FAKES, 'vllm'), model: { id: 'fake/m' }, logDir: join(dir, 'logs') },
      { requests: 2, maxTokens: 4, workload: { promptTokens: 32 } },
    )
    expect(record.manifest?.gpus).toMatchObject({
      status: 'absent',
      reason: expect.stringMatching(/couldn't communicate with the NVIDIA driver/),
    })
    expect(record.telemetry?.gpu).toMatchObject({
      status: 'absent',
      reason: expect.stringMatching(/couldn't communicate with the NVIDIA driver/),
    })
  })
})

const binary = await llamaServerPath()
describe.skipIf(binary === null)('telemetry of the real llama-server', () => {
  test(
    'concurrency beyond its slots shows waiting requests in its metrics; its own timings agree with the client’s',
    { timeout: 120_000 },
    async () => {
      const model = await writeTinyGguf(join(dir, 'tiny.gguf'))
      const record = await runEngineCell(
        createEnvironment({ nvidiaSmi: join(dir, 'no-nvidia-smi'), telemetry: { metricsIntervalMs: 20 } }),
        {
          kind: 'llama-server',
          executable: binary as string,
          model: { id: 'tiny', path: model.path },
          slots: 2,
          maxContext: 2048,
          logDir: join(dir, 'logs'),
        },
        { requests: 24, concurrency: 6, maxTokens: 200, workload: { promptTokens: 400, outputControl: { mode: 'observe' } } },
      )
      expect(record.completed).toBe(24)
      const engine = record.telemetry?.engine
      expect(engine?.status).toBe('ok')
      if (engine?.status === 'ok') {
        expect(engine.occupancy.runningMax).toBe(2)
        expect(engine.occupancy.waitingMax).toBeGreaterThan(0)
        expect(engine.concurrency?.reached).toBe(false)
      }
      const agreement = record.telemetry?.timingAgreement
      expect(agreement?.status).toBe('ok')
      if (agreement?.status === 'ok') {
        const prefill = agreement.comparisons.find((c) => c.metric === 'prefill')
        expect(prefill?.samples).toBe(24)
        expect(prefill?.verdict).toBe('agree')
      }
      expect(record.requests.every((r) => typeof r.engineTimings?.prompt_ms === 'number')).toBe(true)
      // The engine's own prefill rate is kept beside the client's, which also holds the waiting.
      for (const r of record.requests) {
        const t = r.engineTimings as { prompt_n: number; prompt_ms: number }
        expect(r.enginePrefillTokPerS).toBeCloseTo(t.prompt_n / (t.prompt_ms / 1000), 6)
      }
    },
  )
})
