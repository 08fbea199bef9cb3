import { describe, expect, test } from 'vitest'
import { failedRequest, okRequest } from '../../fixtures/gate-fixture.ts'
import { computeGoodput, describeSLO, missedObjectives, resolveSLO } from './goodput.ts'

type Ok = Parameters<typeof missedObjectives>[0]
const ok = (fields: Parameters<typeof okRequest>[1]) =>
  okRequest(0, { ttftMs: 100, tpotMs: 20, e2eMs: 1000, itlMs: [20, 20, 20], ...fields }) as Ok

describe('missedObjectives', () => {
  const slo = resolveSLO({ ttftMs: 200, tpotMs: 30, e2eMs: 2000, itlMs: 50, itlPercentile: 90 })

  test('a request within every bound is good; each bound it exceeds is named', () => {
    expect(missedObjectives(ok({}), slo)).toEqual([])
    expect(missedObjectives(ok({ ttftMs: 201, tpotMs: 31 }), slo)).toEqual(['ttftMs', 'tpotMs'])
    expect(missedObjectives(ok({ e2eMs: 2000.5 }), slo)).toEqual(['e2eMs'])
  })

  test("ITL is judged on the request's own nearest-rank percentile of its gaps", () => {
    // Ten gaps: p90 is the 9th smallest. One slow gap is within p90; two are not.
    expect(missedObjectives(ok({ itlMs: [...new Array(9).fill(10), 500] }), slo)).toEqual([])
    expect(missedObjectives(ok({ itlMs: [...new Array(8).fill(10), 500, 500] }), slo)).toEqual(['itlMs'])
  })

  test('no content (reasoning only) misses ttft; a one-token reply has no tpot or ITL to miss', () => {
    expect(missedObjectives(ok({ ttftMs: null }), slo)).toEqual(['ttftMs'])
    expect(missedObjectives(ok({ tpotMs: null, itlMs: [] }), slo)).toEqual([])
  })
})

describe('computeGoodput', () => {
  test('good share of every measured request (failed ones count against it), Wilson interval, good requests per second', () => {
    const slo = resolveSLO({ ttftMs: 150 })
    const records = [ok({}), ok({ ttftMs: 120 }), ok({ ttftMs: 300 }), failedRequest(3)]
    const g = computeGoodput(records, 2000, slo)
    expect(g).toMatchObject({
      samples: 4,
      good: 2,
      fraction: 0.5,
      goodputReqPerS: 1,
      missed: { ttftMs: 1, tpotMs: 0, e2eMs: 0, itlMs: 0, failed: 1 },
    })
    // Wilson 95% for 2/4 (R: prop.test(2, 4, correct = FALSE)$conf.int → 0.1500, 0.8500).
    expect(g.wilson95Low).toBeCloseTo(0.15, 4)
    expect(g.wilson95High).toBeCloseTo(0.85, 4)
    expect(computeGoodput([], 0, slo)).toMatchObject({ samples: 0, good: 0, fraction: null, goodputReqPerS: null })
  })
})

describe('resolveSLO', () => {
  test('words, and a clear error without an objective', () => {
    expect(describeSLO(resolveSLO({ ttftMs: 500, tpotMs: 50, itlMs: 100 }))).toBe('ttft ≤ 500 ms, tpot ≤ 50 ms, itl p99 ≤ 100 ms')
    expect(() => resolveSLO({})).toThrow(/^invalid slo: slo\.ttftMs: give at least one objective: ttftMs, tpotMs, e2eMs or itlMs \(ms\)$/)
    expect(() => resolveSLO({ ttftMs: -1 })).toThrow(/^invalid slo: slo\.ttftMs: Too small: expected number to be >0$/)
  })
})
