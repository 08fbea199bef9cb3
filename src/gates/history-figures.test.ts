import { describe, expect, test } from 'vitest'
import { failedRequest, launchOf, okRequest } from '../../fixtures/gate-fixture.ts'
import { historyFigure, isHistoryMetric } from './history-figures.ts'
import { GATED_METRICS, launchFigures } from './launch-figures.ts'

describe('history figures', () => {
  test('a rate: the geometric mean over ok requests, its relative se the sd of the logs over √n', () => {
    const values = [90, 100, 110, 120]
    const record = { requests: [...launchOf('decodeTokPerS', values).requests, failedRequest(9)] }
    const logs = values.map(Math.log)
    const mean = logs.reduce((a, b) => a + b) / 4
    const sd = Math.sqrt(logs.reduce((s, x) => s + (x - mean) ** 2, 0) / 3)
    const f = historyFigure(record, 'decodeTokPerS')
    expect(f?.value).toBeCloseTo(Math.exp(mean), 10)
    expect(f?.relativeSe).toBeCloseTo(sd / 2, 10)
    const one = historyFigure(launchOf('decodeTokPerS', [50]), 'decodeTokPerS')
    expect(one?.value).toBeCloseTo(50, 10)
    expect(one?.relativeSe).toBeNull()
  })

  test('a latency quantile: the nearest-rank percentile, its se from the order-statistic interval', () => {
    const values = Array.from({ length: 100 }, (_, i) => i + 1)
    const f = historyFigure(launchOf('ttftMs', values), 'ttftMs p50')
    expect(f?.value).toBe(50)
    // Ranks 50 ∓ 1.96·√25: 40 and 60.
    expect(f?.relativeSe).toBeCloseTo(Math.log(60 / 40) / (2 * 1.96), 10)
    // p99 of 100: the interval's upper rank runs off the sample, so no se.
    expect(historyFigure(launchOf('ttftMs', values), 'ttftMs p99')).toEqual({ value: 99, relativeSe: null })
  })

  test('ITL: every gap counts toward the percentile, but its gaps are not independent: no se', () => {
    const record = { requests: [okRequest(0, { itlMs: [10, 20, 30] }), okRequest(1, { itlMs: [40, 50] })] }
    expect(historyFigure(record, 'itlMs p50')).toEqual({ value: 30, relativeSe: null })
  })

  test('a service rate is the cell’s figure; a launch without it has none', () => {
    const record = { requests: [], metrics: { outputThroughputTokPerS: 812, requestRateReqPerS: null, wallClockMs: 1000 } }
    expect(historyFigure(record, 'outputThroughputTokPerS')).toEqual({ value: 812, relativeSe: null })
    expect(historyFigure(record, 'requestRateReqPerS')).toBeNull()
  })

  test('every figure is the one a noise profile keeps for the launch (launchFigures), a repeated index counted once', () => {
    const record = {
      requests: [0, 1, 2, 3, 4, 5, 6, 7, 3].map((index, i) =>
        okRequest(index, {
          decodeTokPerS: 50 + 3 * i,
          effectivePrefillTokPerS: 900 + 40 * i,
          ttftMs: 20 + 7 * ((i * 5) % 9),
          tpotMs: 10 + i,
          e2eMs: 300 + 11 * i,
          timeToFirstOutputMs: 21 + 2 * i,
          itlMs: [9 + i, 11, 10 + (i % 3)],
          completionTokens: 16,
        }),
      ),
      metrics: { outputThroughputTokPerS: 700, requestRateReqPerS: 3, wallClockMs: 2000 },
    }
    const profile = launchFigures(record)
    expect(Object.keys(profile).length).toBeGreaterThan(20)
    for (const metric of GATED_METRICS) expect([metric, historyFigure(record, metric)?.value]).toEqual([metric, profile[metric]])
  })

  test('the metrics kept are the gates’ rate and latency names; shares, accuracy and capacity are not', () => {
    expect(
      ['decodeTokPerS', 'throughputTokPerS', 'outputThroughputTokPerS', 'ttftMs p95', 'timeToFirstOutputMs p50'].map(isHistoryMetric),
    ).toEqual([true, true, true, true, true])
    expect(
      ['accuracy', 'good fraction (ttft ≤ 200 ms)', 'ttft p95', 'ttftMs p100', 'cached share of prompt tokens'].map(isHistoryMetric),
    ).toEqual([false, false, false, false, false])
    expect(historyFigure(launchOf('ttftMs', [1, 2]), 'accuracy')).toBeNull()
  })
})
