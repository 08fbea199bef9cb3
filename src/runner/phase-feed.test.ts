import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { afterEach, describe, expect, test, vi } from 'vitest'
import type { ProgressEvent } from '../schema/progress.ts'
import { resolveCellPlan } from './cell-options.ts'
import { createEnvironment } from './environment.ts'
import { failedCellRecord } from './run-record.ts'
import { Runner } from './runner.ts'
import { engine } from '../declare/engine-handles.ts'
import { donePhase, PhaseFeed } from './phase-feed.ts'

const FAKES = fileURLToPath(new URL('../../fixtures/fakes/', import.meta.url))
const dir = mkdtempSync(join(tmpdir(), 'servegate-progress-'))
const context = { cell: 'alpha', arm: 'candidate', engine: 'fake-vllm', step: { kind: 'launch', index: 2, of: 3 } } as const

afterEach(() => {
  vi.useRealTimers()
})

describe('a feed sends phases without flooding the socket', () => {
  test('a new phase goes at once; within the interval only the latest figures go, when it is up, stamped with their own time', () => {
    vi.useFakeTimers()
    let now = 1_000_000
    const sent: ProgressEvent[] = []
    const feed = new PhaseFeed(
      context,
      (e) => sent.push(e),
      500,
      () => now,
    )
    const wait = (ms: number) => {
      now += ms
      vi.advanceTimersByTime(ms)
    }
    const requests = (done: number) =>
      feed.phase({ phase: 'requests', done, total: 10, ok: done, failed: 0, elapsedMs: done * 10, stage: null })
    feed.phase({ phase: 'calibrating' })
    requests(0)
    for (const done of [1, 2, 3]) {
      wait(100)
      requests(done)
    }
    expect(sent.map((e) => [e.phase.phase, 'done' in e.phase ? e.phase.done : null])).toEqual([
      ['calibrating', null],
      ['requests', 0],
    ])
    wait(199)
    expect(sent).toHaveLength(2)
    wait(1)
    expect(sent).toHaveLength(3)
    expect(sent[2]).toMatchObject({ ...context, phase: { phase: 'requests', done: 3 }, atMs: 1_000_300 })
    // The end goes at once, whatever was held.
    wait(10)
    requests(4)
    feed.phase({ phase: 'done', completed: 4, failed: 0, failure: null })
    expect(sent.map((e) => e.phase.phase)).toEqual(['calibrating', 'requests', 'requests', 'done'])
    vi.advanceTimersByTime(1000)
    expect(sent).toHaveLength(4)
  })

  test('without a reporter nothing is sent, and a launch or probe is named on the same channel', () => {
    expect(() => PhaseFeed.silent.phase({ phase: 'launching' })).not.toThrow()
    const sent: ProgressEvent[] = []
    const feed = new PhaseFeed({ ...context, step: null }, (e) => sent.push(e), 0)
    feed.at({ kind: 'probe', index: 3, value: 8, axis: 'rate' }).phase({ phase: 'launching' })
    expect(sent[0]).toMatchObject({ cell: 'alpha', step: { kind: 'probe', index: 3 } })
  })

  test("a failed measurement's line says what failed, not the log tail behind it", () => {
    const message =
      'engine vllm was not ready (GET /health → 200) within 900000 ms; raise startupTimeoutMs or check the log x.log; log tail:\nINFO loading weights'
    const record = failedCellRecord(
      { baseUrl: 'http://127.0.0.1:1', model: 'm' },
      { code: 'ENGINE_START_TIMEOUT', message, httpStatus: null, retryAfterS: null },
    )
    expect(donePhase(record)).toEqual({
      phase: 'done',
      completed: 0,
      failed: 0,
      failure:
        'ENGINE_START_TIMEOUT: engine vllm was not ready (GET /health → 200) within 900000 ms; raise startupTimeoutMs or check the log x.log',
    })
  })
})

describe('a spec cell reports every phase with who it is', () => {
  test('a fresh launch against the fake vLLM: launching, waiting, calibrating, requests, tearing down, done', async () => {
    const sent: ProgressEvent[] = []
    const h = engine.vllm({ name: 'fake-vllm', executable: join(FAKES, 'vllm'), model: { id: 'fake/m' }, logDir: join(dir, 'logs') })
    const feed = new PhaseFeed(context, (e) => sent.push(e), 0)
    const plan = resolveCellPlan({ concurrency: 2, requests: 4, maxTokens: 4, workload: { promptTokens: 32 } })
    const record = await feed.measuring(() => new Runner(createEnvironment()).measure(h, plan, 'fresh', { onPhase: feed.phase }))
    expect(record.completed).toBe(4)
    const runs = sent.map((e) => e.phase.phase).filter((name, i, all) => name !== all[i - 1])
    expect(runs).toEqual(['launching', 'waiting', 'inspecting', 'calibrating', 'requests', 'tearing-down', 'done'])
    expect(
      sent.every(
        (e) => e.cell === 'alpha' && e.arm === 'candidate' && e.engine === 'fake-vllm' && e.step?.kind === 'launch' && e.step.index === 2,
      ),
    ).toBe(true)
    expect(sent.at(-1)?.phase).toEqual({ phase: 'done', completed: 4, failed: 0, failure: null })
  })
})
