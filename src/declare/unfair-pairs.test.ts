/**
 * Pairs that identical request bytes do not make fair, each declared as a spec on the simulated
 * engine: another served model, an engine that drops the output-length knob, a candidate that
 * fails a quarter of its requests. Each is refused: not matched, and no win is claimed.
 */
import { describe, expect, test } from 'vitest'
import { pair } from './cell-declarations.ts'
import { engine, type SimEngineConfig } from './engine-handles.ts'

const plan = { concurrency: 4, requests: 32, maxTokens: 32, workload: { promptTokens: 64 } }
type SimOptions = NonNullable<SimEngineConfig['sim']>
const sim = (id: string, options: SimOptions) =>
  engine.sim({ name: id, model: { id: 'org/model' }, sim: { decodeTokPerS: 400, ...options } })

describe('unfair pairs on the simulated engine are refused', () => {
  test('a candidate serving another model is not a matched pair', async () => {
    const p = await pair({
      id: 'other-model',
      baseline: sim('base', {}),
      candidate: engine.sim({ name: 'int4', model: { id: 'org/model-int4' }, sim: { decodeTokPerS: 400 } }),
      ...plan,
    })
    expect(p).not.toBeMatchedPair()
    expect(() => expect(p).toBeMatchedPair()).toThrow(
      /served model: org\/model ≠ org\/model-int4 \(baseline org\/model, candidate org\/model-int4\)/,
    )
  })

  test('a candidate that drops ignore_eos: under output control, not every reply is exact', async () => {
    const p = await pair({
      id: 'drops-ignore-eos',
      baseline: sim('base', { outputTokens: 12 }),
      candidate: sim('no-knobs', { outputTokens: 12, ignoreOutputKnobs: true }),
      ...plan,
      workload: { ...plan.workload, outputControl: { mode: 'observe' } },
    })
    expect(() => expect(p).toBeMatchedPair()).toThrow(/output length: under output control .*; candidate 0\/32 exact/)
  })

  test('without output control, mean completion tokens 12 against 32 are not matched', async () => {
    const p = await pair({ id: 'short-replies', baseline: sim('base', {}), candidate: sim('short', { outputTokens: 12 }), ...plan })
    expect(() => expect(p).toBeMatchedPair()).toThrow(
      /output length: mean completion tokens differ by more than 5% \(baseline 32\.0, candidate 12\.0\)/,
    )
  })

  test('a faster candidate that fails a quarter of its requests: not matched, and no decode win', async () => {
    const failing = Array.from({ length: 8 }, (_, i) => i * 4)
    const p = await pair({
      id: 'fails-a-quarter',
      baseline: sim('base', {}),
      candidate: sim('fast-failing', { decodeTokPerS: 800, faults: [{ kind: 'http500', requests: failing }] }),
      ...plan,
    })
    expect(p.candidate[0]?.failed).toBe(8)
    expect(() => expect(p).toBeMatchedPair()).toThrow(/failed share: .*\(baseline 0\/32, candidate 8\/32 failed\)/)
    expect(() => expect(p).toWinDecode()).toThrow(/counted as losses, so no win is claimed/)
    expect(p).not.toWinDecode()
  })
})
