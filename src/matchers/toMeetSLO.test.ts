import { describe, expect, test } from 'vitest'
import { failureOf } from '../../fixtures/matchers.ts'
import { okRequest } from '../../fixtures/gate-fixture.ts'
import { arrivalPlanUnread } from '../load/plan.ts'
import { ArrivalSpec } from '../load/arrival-spec.ts'
import { failedCellRecord } from '../runner/run-record.ts'
import { CAPACITY_SCHEMA_ID, type CapacitySearch } from '../schema/capacity-record.ts'
import type { CellResult, SweepResult } from '../schema/results.ts'
import type { RunRecord } from '../schema/run.ts'

/** A measured cell whose i-th request took ttfts[i] ms to its first token, over 10 s of wall clock. */
function cellOf(ttfts: readonly number[], options: { ratePerS?: number; harnessLimited?: boolean } = {}): CellResult {
  const base = failedCellRecord(
    { baseUrl: 'http://127.0.0.1:1', model: 'm', requests: ttfts.length },
    { code: 'INTERNAL', message: 'x', httpStatus: null, retryAfterS: null },
  )
  const arrival =
    options.ratePerS === undefined
      ? null
      : arrivalPlanUnread(ArrivalSpec.parse({ kind: 'constant', ratePerS: options.ratePerS }), ttfts.length)
  const record: RunRecord = {
    ...base,
    cellFailure: null,
    plan: { ...base.plan, arrival },
    requests: ttfts.map((ttftMs, i) => okRequest(i, { ttftMs, e2eMs: ttftMs + 100 })),
    completed: ttfts.length,
    metrics: { ...base.metrics, wallClockMs: 10_000 },
    harness: options.harnessLimited
      ? {
          ...base.harness,
          harnessLimited: true,
          reasons: ['send lag p99 9.00 ms > 5 ms'],
          exceeded: [{ option: 'sendLagLimitMs', limit: 5, value: 9, thread: 'cell' }],
        }
      : base.harness,
  }
  return { kind: 'cell', id: 'c', record, records: [record] }
}

/** n requests of which `bad` missed a 500 ms TTFT. */
const ttfts = (n: number, bad: number): number[] => Array.from({ length: n }, (_, i) => (i < bad ? 900 : 200))

