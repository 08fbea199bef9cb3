import { describe, expect, test } from 'vitest'
import { okRequest } from '../../fixtures/gate-fixture.ts'
import { failureOf } from '../../fixtures/matchers.ts'
import { decideAgain } from '../gates/decide-again.ts'
import { reuseCacheGate } from '../gates/reuse-cache.ts'
import { failedCellRecord } from '../runner/run-record.ts'
import type { CellResult, PairResult } from '../schema/results.ts'
import type { RequestRecord, RunRecord } from '../schema/run.ts'

/** A request of `promptTokens` of which the engine reported `cached` from its cache (null: it said nothing). */
type Shape = { promptTokens?: number; cached: number | null; turn?: number | null }

function recordOf(shapes: readonly Shape[], runId: string): RunRecord {
  const base = failedCellRecord(
    { baseUrl: 'http://127.0.0.1:1', model: 'm', requests: shapes.length },
    { code: 'INTERNAL', message: 'x', httpStatus: null, retryAfterS: null },
  )
  const requests: RequestRecord[] = shapes.map((s, i) =>
    okRequest(i, { promptTokens: s.promptTokens ?? 100, cachedPromptTokens: s.cached, turn: s.turn ?? null, session: s.turn ? 0 : null }),
  )
  return { ...base, runId, cellFailure: null, requests, completed: shapes.length }
}

const cellOf = (shapes: readonly Shape[]): CellResult => {
  const record = recordOf(shapes, 'c1')
  return { kind: 'cell', id: 'c', record, records: [record] }
}

const pairOf = (baseline: readonly Shape[], candidate: readonly Shape[]): PairResult => ({
  kind: 'pair',
  id: 'p',
  baseline: [recordOf(baseline, 'b1')],
  candidate: [recordOf(candidate, 'c1')],
  launchOrder: ['baseline', 'candidate'],
})

/** n requests of 100 prompt tokens, each reporting `cached` of them cached. */
const each = (n: number, cached: number | null, turn?: number): Shape[] => Array.from({ length: n }, () => ({ cached, turn }))

describe('toReuseCache', () => {
  test('pass: 80% of the prompt tokens reported cached reaches 50%; .not fails with the figures', () => {
    const c = cellOf([...each(1, 0), ...each(4, 100)])
    expect(c).toReuseCache({ atLeast: 0.5 })
    expect(failureOf(() => expect(c).not.toReuseCache({ atLeast: 0.5 }))).toMatchInlineSnapshot(`
      "expect(result).not.toReuseCache()

      Expected: not: passes when the engine reports at least 50.0% of the prompt tokens as served from its prefix cache on every launch; a share the engine did not report fails
      Received: pass: 80.0% [—, —]
      Samples:  5 samples
      Method:   engine-reported cached prompt tokens ÷ prompt tokens of the ok requests, the lowest launch: cell 80.0% (400 of 500 prompt tokens; 5 of 5 requests reported)"
    `)
  })

  test('fail: a cache that served 10% does not reach 50%', () => {
    const c = cellOf([...each(9, 0), ...each(1, 100)])
    expect(c).not.toReuseCache({ atLeast: 0.5 })
    expect(failureOf(() => expect(c).toReuseCache({ atLeast: 0.5 }))).toMatch(
      /Received: fail: 10\.0%[\s\S]*cell 10\.0% \(100 of 1,000 prompt tokens; 10 of 10 requests reported\)/,
    )
  })

  test('unknown never passes: an engine that reported nothing fails with the reason, even at atLeast 0', () => {
    const c = cellOf(each(4, null))
    expect(c).not.toReuseCache({ atLeast: 0 })
    const message = failureOf(() => expect(c).toReuseCache({ atLeast: 0 }))
    expect(message).toMatch(/Received: fail: —/)
    expect(message).toMatch(/cell unknown \(4 ok request\(s\), none reported cached tokens\)/)
    expect(message).toMatch(
      /warning: cell: cached prompt tokens unknown: no ok request reported cached prompt tokens .*--enable-prompt-tokens-details/,
    )
  })

  test('a pair: both arms must reach it; arm names the one to judge', () => {
    const p = pairOf(each(4, 0), each(4, 90))
    expect(p).not.toReuseCache({ atLeast: 0.5 })
    expect(p).toReuseCache({ atLeast: 0.5, arm: 'candidate' })
    expect(p).not.toReuseCache({ atLeast: 0.5, arm: 'baseline' })
    expect(failureOf(() => expect(p).toReuseCache({ atLeast: 0.5 }))).toMatch(
      /on both arms \(every launch\)[\s\S]*Samples:\s+baseline 4, candidate 4[\s\S]*baseline 0\.0% \(0 of 400 prompt tokens; 4 of 4 requests reported\); candidate 90\.0%/,
    )
  })

  test('a conversation is judged over turns ≥ 2 by default; turns picks others', () => {
    // Turn 1 opens each session cold; turns 2 and 3 find their history.
    const c = cellOf([...each(3, 0, 1), ...each(3, 80, 2), ...each(3, 90, 3)])
    expect(c).toReuseCache({ atLeast: 0.8 })
    expect(c).not.toReuseCache({ atLeast: 0.6, turns: { from: 1 } })
    expect(c).toReuseCache({ atLeast: 0.9, turns: { from: 3 } })
    expect(c).not.toReuseCache({ atLeast: 0.9, turns: { from: 2, to: 2 } })
    expect(failureOf(() => expect(c).not.toReuseCache({ atLeast: 0.8 }))).toMatch(/over turns ≥ 2 only/)
  })

  test('a vLLM that leaves out a 0 still counts: once one request reported, the silent ones count 0', () => {
    expect(cellOf([...each(2, null), ...each(2, 100)])).toReuseCache({ atLeast: 0.5 })
    expect(cellOf([...each(3, null), ...each(1, 100)])).not.toReuseCache({ atLeast: 0.5 })
  })

  test('wrong options are TypeErrors naming the matcher', () => {
    const c = cellOf(each(2, 50))
    expect(() => expect(c).toReuseCache({ atLeast: 1.5 })).toThrow(/toReuseCache: invalid options/)
    expect(() => expect(c).toReuseCache({ atLeast: 0.5, arm: 'candidate' })).toThrow(/toReuseCache: arm 'candidate' names an arm of a pair/)
    expect(() => expect(c).toReuseCache({ atLeast: 0.5, turns: { from: 2 } })).toThrow(/toReuseCache: turns needs conversation records/)
    // A typo is an error, not an option silently dropped.
    expect(() => expect(c).toReuseCache({ atLeast: 0.5, turn: { from: 2 } } as never)).toThrow(/toReuseCache: invalid options/)
    expect(() => expect(c).toReuseCache(undefined as never)).toThrow(/toReuseCache: pass \{ atLeast/)
    expect(() => expect({ kind: 'cell' }).toReuseCache({ atLeast: 0.5 })).toThrow(/toReuseCache: expected a measured cell or pair/)
  })

  test('decided again from the records, as servegate verify does, to the same decision', () => {
    const p = pairOf(each(4, 20), each(4, 90))
    const options = { gate: 'toReuseCache', atLeast: 0.5, arm: 'candidate' }
    const first = reuseCacheGate({ baseline: p.baseline, candidate: p.candidate }, { atLeast: 0.5, arm: 'candidate' })
    expect(decideAgain('toReuseCache', { kind: 'pair', baseline: p.baseline, candidate: p.candidate }, options)).toEqual(first)
    expect(first).toMatchObject({ outcome: 'pass', kind: 'check', effect: { estimate: 0.9, unit: 'fraction' }, samples: { candidate: 4 } })
  })
})
