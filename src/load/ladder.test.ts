import { describe, expect, test } from 'vitest'
import { expandLadder } from './ladder.ts'

describe('expandLadder', () => {
  test('rates: open-loop cells at each rate, with the base arrival process and rate × duration requests', () => {
    const rungs = expandLadder(
      { rates: [2, 8], durationS: 10 },
      { requests: 5, arrival: { kind: 'poisson', ratePerS: 1, seed: 3 }, maxTokens: 64 },
    )
    expect(rungs).toEqual([
      { axis: 'rate', value: 2, options: { requests: 20, arrival: { kind: 'poisson', ratePerS: 2, seed: 3 }, maxTokens: 64 } },
      { axis: 'rate', value: 8, options: { requests: 80, arrival: { kind: 'poisson', ratePerS: 8, seed: 3 }, maxTokens: 64 } },
    ])
    expect(expandLadder({ rates: [4] }, {})[0]?.options).toEqual({ arrival: { kind: 'constant', ratePerS: 4 }, requests: undefined })
  })

  test('concurrencies: closed-loop cells with requests per slot', () => {
    expect(expandLadder({ concurrencies: [1, 4], requestsPerSlot: 8 }, { requests: 3 }).map((r) => r.options)).toEqual([
      { requests: 8, concurrency: 1 },
      { requests: 32, concurrency: 4 },
    ])
  })

  test('bad ladders name the field', () => {
    expect(() => expandLadder({ rates: [2, 2] }, {})).toThrow(/^invalid ladder: rates: 2 appears twice; each rung is one cell$/)
    expect(() => expandLadder({ rates: [2] }, { arrival: { kind: 'trace', path: 't.jsonl' } })).toThrow(
      /a rate ladder needs constant, poisson or gamma arrivals/,
    )
    expect(() => expandLadder({ concurrencies: [2] }, { arrival: { kind: 'constant', ratePerS: 1 } })).toThrow(
      /a concurrency ladder runs closed-loop cells/,
    )
    expect(() => expandLadder({ rates: [] } as never, {})).toThrow(/^invalid ladder: /)
  })
})
