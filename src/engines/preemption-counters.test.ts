import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { createEnvironment, type Environment } from '../runner/environment.ts'
import { runEngineCell } from '../runner/runner.ts'
import type { Manifest } from '../schema/manifest.ts'
import type { EngineOccupancy } from '../schema/telemetry.ts'
import type { EngineConfig } from './config.ts'

// The fakes name the counters as the engines' source does (fixtures/fakes/engine.ts, src/sim/metrics.ts).
const FAKES = fileURLToPath(new URL('../../fixtures/fakes/', import.meta.url))
const noGpu = async (): Promise<Manifest['gpus']> => ({ status: 'absent', reason: 'test: no GPU probe' })
const testEnv: Environment = { ...createEnvironment({ telemetry: { metricsIntervalMs: 20 } }), gpuFacts: noGpu }

let dir = ''
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'servegate-preemption-'))
})
afterAll(async () => {
  await rm(dir, { recursive: true, force: true })
})

function engine(kind: 'vllm' | 'sglang' | 'llama-server', share: number): EngineConfig {
  const env = { FAKE_ENGINE_DECODE_TOK_PER_S: '400', FAKE_ENGINE_PREEMPTION_SHARE: String(share) }
  const model = { id: 'Qwen/Qwen3-8B' }
  const logDir = join(dir, 'logs')
  if (kind === 'sglang') return { kind, python: join(FAKES, 'python'), model, logDir, env }
  return { kind, executable: join(FAKES, kind), model, logDir, env }
}

/** The engine block of a cell of 8 requests; every other request is preempted once, so 4 of the measured ones. */
async function occupancyOf(kind: 'vllm' | 'sglang' | 'llama-server', share: number): Promise<EngineOccupancy> {
  const record = await runEngineCell(testEnv, engine(kind, share), {
    requests: 8,
    concurrency: 2,
    maxTokens: 8,
    workload: { promptTokens: 16 },
  })
  expect(record.cellFailure).toBeNull()
  const block = record.telemetry?.engine
  if (block?.status !== 'ok') throw new Error(`no engine telemetry: ${JSON.stringify(block)}`)
  return block.occupancy
}

describe('preemptions of the measured phase, from the fakes’ counters', () => {
  test('vLLM: vllm:num_preemptions_total differenced from the load start (warm-up requests left out)', async () => {
    const occupancy = await occupancyOf('vllm', 0.5)
    expect(occupancy.preemptions).toBe(4)
    expect(occupancy.reasons.preemptions).toBeUndefined()
  })

  test('SGLang: sglang:num_retracted_requests_total, whose series appears at the first retraction', async () => {
    expect((await occupancyOf('sglang', 0.5)).preemptions).toBe(4)
    const none = await occupancyOf('sglang', 0)
    expect(none.preemptions).toBeNull()
    expect(none.reasons.preemptions).toMatch(/^sglang:num_retracted_requests_total is not in the engine's metrics .*first retraction/)
  })

  test('llama-server has no such counter: null with the reason', async () => {
    const occupancy = await occupancyOf('llama-server', 0.5)
    expect(occupancy.preemptions).toBeNull()
    expect(occupancy.reasons.preemptions).toMatch(/^llama-server exports no preemption counter/)
  })
})
