import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { llamaServerPath } from '../../scripts/build-llama-server.ts'
import { type TinyGguf, writeTinyGguf } from '../../scripts/make-tiny-gguf.ts'
import { createEnvironment, type Environment } from '../runner/environment.ts'
import { runEngineCell } from '../runner/runner.ts'
import type { Manifest } from '../schema/manifest.ts'
import type { RunRecord } from '../schema/run.ts'
import type { EngineConfig } from './config.ts'

// CI builds llama-server first (npm run build:llama-server); a machine without it skips these.
const binary = await llamaServerPath()
const noGpu = async (): Promise<Manifest['gpus']> => ({ status: 'absent', reason: 'no nvidia-smi on this machine' })
const testEnv: Environment = { ...createEnvironment(), gpuFacts: noGpu }
const median = (values: readonly number[]): number => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)] as number

describe.skipIf(binary === null)('the real llama-server under open-loop load', () => {
  let dir = ''
  let model: TinyGguf
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'servegate-llama-load-'))
    model = await writeTinyGguf(join(dir, 'tiny.gguf'))
  })
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true })
  })

  const engine = (): EngineConfig => ({
    kind: 'llama-server',
    executable: binary as string,
    model: { id: 'tiny-llama', path: model.path },
    slots: 1,
    threads: 1,
    maxContext: 4096,
    logDir: join(dir, 'logs'),
    startupTimeoutMs: 60_000,
  })
  // Requests of a known size (1024-token prompts, exactly 64 output tokens) and harness bounds for
  // a client that shares two cores with the engine: its send lag is asserted small below instead.
  const cell = {
    maxTokens: 64,
    workload: { promptTokens: 1024, outputControl: { mode: 'strict' as const } },
    sendLagLimitMs: 50,
    eventLoopDelayLimitMs: 100,
  }
  const ttfts = (r: RunRecord) => r.requests.map((q) => q.ttftMs as number)

  test(
    'beyond its one slot requests queue: the time to first token grows request after request, below it it does not',
    { timeout: 120_000 },
    async () => {
      // The service time of one request with the slot to itself sets the slot's capacity.
      // Warm (a fresh launch's first requests page the model in): the rates below are offered to a warm engine.
      const alone = await runEngineCell(testEnv, engine(), { ...cell, requests: 4, warmupRequests: 2 })
      expect(alone.failures).toEqual({})
      const serviceS = (alone.metrics.distributions.e2eMs.p50 as number) / 1000
      // Offered load as a multiple of the slot's capacity.
      const at = (load: number, requests = 12) =>
        runEngineCell(testEnv, engine(), { ...cell, requests, arrival: { kind: 'constant', ratePerS: load / serviceS } })

      const below = await at(0.5)
      expect(below.failures).toEqual({})
      expect(median(ttfts(below).slice(-4))).toBeLessThan(2 * median(ttfts(below).slice(0, 4)) + 20)

      // This machine's speed drifts between runs by a third; the service time the queue grows by is
      // the one just measured, with nothing queued.
      const belowServiceMs = below.metrics.distributions.e2eMs.p50 as number
      // 16 requests: twelve queueing steps between the medians compared below.
      const above = await at(3, 16)
      expect(above.failures).toEqual({})
      const t = ttfts(above)
      // Three times the slot's capacity: each request waits about two thirds of a service time longer than the one before.
      expect(median(t.slice(-4))).toBeGreaterThan(median(t.slice(0, 4)) + 3 * belowServiceMs)
      expect(t[11] as number).toBeGreaterThan(t[6] as number)
      expect(t[6] as number).toBeGreaterThan(t[1] as number)
      // The delay is the engine's queue, not the client's: sends stayed on schedule, and llama-server deferred requests.
      expect(above.harness.reasons).toEqual([])
      expect(above.harness.sendLagP99Ms as number).toBeLessThan(median(t.slice(-4)) / 4)
      const engineMetrics = above.telemetry?.engine
      expect(engineMetrics?.status).toBe('ok')
      if (engineMetrics?.status === 'ok') {
        expect(engineMetrics.occupancy.runningMax).toBe(1)
        expect(engineMetrics.occupancy.waitingMax as number).toBeGreaterThanOrEqual(1)
        expect(engineMetrics.concurrency).toBeNull()
      }
    },
  )
})
