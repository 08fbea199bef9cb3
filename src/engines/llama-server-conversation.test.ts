import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { llamaServerPath } from '../../scripts/build-llama-server.ts'
import { type TinyGguf, writeTinyGguf } from '../../scripts/make-tiny-gguf.ts'
import { createEnvironment, type Environment } from '../runner/environment.ts'
import { runEngineCell } from '../runner/runner.ts'
import type { Manifest } from '../schema/manifest.ts'
import type { PairResult } from '../schema/results.ts'
import { RunRecord } from '../schema/run.ts'
import type { EngineConfig } from './config.ts'

// CI builds llama-server first (npm run build:llama-server); a machine without it skips these.
const binary = await llamaServerPath()
const noGpu = async (): Promise<Manifest['gpus']> => ({ status: 'absent', reason: 'no nvidia-smi on this machine' })
const env: Environment = { ...createEnvironment(), gpuFacts: noGpu, telemetry: false }

describe.skipIf(binary === null)('conversations on the real llama-server', () => {
  let dir = ''
  let model: TinyGguf
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'servegate-llama-chat-'))
    model = await writeTinyGguf(join(dir, 'tiny.gguf'))
  })
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true })
  })

  const engine = (slots = 2): EngineConfig => ({
    kind: 'llama-server',
    executable: binary as string,
    model: { id: 'tiny-llama', path: model.path },
    slots,
    threads: 1,
    maxContext: 4096,
    logDir: join(dir, 'logs'),
    startupTimeoutMs: 60_000,
  })
  const cell = (history: 'replayed' | 'live', concurrency = 2) => ({
    concurrency,
    maxTokens: 8,
    workload: { kind: 'conversation' as const, sessions: 4, turns: 3, userTokens: 48, systemTokens: 64, history, seed: 5 },
  })

  test(
    'replayed: turn ≥ 2 requests report cached prompt tokens from the slot cache, and toReuseCache passes',
    { timeout: 180_000 },
    async () => {
      // One slot, one session at a time: each turn finds its session's previous prompt and reply in
      // the slot. With sessions interleaved over slots, llama-server may give a turn the slot another
      // session left, and only the shared system prompt hits.
      const record = RunRecord.parse(await runEngineCell(env, engine(1), cell('replayed', 1)))
      expect(record.cellFailure).toBeNull()
      expect(record.completed).toBe(12)
      for (const r of record.requests.filter((q) => (q.turn as number) >= 2)) {
        // The session's earlier turns are in its slot: most of the prompt is not evaluated again.
        expect(r.cachedPromptTokens as number).toBeGreaterThan(0.5 * (r.promptTokens as number))
      }
      const pair: PairResult = { kind: 'pair', id: 'chat', baseline: [record], candidate: [record], launchOrder: ['baseline', 'candidate'] }
      expect(pair).toReuseCache({ atLeast: 0.5, arm: 'candidate' })
    },
  )

  test(
    'live: a pair of llama-server against itself is matched on its user turns, though its histories differ',
    { timeout: 180_000 },
    async () => {
      const baseline = await runEngineCell(env, engine(), cell('live'))
      const candidate = await runEngineCell(env, engine(), cell('live'))
      expect([baseline.completed, candidate.completed]).toEqual([12, 12])
      expect(candidate.plan.workload.requestStreamSha256).toBe(baseline.plan.workload.requestStreamSha256)
      expect(baseline.plan.workload.wireMatchesPlan).toBeNull()
      const pair: PairResult = {
        kind: 'pair',
        id: 'chat-live',
        baseline: [baseline],
        candidate: [candidate],
        launchOrder: ['baseline', 'candidate'],
      }
      expect(pair).toBeMatchedPair()
    },
  )
})
