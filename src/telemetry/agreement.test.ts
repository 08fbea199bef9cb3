import { readFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { describe, expect, test } from 'vitest'
import type { EngineOccupancy } from '../schema/telemetry.ts'
import { LlamaServerTimings } from '../schema/telemetry.ts'
import { compareEngineHistograms, compareHistogramTotals, compareLlamaServerTimings, compareTimings } from './agreement.ts'

const label = { metric: 'prefill', engineSource: 'engine', clientSource: 'client' } as const

describe('compareTimings', () => {
  test('engine below the client: agree, gaps are client − engine (nearest-rank)', () => {
    const pairs = [10, 20, 30, 40].map((gap, i) => ({ engineMs: 100 + i, clientMs: 100 + i + gap }))
    expect(compareTimings({ ...label, pairs })).toEqual({
      ...label,
      samples: 4,
      meanGapMs: 25,
      medianGapMs: 20,
      p95GapMs: 40,
      engineExceedsClient: 0,
      toleranceMs: 5,
      toleranceFraction: 0.05,
      verdict: 'agree',
      note: "engine ≤ client expected: the client's time also holds queueing, network and scheduling; median gap 20.0 ms over 4 requests",
    })
  })

  test('tolerance is max(5 ms, 5% of the client time), exceeded strictly', () => {
    expect(compareTimings({ ...label, pairs: [{ engineMs: 55, clientMs: 50 }] }).verdict).toBe('agree')
    expect(compareTimings({ ...label, pairs: [{ engineMs: 55.01, clientMs: 50 }] }).verdict).toBe('engine-slower-than-client')
    expect(compareTimings({ ...label, pairs: [{ engineMs: 1050, clientMs: 1000 }] }).verdict).toBe('agree')
    expect(compareTimings({ ...label, pairs: [{ engineMs: 1051, clientMs: 1000 }] }).verdict).toBe('engine-slower-than-client')
    expect(compareTimings({ ...label, pairs: [{ engineMs: 56, clientMs: 50 }], tolerance: { ms: 10, fraction: 0 } }).verdict).toBe('agree')
  })

  test('an engine slower than the client is counted and flagged with the worst request', () => {
    const result = compareTimings({
      ...label,
      pairs: [
        { engineMs: 40, clientMs: 50 },
        { engineMs: 80, clientMs: 50 },
        { engineMs: 60, clientMs: 50 },
      ],
    })
    expect(result).toMatchObject({ samples: 3, engineExceedsClient: 2, medianGapMs: -10, verdict: 'engine-slower-than-client' })
    expect(result.note).toBe(
      "2 of 3 requests: engine prefill above the client's beyond max(5 ms, 5%), worst engine 80.0 ms vs client 50.0 ms; " +
        'a harness timing bug (or a clock mix-up) is likely',
    )
  })

  test('pairs missing a side are skipped; none left is insufficient data', () => {
    expect(
      compareTimings({
        ...label,
        pairs: [
          { engineMs: null, clientMs: 5 },
          { engineMs: 3, clientMs: null },
        ],
      }),
    ).toMatchObject({
      samples: 0,
      meanGapMs: null,
      medianGapMs: null,
      p95GapMs: null,
      engineExceedsClient: 0,
      verdict: 'insufficient-data',
      note: 'no request had both an engine and a client prefill time',
    })
  })
})

/** The `timings` object of the last chunk of a real llama-server stream (fixtures/models). */
function capturedTimings(): unknown {
  const stream = readFileSync(fileURLToPath(new URL('../../fixtures/models/llama-server-stream.txt', import.meta.url)), 'utf8')
  const last = stream
    .split('\n')
    .filter((l) => l.startsWith('data: {'))
    .at(-1) as string
  return (JSON.parse(last.slice('data: '.length)) as { timings: unknown }).timings
}

describe('compareLlamaServerTimings', () => {
  test('the real timings object parses with its exact values', () => {
    expect(LlamaServerTimings.parse(capturedTimings())).toEqual({
      cache_n: 0,
      prompt_n: 68,
      prompt_ms: 0.832,
      prompt_per_token_ms: 0.012235294117647058,
      prompt_per_second: 81730.76923076923,
      predicted_n: 16,
      predicted_ms: 2.365,
      predicted_per_token_ms: 0.15766666666666668,
      predicted_per_second: 6342.494714587738,
    })
  })

  test('prompt_ms vs time to first output, predicted_ms vs generation', () => {
    const [prefill, generation] = compareLlamaServerTimings([
      { timings: capturedTimings(), timeToFirstOutputMs: 1.832, generationMs: 2.865 },
      { timings: { ...(capturedTimings() as object), prompt_ms: 10, predicted_ms: 20 }, timeToFirstOutputMs: 14, generationMs: 21 },
      { timings: { prompt_n: 'x' }, timeToFirstOutputMs: 5, generationMs: 5 },
      { timings: undefined, timeToFirstOutputMs: 5, generationMs: 5 },
    ])
    expect(prefill).toMatchObject({
      metric: 'prefill',
      engineSource: 'llama-server timings.prompt_ms',
      clientSource: 'timeToFirstOutputMs',
      samples: 2,
      verdict: 'agree',
      medianGapMs: 1,
    })
    expect(prefill?.meanGapMs).toBeCloseTo(2.5, 12)
    expect(generation).toMatchObject({
      metric: 'generation',
      engineSource: 'llama-server timings.predicted_ms',
      clientSource: 'generationMs',
      samples: 2,
      verdict: 'agree',
      medianGapMs: 0.5,
    })
  })

  test('a client generation shorter than the engine spent generating is flagged', () => {
    const [, generation] = compareLlamaServerTimings([
      { timings: { ...(capturedTimings() as object), predicted_ms: 500 }, timeToFirstOutputMs: 600, generationMs: 100 },
    ])
    expect(generation).toMatchObject({ verdict: 'engine-slower-than-client', engineExceedsClient: 1 })
  })
})

describe('compareHistogramTotals', () => {
  const totals = {
    metric: 'prefill',
    engineSource: 'vllm:request_prefill_time_seconds (sum/count)',
    clientSource: 'timeToFirstOutputMs',
  } as const

  test('means compared; per-request figures are null for histogram totals', () => {
    expect(compareHistogramTotals({ ...totals, engine: { secondsSum: 0.4, count: 4 }, clientMs: [110, 120, 130, 140] })).toEqual({
      ...totals,
      samples: 4,
      meanGapMs: 25,
      medianGapMs: null,
      p95GapMs: null,
      engineExceedsClient: null,
      toleranceMs: 5,
      toleranceFraction: 0.05,
      verdict: 'agree',
      note:
        "engine ≤ client expected: the client's time also holds queueing, network and scheduling; " +
        'mean gap 25.0 ms over 4 requests (histogram totals: no per-request gaps)',
    })
  })

  test('an engine mean above the client mean is flagged', () => {
    const result = compareHistogramTotals({ ...totals, engine: { secondsSum: 0.8, count: 4 }, clientMs: [110, 120, 130, 140] })
    expect(result).toMatchObject({ verdict: 'engine-slower-than-client', meanGapMs: -75 })
    expect(result.note).toMatch(/^engine mean prefill 200\.0 ms exceeds the client's mean 125\.0 ms/)
  })

  test.each([
    [
      { secondsSum: 1, count: 5 },
      [1, 2, 3, 4],
      'the engine counted 5 requests in the window, the client measured 4: ' +
        'the scrapes do not bracket exactly the measured requests (warm-up inside the window, or a scrape missed)',
    ],
    [
      { secondsSum: 1, count: null },
      [1],
      'the engine keeps a plain counter without a request count; compare its per-request timings instead',
    ],
    [{ secondsSum: 0, count: 0 }, [], 'nothing to compare: the engine counted 0 requests, the client measured 0'],
    [null, [1], 'the engine reported no total for this window'],
  ])('%j vs %j: insufficient data', (engine, clientMs, note) => {
    expect(compareHistogramTotals({ ...totals, engine, clientMs })).toMatchObject({ verdict: 'insufficient-data', note, meanGapMs: null })
  })
})

function occupancy(
  kind: EngineOccupancy['kind'],
  timings: Partial<EngineOccupancy['timings']>,
  reasons: Record<string, string> = {},
): EngineOccupancy {
  return {
    kind,
    url: 'http://127.0.0.1:8000/metrics',
    intervalMs: 250,
    scrapes: 10,
    scrapeErrors: 0,
    lastScrapeError: null,
    runningMax: 2,
    waitingMax: 0,
    kvUsageMax: null,
    preemptions: null,
    timings: {
      windowMs: 2000,
      prefill: null,
      decode: null,
      ttft: null,
      queue: null,
      promptTokens: null,
      generationTokens: null,
      ...timings,
    },
    reasons,
  }
}

describe('compareEngineHistograms', () => {
  test('vLLM: prefill and engine TTFT vs time to first output, decode vs generation', () => {
    const results = compareEngineHistograms(
      occupancy('vllm', {
        prefill: { secondsSum: 0.2, count: 2 },
        ttft: { secondsSum: 0.3, count: 2 },
        decode: { secondsSum: 4, count: 2 },
      }),
      {
        timeToFirstOutputMs: [160, 170],
        generationMs: [2010, 2030],
      },
    )
    expect(results.map((r) => [r.metric, r.engineSource, r.verdict, r.meanGapMs])).toEqual([
      ['prefill', 'vllm:request_prefill_time_seconds (sum/count)', 'agree', 65],
      ['time-to-first-token', 'vllm:time_to_first_token_seconds (sum/count)', 'agree', 15],
      ['generation', 'vllm:request_decode_time_seconds (sum/count)', 'agree', 20],
    ])
  })

  test('SGLang names its per-stage series', () => {
    const [prefill] = compareEngineHistograms(occupancy('sglang', { prefill: { secondsSum: 0.1, count: 1 } }), {
      timeToFirstOutputMs: [120],
      generationMs: [],
    })
    expect(prefill?.engineSource).toBe('sglang:per_stage_req_latency_seconds{stage="prefill_forward"} (sum/count)')
  })

  test('llama-server: counters without request counts, no TTFT metric: insufficient data with the reasons', () => {
    const results = compareEngineHistograms(
      occupancy(
        'llama-server',
        { prefill: { secondsSum: 1, count: null }, decode: { secondsSum: 2, count: null } },
        { 'timings.ttft': 'llama-server exposes no time-to-first-token metric' },
      ),
      { timeToFirstOutputMs: [100], generationMs: [100] },
    )
    expect(results.map((r) => [r.metric, r.verdict, r.note])).toEqual([
      ['prefill', 'insufficient-data', 'the engine keeps a plain counter without a request count; compare its per-request timings instead'],
      ['time-to-first-token', 'insufficient-data', 'llama-server exposes no time-to-first-token metric'],
      [
        'generation',
        'insufficient-data',
        'the engine keeps a plain counter without a request count; compare its per-request timings instead',
      ],
    ])
  })
})
