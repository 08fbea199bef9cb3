import { readFileSync } from 'node:fs'
import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { stripVTControlCharacters } from 'node:util'
import { fileURLToPath } from 'node:url'
import { describe, expect, test } from 'vitest'
import { interleave } from '../runner/runner.ts'
import { cell, pair } from './cell-declarations.ts'
import { engine } from './engine-handles.ts'

const FAKES = fileURLToPath(new URL('../../fixtures/fakes/', import.meta.url))
const dir = mkdtempSync(join(tmpdir(), 'servegate-spec-'))
const pids = join(dir, 'pids.txt')
const launches = (): number => readFileSync(pids, 'utf8').split('\n').filter(Boolean).length / 3

const fake = engine.vllm({
  executable: join(FAKES, 'vllm'),
  model: { id: 'fake/m' },
  env: { FAKE_ENGINE_PIDFILE: pids, FAKE_ENGINE_DECODE_TOK_PER_S: '40' },
  logDir: join(dir, 'logs'),
})
const sameConfig = engine.vllm({
  executable: join(FAKES, 'vllm'),
  model: { id: 'fake/m' },
  env: { FAKE_ENGINE_PIDFILE: pids, FAKE_ENGINE_DECODE_TOK_PER_S: '40' },
  logDir: join(dir, 'logs'),
})
const dying = engine.vllm({
  executable: join(FAKES, 'vllm'),
  model: { id: 'fake/m' },
  env: { FAKE_ENGINE_EXIT_ON_START: '3' },
  logDir: join(dir, 'logs'),
})

const first = cell({ engine: fake, concurrency: 4, requests: 8, maxTokens: 12, workload: { promptTokens: 32 } })
const second = cell({ engine: sameConfig, concurrency: 2, requests: 4, maxTokens: 4, workload: { promptTokens: 32 } })
const broken = pair({ baseline: fake, candidate: dying, requests: 4, maxTokens: 4, workload: { promptTokens: 32 } })

describe('cells in a spec', () => {
  test('a cell runs once however many tests await it', async () => {
    const [a, b] = await Promise.all([first, first])
    expect(a).toBe(b)
    expect(a.record.completed).toBe(8)
    expect(a.id).toBe('vllm:fake/m-synthetic-summary-ctx32-c4')
  })

  test('the engine actually ran the requested concurrency (from its metrics)', async () => {
    expect(await first).toReachConcurrency()
  })

  test('cells with the same engine config share one launch in a file', async () => {
    await second
    expect(launches()).toBe(1)
    expect((await second).record.manifest?.engine.argv).toEqual((await first).record.manifest?.engine.argv)
  })

  test('an engine that fails makes its cells failed, and a matcher reading them fails with the reason', async () => {
    const p = await broken
    expect(p.candidate[0]?.cellFailure?.code).toBe('ENGINE_EXITED')
    let message = ''
    try {
      expect(p).toWinDecode()
    } catch (error) {
      message = stripVTControlCharacters((error as Error).message)
    }
    expect(message).toMatch(/- candidate: ENGINE_EXITED: engine vllm exited during start-up with code 3/)
  })

  test('repeated launches interleave A B B A', () => {
    expect(interleave(1)).toEqual(['baseline', 'candidate'])
    expect(interleave(2)).toEqual(['baseline', 'candidate', 'candidate', 'baseline'])
    expect(interleave(3)).toEqual(['baseline', 'candidate', 'candidate', 'baseline', 'baseline', 'candidate'])
  })
})
