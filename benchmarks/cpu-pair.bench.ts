/**
 * A real pair on this CPU, run by `vitest bench`: the in-process llama.cpp engine (node-llama-cpp)
 * over the tiny generated model, one sequence slot against four, at concurrency 4, on the same
 * request stream. And a deliberately unfair pair (another model file) that the fairness check
 * must reject.
 */
import { mkdirSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, test } from 'vitest'
import { writeTinyGguf } from '../scripts/make-tiny-gguf.ts'
import { engine, pair } from '../src/index.ts'

const dir = join(process.cwd(), '.servegate', 'bench-models')
mkdirSync(dir, { recursive: true })
const tiny = await writeTinyGguf(join(dir, 'tiny-17.gguf'), { seed: 17 })
const other = await writeTinyGguf(join(dir, 'tiny-18.gguf'), { seed: 18 })

const model = { id: 'tiny-llama', path: tiny.path }
const oneSlot = engine.nodeLlamaCpp({ name: 'nlc-1seq', model, sequences: 1, contextSize: 4096 })
const fourSlots = engine.nodeLlamaCpp({ name: 'nlc-4seq', model, sequences: 4, contextSize: 4096 })
const otherModel = engine.nodeLlamaCpp({
  name: 'nlc-other',
  model: { id: 'tiny-llama', path: other.path },
  sequences: 4,
  contextSize: 4096,
})

const plan = {
  concurrency: 4,
  requests: 64,
  maxTokens: 24,
  workload: { promptTokens: 192, seed: 17, canaries: false, outputControl: { mode: 'strict' as const } },
}

describe('tiny llama, in-process: 1 sequence vs 4 sequences at concurrency 4', () => {
  const fair = pair({ id: 'tiny-1seq-vs-4seq-c4', baseline: oneSlot, candidate: fourSlots, ...plan })

  test('is a matched pair', async () => expect(await fair).toBeMatchedPair())
  // With one request slot, three of four requests wait before their prefill starts.
  test('four sequences win effective prefill by 10% (no waiting for a slot)', async () => expect(await fair).toWinPrefill({ margin: 0.1 }))
  // On one CPU thread, batching four sequences costs about as much per token as it saves in
  // waiting (0.96× to 1.2× measured on a loaded two-core machine): a real non-win at a 50% margin,
  // which the gate must not call a win.
  test('four sequences do not win throughput by 50% on one thread', async () => expect(await fair).not.toWinThroughput({ margin: 0.5 }))
  test('four sequences hold p50 time to first output within 10%', async () =>
    expect(await fair).toHoldLatency({ metric: 'timeToFirstOutput', percentile: 50, notWorseThanPct: 10 }))
  test('every output is exactly max_tokens long on both arms', async () => {
    const p = await fair
    for (const r of [...p.baseline, ...p.candidate]) expect(r.metrics.outputControl).toMatchObject({ exact: 64, samples: 64 })
  })
  test('measured every request on both arms', async () => {
    const p = await fair
    for (const r of [...p.baseline, ...p.candidate]) {
      expect(r.cellFailure).toBeNull()
      expect(r.completed).toBe(64)
    }
  })
})

describe('a sequential pair: stop at the first look that decides', () => {
  // The same pair, measured in stages of 16, 32, 64 requests taking turns A B B A. Four sequences
  // on one thread decode each stream at well under half the speed of one: confidently not a decode
  // win, which an early look shows (the first, or on a busy machine the second), so both arms stop
  // well before 64 requests.
  const staged = pair({
    id: 'tiny-1seq-vs-4seq-c4-sequential',
    baseline: oneSlot,
    candidate: fourSlots,
    ...plan,
    stopEarly: { looks: [16, 32], gates: [{ gate: 'toWinDecode' }] },
  })
  test('stops both arms at an early look once the decode gate decided', async () => {
    const p = await staged
    const stoppedAt = p.baseline[0]?.plan.sequential?.stoppedAt
    expect([16, 32]).toContain(stoppedAt)
    for (const r of [...p.baseline, ...p.candidate]) {
      expect(r.plan.sequential).toMatchObject({
        stoppedAt,
        plannedRequests: 64,
        reason: expect.stringMatching(/look [12] of 3 \((16|32) requests\): toWinDecode fail/),
      })
      expect(r.completed).toBe(stoppedAt)
    }
    expect(p).not.toWinDecode()
    expect(p).toBeMatchedPair()
  })
})

describe('an unfair pair', () => {
  // Not required: it is meant to fail the fairness check, which must not block promotion.
  const unfair = pair({
    id: 'tiny-vs-other-model-unfair',
    required: false,
    baseline: fourSlots,
    candidate: otherModel,
    ...plan,
    requests: 8,
  })
  test('another model file is not a matched pair', async () => expect(await unfair).not.toBeMatchedPair())
})