describe('toMeetSLO', () => {
  test('pass: 200 of 200 good shows at least 95% at 98% confidence; .not fails with the figures', () => {
    const c = cellOf(ttfts(200, 0))
    expect(c).toMeetSLO({ ttftMs: 500, percentile: 95 })
    expect(failureOf(() => expect(c).not.toMeetSLO({ ttftMs: 500, percentile: 95 }))).toMatchInlineSnapshot(`
      "expect(result).not.toMeetSLO()

      Expected: not: pass if the lower bound of the 98% Wilson interval of the share of requests meeting ttft ≤ 500 ms (a one-sided 99% bound) is at least 0.950; fail if its upper bound is below 0.950; otherwise inconclusive, which fails: the SLO must be shown met
      Received: pass: 100.0% [97.4%, 100.0%] (98% interval)
      Samples:  200 samples
      Method:   Wilson score interval of 200 good of 200 measured request(s) over 10.00 s of wall clock: 20.00 good req/s"
    `)
  })

  test('fail: 30 of 100 missed their TTFT; the upper bound is below 90%', () => {
    const c = cellOf(ttfts(100, 30))
    expect(c).not.toMeetSLO({ ttftMs: 500 })
    expect(failureOf(() => expect(c).toMeetSLO({ ttftMs: 500 }))).toMatchInlineSnapshot(`
      "expect(result).toMeetSLO()

      Expected: pass if the lower bound of the 98% Wilson interval of the share of requests meeting ttft ≤ 500 ms (a one-sided 99% bound) is at least 0.900; fail if its upper bound is below 0.900; otherwise inconclusive, which fails: the SLO must be shown met
      Received: fail: 70.0% [58.5%, 79.4%] (98% interval)
      Samples:  100 samples
      Method:   Wilson score interval of 70 good of 100 measured request(s) over 10.00 s of wall clock: 7.00 good req/s"
    `)
  })

  test('inconclusive fails, with how many requests would likely decide it; .not then passes', () => {
    const c = cellOf(ttfts(40, 1))
    expect(c).not.toMeetSLO({ ttftMs: 500, percentile: 90 })
    const message = failureOf(() => expect(c).toMeetSLO({ ttftMs: 500, percentile: 90 }))
    expect(message).toMatch(/Received: inconclusive: 97\.5% \[\d+\.\d%, 99\.\d%\] \(98% interval\)/)
    expect(message).toMatch(/warning: inconclusive: the 98% interval \[0\.\d+, 0\.\d+\] straddles 0\.900\n/)
    expect(message).toMatch(
      /\nto decide it, set requests: (\d+) \(40 requests cannot show 90% good [^)]*; about \1 would likely decide it at the 97\.5% good seen\)$/,
    )
  })

  test('a harness-limited cell is not judged: inconclusive with the reason, so it fails', () => {
    const message = failureOf(() => expect(cellOf(ttfts(200, 0), { harnessLimited: true })).toMeetSLO({ ttftMs: 500 }))
    expect(message).toMatch(/Received: inconclusive: 100\.0%/)
    expect(message).toMatch(
      /warning: not judged: the harness was the bottleneck \(send lag p99 9\.00 ms > 5 ms\), so these latencies are not the engine's/,
    )
    // Decided by its share alone (200 of 200 good): only the harness setting is named.
    expect(message).toMatch(/\nto decide it, set sendLagLimitMs: 15 \(the send lag p99 was 9\.00 ms, over 5 ms; [^)]*\)$/)
  })

  test('atRate picks the step of a sweep, or the probe of a capacity search', () => {
    const sweep: SweepResult<CellResult> = {
      kind: 'sweep',
      id: 's',
      axis: 'rate',
      steps: [
        { id: 'r2', value: 2, result: cellOf(ttfts(200, 0), { ratePerS: 2 }) },
        { id: 'r8', value: 8, result: cellOf(ttfts(200, 80), { ratePerS: 8 }) },
      ],
    }
    expect(sweep).toMeetSLO({ ttftMs: 500, atRate: 2 })
    expect(sweep).not.toMeetSLO({ ttftMs: 500, atRate: 8 })
    expect(() => expect(sweep).toMeetSLO({ ttftMs: 500 })).toThrow(
      new TypeError('toMeetSLO: sweep s has several rates; pass atRate: one of 2, 8'),
    )
    expect(() => expect(sweep).toMeetSLO({ ttftMs: 500, atRate: 4 })).toThrow(/^toMeetSLO: sweep s has no atRate 4; pass one of 2, 8$/)
    const search = searchOf([4, 8], [cellOf(ttfts(200, 0)).record, cellOf(ttfts(200, 100)).record])
    expect(search).toMeetSLO({ ttftMs: 500, atRate: 4 })
    expect(search).not.toMeetSLO({ ttftMs: 500, atRate: 8 })
    expect(() => expect(cellOf(ttfts(10, 0), { ratePerS: 2 })).toMeetSLO({ ttftMs: 500, atRate: 3 })).toThrow(
      /the cell c ran at 2 req\/s, not atRate 3/,
    )
  })

  test('a wrong argument is a TypeError naming the matcher', () => {
    expect(() => expect({}).toMeetSLO({ ttftMs: 5 })).toThrow(/^toMeetSLO: expected a measured cell or pair/)
    expect(() => expect(cellOf([1])).toMeetSLO({})).toThrow(/^toMeetSLO: invalid options\n.*give at least one objective/)
    // @ts-expect-error: the options are required
    expect(() => expect(cellOf([1])).toMeetSLO()).toThrow(/^toMeetSLO: pass \{ ttftMs\?/)
  })

  test('where to judge is parsed with the objectives: a wrong atRate is a TypeError naming the field', () => {
    expect(() => expect(cellOf([1])).toMeetSLO({ ttftMs: 500, atRate: -1 })).toThrow(/^toMeetSLO: invalid options\n[^]*→ at atRate/)
  })
})

/** A capacity search whose probes ran at `values`, with these records and this bracket. */
function searchOf(
  values: number[],
  records: RunRecord[],
  bracket: CapacitySearch['bracket'] = { low: null, high: null },
  status: CapacitySearch['status'] = 'bracketed',
): CapacitySearch {
  return {
    schema: CAPACITY_SCHEMA_ID,
    id: 'search',
    axis: 'rate',
    slo: { ttftMs: 500, tpotMs: null, e2eMs: null, itlMs: null, itlPercentile: 99 },
    requiredFraction: 0.9,
    confidence: 0.98,
    search: { start: 4, min: 1, max: 64, maxProbes: 8, resolution: 0.1, requestsPerProbe: 98, probeSeconds: null },
    probes: values.map((value, i) => ({
      value,
      outcome: 'pass',
      samples: 1,
      good: 1,
      fraction: 1,
      low: 0.9,
      high: 1,
      sendLagP99Ms: 1,
      invalid: null,
      runId: records[i]?.runId ?? `r${i}`,
    })),
    bracket,
    status,
    summary: '',
    overloadTolerance: null,
    warnings: [],
    records,
  }
}

