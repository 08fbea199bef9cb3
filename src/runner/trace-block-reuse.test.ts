import { readFile } from 'node:fs/promises'
import { fileURLToPath } from 'node:url'
import { describe, expect } from 'vitest'
import { test } from '../../fixtures/test-context.ts'
import type { RunRecord } from '../schema/run.ts'
import { startSimServer } from '../sim/server.ts'
import { runCell } from './measure-cell.ts'

/** A Mooncake-shaped trace: 24 rows whose hash_ids (512-token blocks) reuse shared documents and earlier requests. */
const TRACE = fileURLToPath(new URL('../../fixtures/traces/mooncake-blocks.jsonl', import.meta.url))

/** A simulated engine whose prefix cache holds the whole trace, in blocks the size of the trace's. */
const CACHED = { model: 'm', prefixCacheTokens: 1 << 20, prefixBlockTokens: 512, prefillTokPerS: 1_000_000, decodeTokPerS: 2_000 }

/** Rows are 1 s or more apart: at a hundredth of that, each arrives after the rows before it were prefilled. */
const arrival = { kind: 'trace', path: TRACE, timeScale: 0.01, blockTokens: 512 } as const

async function replay(api: 'chat' | 'completions'): Promise<RunRecord> {
  const sim = await startSimServer(CACHED)
  try {
    return await runCell({ baseUrl: sim.url, model: 'm', api, requests: 24, arrival })
  } finally {
    await sim.close()
  }
}

/** Each row's expected cached tokens: 512 × the leading run of its hash_ids that earlier rows sent whole. */
async function expectedCached(): Promise<number[]> {
  const rows = (await readFile(TRACE, 'utf8'))
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as { input_length: number; hash_ids: number[] })
  const whole = new Set<number>()
  return rows.map(({ input_length: length, hash_ids: ids }) => {
    let run = 0
    while (run < ids.length && whole.has(ids[run] as number)) run++
    ids.slice(0, Math.floor(length / 512)).forEach((id) => whole.add(id))
    return run * 512
  })
}

describe('a Mooncake-shaped trace with hash_ids on an engine whose prefix cache holds it', () => {
  test('completions: the engine serves from cache what the plan says the trace reuses, request by request', async () => {
    const record = await replay('completions')
    expect(record.completed).toBe(24)
    const reuseShare = record.plan.arrival?.reuseShare as number
    expect(reuseShare).toBeCloseTo(0.6523, 4)
    // Prompts hold their rows' lengths exactly, as the engine counts them.
    const rows = (await readFile(TRACE, 'utf8')).trim().split('\n')
    expect(record.requests.map((r) => r.promptTokens)).toEqual(rows.map((l) => (JSON.parse(l) as { input_length: number }).input_length))
    expect(record.requests.map((r) => r.cachedPromptTokens)).toEqual(await expectedCached())
    expect(Math.abs((record.metrics.cachedPromptShare as number) - reuseShare)).toBeLessThanOrEqual(0.02)
  })

  test('chat: the template before the first block shifts no block, the shares agree within 2 points', async () => {
    const record = await replay('chat')
    expect(record.plan.workload.calibration).toMatchObject({ method: 'engine-tokenizer', outsideTolerance: 0 })
    const { totalCachedPromptTokens, totalPromptTokens, cachedPromptShare } = record.metrics
    expect(cachedPromptShare).toBe((totalCachedPromptTokens as number) / (totalPromptTokens as number))
    expect(Math.abs((cachedPromptShare as number) - (record.plan.arrival?.reuseShare as number))).toBeLessThanOrEqual(0.02)
  })

  test('both arms send the same bytes: request-stream and wire hashes match', async () => {
    const [a, b] = [await replay('completions'), await replay('completions')]
    expect(b.plan.workload.requestStreamSha256).toBe(a.plan.workload.requestStreamSha256)
    expect(a.plan.workload.wireMatchesPlan).toBe(true)
    expect(b.plan.workload.wireStreamSha256).toBe(a.plan.workload.wireStreamSha256)
    expect(b.plan.arrival?.scheduleSha256).toBe(a.plan.arrival?.scheduleSha256)
  })

  test('with the cache off the same trace is served cold: the reuse is the trace’s, not the harness’s', async () => {
    const sim = await startSimServer({ ...CACHED, prefixCacheTokens: 0 })
    try {
      const record = await runCell({ baseUrl: sim.url, model: 'm', api: 'completions', requests: 24, arrival })
      expect(record.plan.arrival?.reuseShare).toBeCloseTo(0.6523, 4)
      expect(record.metrics.cachedPromptShare ?? 0).toBe(0)
    } finally {
      await sim.close()
    }
  })
})
