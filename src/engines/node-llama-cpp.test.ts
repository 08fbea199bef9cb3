import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, expect, test } from 'vitest'
import { type TinyGguf, writeTinyGguf } from '../../scripts/make-tiny-gguf.ts'
import { createEnvironment, type Environment } from '../runner/environment.ts'
import { runEngineCell } from '../runner/runner.ts'
import type { Manifest } from '../schema/manifest.ts'
import { RunRecord } from '../schema/run.ts'

const noGpu = async (): Promise<Manifest['gpus']> => ({ status: 'absent', reason: 'no nvidia-smi on this machine' })
const testEnv: Environment = { ...createEnvironment(), gpuFacts: noGpu }
let dir = ''
let model: TinyGguf
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'servegate-nlc-'))
  model = await writeTinyGguf(join(dir, 'tiny.gguf'))
})
afterAll(async () => {
  await rm(dir, { recursive: true, force: true })
})

test(
  'a real in-process llama.cpp engine is measured by the same methodology: calibrated prompts, exact lengths, one token per chunk',
  { timeout: 120_000 },
  async () => {
    const record = await runEngineCell(
      testEnv,
      { kind: 'node-llama-cpp', model: { id: 'tiny-llama', path: model.path }, sequences: 2, contextSize: 2048 },
      { requests: 4, concurrency: 2, maxTokens: 12, workload: { promptTokens: 96, seed: 3, outputControl: { mode: 'strict' } } },
      {},
    )
    expect(RunRecord.parse(record)).toBeTruthy()
    expect(record.cellFailure).toBeNull()
    expect(record.completed).toBe(4)
    expect(record.target.baseUrl).toBe('in-process')
    for (const r of record.requests) {
      expect(r.completionTokens).toBe(12)
      expect(r.completionTokenSource).toBe('usage')
      expect(r.contentChunks).toBe(12)
      expect(r.itlMs).toHaveLength(11)
      expect(Math.abs((r.promptTokens as number) - 96)).toBeLessThanOrEqual(8)
      expect(r.plannedPromptTokens).toBe(r.promptTokens)
      expect(r.decodeTokPerS as number).toBeGreaterThan(0)
    }
    expect(record.metrics.outputControl).toMatchObject({ exact: 4, samples: 4 })
    expect(record.plan.workload.calibration?.method).toBe('engine-tokenizer')
    expect(record.plan.workload.wireMatchesPlan).toBe(true)
    const m = record.manifest as Manifest
    expect(m.engine).toMatchObject({ kind: 'node-llama-cpp', shape: 'in-process', argv: null, version: { value: 'node-llama-cpp 3.21.1' } })
    expect(m.model.fingerprint).toEqual({ value: model.sha256, source: `sha256 of the model file ${model.path}`, reason: null })
  },
)

test('a model file that does not load becomes a failed cell with the reason', async () => {
  const record = await runEngineCell(
    testEnv,
    { kind: 'node-llama-cpp', model: { id: 'x', path: join(dir, 'missing.gguf') } },
    { requests: 2, workload: { promptTokens: 32 } },
    {},
  )
  expect(record.cellFailure?.code).toBe('ENGINE_EXITED')
  expect(record.cellFailure?.message).toMatch(/^node-llama-cpp could not load .*missing\.gguf/)
})