describe('toSustainMoreThan', () => {
  const bracket = (low: number | null, high: number | null, status: CapacitySearch['status'] = 'bracketed') =>
    searchOf([1, 2, 3], [], { low, high }, status)

  test('pass: the brackets are apart by more than the margin; .not fails with both brackets', () => {
    const candidate = bracket(48, 52)
    const baseline = bracket(30, 33)
    expect(candidate).toSustainMoreThan(baseline, { by: 0.2 })
    expect(failureOf(() => expect(candidate).not.toSustainMoreThan(baseline, { by: 0.2 }))).toMatchInlineSnapshot(`
      "expect(result).not.toSustainMoreThan()

      Expected: not: pass if the candidate's bracket low (the highest value shown to meet the SLO) is at least 1.200 × the baseline's bracket high; fail if the candidate's bracket high is at most 1.200 × the baseline's bracket low; otherwise inconclusive (the brackets overlap), which fails
      Received: pass: 1.588× [1.455×, 1.733×]
      Samples:  baseline 3, candidate 3, none paired
      Method:   ratio of capacity brackets: candidate [48.00, 52.00) req/s (bracketed, 3 probes) over baseline [30.00, 33.00) req/s (bracketed, 3 probes); estimate the ratio of geometric midpoints, bounds low/high and high/low; each probe decided by a 98% Wilson interval"
    `)
  })

  test('fail: the candidate is shown no better; inconclusive: the brackets overlap', () => {
    expect(failureOf(() => expect(bracket(20, 24)).toSustainMoreThan(bracket(30, 33)))).toMatch(/Received: fail: 0\.\d+×/)
    const overlapping = failureOf(() => expect(bracket(30, 40)).toSustainMoreThan(bracket(28, 33)))
    expect(overlapping).toMatch(/Received: inconclusive: /)
    expect(overlapping).toMatch(
      /warning: inconclusive: the brackets overlap \(candidate \[30\.00, 40\.00\) req\/s .*, baseline \[28\.00, 33\.00\) req\/s .*\); narrow them/,
    )
    expect(bracket(30, 40)).not.toSustainMoreThan(bracket(28, 33))
  })

  test('open brackets: a baseline that never met its SLO loses to any shown capacity; a candidate above its range wins', () => {
    expect(bracket(4, 8)).toSustainMoreThan(bracket(null, 1, 'below-min'), { by: 1 })
    expect(bracket(64, null, 'above-max')).toSustainMoreThan(bracket(10, 12))
    expect(failureOf(() => expect(bracket(10, 12)).toSustainMoreThan(bracket(64, null, 'above-max')))).toMatch(/Received: fail: /)
  })

  test('searches that asked different questions, or a wrong argument, are TypeErrors naming the matcher', () => {
    const other = { ...bracket(1, 2), slo: { ...bracket(1, 2).slo, ttftMs: 200 } }
    expect(() => expect(bracket(1, 2)).toSustainMoreThan(other)).toThrow(
      /^toSustainMoreThan: the two capacity searches are not comparable \(SLO ttft ≤ 500 ms ≠ ttft ≤ 200 ms\)/,
    )
    expect(() => expect(cellOf([1])).toSustainMoreThan(bracket(1, 2))).toThrow(
      /^toSustainMoreThan: expected a capacity search .* as received, received an object of kind "cell"$/,
    )
    // @ts-expect-error: the baseline must be a capacity search
    expect(() => expect(bracket(1, 2)).toSustainMoreThan({})).toThrow(/as the baseline, received an object that is not a servegate result/)
  })
})

describe('toBeMatchedPair and open-loop arms', () => {
  test('arms sent on different schedules are not a matched pair', () => {
    const a = cellOf(ttfts(10, 0), { ratePerS: 2 }).record
    const b = cellOf(ttfts(10, 0), { ratePerS: 3 }).record
    const message = failureOf(() => expect({ kind: 'pair', id: 'p', baseline: [a], candidate: [b] }).toBeMatchedPair())
    expect(message).toMatch(
      /- arrivals: baseline \{"schedule":"[0-9a-f]{64}","maxInFlight":null,"trace":null\} ≠ \{"schedule":"[0-9a-f]{64}","maxInFlight":null,"trace":null\}/,
    )
  })
})
