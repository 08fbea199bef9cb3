import { readFile } from 'node:fs/promises'
import { fileURLToPath } from 'node:url'
import { describe, expect, test } from 'vitest'
import { ServegateError } from '../errors.ts'
import { importRunFile, parseRunText } from '../record/record-io.ts'
import { quantizeGap } from '../schema/itl-packed.ts'
import { RunRecord } from '../schema/run.ts'
import { VLLM_FORMAT_ID } from './vllm.ts'

const DETAILED = fileURLToPath(new URL('../../fixtures/import/vllm-save-detailed.json', import.meta.url))
const SUMMARY = fileURLToPath(new URL('../../fixtures/import/vllm-save-result.json', import.meta.url))
const detailedText = await readFile(DETAILED, 'utf8')
const summaryText = await readFile(SUMMARY, 'utf8')

type Raw = Record<string, unknown> & {
  ttfts: number[]
  itls: number[][]
  latencies: number[]
  queue_times: number[]
  start_times: number[]
  input_lens: number[]
  output_lens: number[]
  errors: string[]
}
const raw = JSON.parse(detailedText) as Raw
const rawSummary = JSON.parse(summaryText) as Record<string, number>
const num = (key: string, from: Record<string, unknown> = raw): number => from[key] as number

function expectRelClose(actual: number | null, expected: number, label: string, tolerance = 1e-12): void {
  expect(actual, label).not.toBeNull()
  const rel = Math.abs((actual as number) - expected) / Math.max(Math.abs(expected), 1e-300)
  expect(rel, `${label}: ${actual} vs ${expected}`).toBeLessThanOrEqual(tolerance)
}

/** Gaps are kept to the whole microsecond (docs/metrics.md, "Gaps, packed"): an ITL figure is within half a µs of the source's. */
function expectWithinUs(actual: number | null, expected: number, label: string): void {
  expect(actual, label).not.toBeNull()
  expect(Math.abs((actual as number) - expected), `${label}: ${actual} vs ${expected}`).toBeLessThanOrEqual(0.0005 + 1e-9)
}

function importText(value: unknown, source = 'x.json'): RunRecord {
  return parseRunText(JSON.stringify(value), source, { from: 'vllm' })
}

describe('a vLLM --save-result --save-detailed file', () => {
  const record = parseRunText(detailedText, DETAILED, { from: 'vllm' })
  const ok = [0, 1, 2, 4, 5]

  test('becomes a valid per-request servegate.run/v1 record', () => {
    expect(RunRecord.parse(record)).toEqual(record)
    expect(record.importedFrom).toEqual({ schema: VLLM_FORMAT_ID, runId: null, engine: null, gpu: null, perRequest: true })
    expect(record.requests).toHaveLength(6)
    expect([record.completed, record.failed]).toEqual([5, 1])
    // vLLM records no planned output length, warm-up count or seed: null, never a guess.
    expect(record.plan).toMatchObject({
      api: 'chat',
      model: 'Qwen/Qwen3-8B',
      concurrency: 2,
      requests: 6,
      maxTokens: null,
      warmupRequests: null,
    })
    expect(record.plan.workload.seed).toBeNull()
    expect(record.finishedAt).toBe('2026-01-12T14:15:03.000Z')
    expect(
      Math.abs(Date.parse(record.finishedAt as string) - Date.parse(record.startedAt as string) - num('duration') * 1000),
    ).toBeLessThan(1)
  })

  test('converts every per-request time from seconds to ms exactly', () => {
    for (const i of ok) {
      const r = record.requests[i]
      expect(r?.status).toBe('ok')
      expect(r?.ttftMs).toBe((raw.ttfts[i] as number) * 1000)
      expect(r?.timeToFirstOutputMs).toBe(r?.ttftMs)
      expect(r?.itlMs).toEqual((raw.itls[i] as number[]).map((s) => quantizeGap(s * 1000)))
      expect(r?.e2eMs).toBe((raw.latencies[i] as number) * 1000)
      expect(r?.queueDelayMs).toBe((raw.queue_times[i] as number) * 1000)
      expect(r?.startOffsetMs).toBe(((raw.start_times[i] as number) - Math.min(...raw.start_times)) * 1000)
      expect(r?.promptTokens).toBe(raw.input_lens[i])
      expect(r?.completionTokens).toBe(raw.output_lens[i])
      expect(r?.completionTokenSource).toBe('client-count')
      expect(r?.generationMs).toBe((r?.e2eMs as number) - (r?.ttftMs as number))
    }
  })

  test('keeps the failed request with its code, last traceback line and partial timings', () => {
    const failed = record.requests[3]
    expect(failed?.status).toBe('failed')
    if (failed?.status !== 'failed') return
    expect(failed.error.code).toBe('STREAM_DROPPED')
    expect(failed.error.message).toMatch(/^aiohttp\.client_exceptions\.ClientPayloadError: Response payload is not completed/)
    expect(failed.error.message).not.toMatch(/Traceback|\n/)
    expect(failed.ttftMs).toBe((raw.ttfts[3] as number) * 1000)
    expect(failed.itlMs).toEqual((raw.itls[3] as number[]).map((s) => quantizeGap(s * 1000)))
    expect([failed.e2eMs, failed.completionTokens]).toEqual([null, null])
    expect(record.failures).toEqual({ STREAM_DROPPED: 1 })
  })

  test("excludes the failed request from every distribution and agrees with vLLM's own summary", () => {
    const d = record.metrics.distributions
    expect(d.ttftMs.samples).toBe(5)
    expect(d.itlMs.samples).toBe(ok.reduce((n, i) => n + (raw.itls[i] as number[]).length, 0))
    expectRelClose(d.ttftMs.mean, num('mean_ttft_ms'), 'mean_ttft_ms')
    expectRelClose(d.ttftMs.p50, num('median_ttft_ms'), 'median_ttft_ms (odd n: nearest rank = numpy median)')
    expectRelClose(d.ttftMs.stddev, num('std_ttft_ms') * Math.sqrt(5 / 4), 'std_ttft_ms → sample sd')
    expectWithinUs(d.itlMs.mean, num('mean_itl_ms'), 'mean_itl_ms')
    expectRelClose(d.tpotMs.mean, num('mean_tpot_ms'), 'mean_tpot_ms', 1e-9)
    expect(record.metrics.wallClockMs).toBe(num('duration') * 1000)
    expectRelClose(record.metrics.outputThroughputTokPerS, num('output_throughput'), 'output_throughput')
    expectRelClose(record.metrics.requestRateReqPerS, num('request_throughput'), 'request_throughput')
    expect(record.metrics.totalCompletionTokens).toBe(raw.total_output_tokens)
    expect(record.metrics.totalPromptTokens).toBe(raw.total_input_tokens)
    expect(record.metrics.completionTokenSources).toEqual({ usage: 0, 'client-count': 5 })
  })

  test('says where each number came from', () => {
    expect(record.methodology.completionTokens).toMatch(/re-tokenizes.*client-count/)
    expect(record.methodology.timeToFirstOutput).toMatch(/does not time reasoning and content separately/)
    expect(record.methodology.e2e).toMatch(/latencies/)
    expect(record.methodology.import).toMatch(/seconds → ms/)
  })

  test('without a per-request latency list e2e is ttft + Σ itl, and the methodology says so', () => {
    const { latencies: _l, start_times: _s, queue_times: _q, ...old } = raw
    const r = importText(old)
    const first = r.requests[0]
    expect(first?.e2eMs).toBe(((raw.ttfts[0] as number) + (raw.itls[0] as number[]).reduce((a, b) => a + b, 0)) * 1000)
    expect([first?.queueDelayMs, first?.startOffsetMs]).toEqual([null, null])
    expect(r.methodology.e2e).toMatch(/^ttft \+ Σ itl/)
  })
})

describe('a vLLM --save-result file without --save-detailed', () => {
  const record = parseRunText(summaryText, SUMMARY, { from: 'vllm' })
  const d = record.metrics.distributions

  test('is marked summary-only, with no requests', () => {
    expect(RunRecord.parse(record)).toEqual(record)
    expect(record.importedFrom?.perRequest).toBe(false)
    expect(record.requests).toEqual([])
    expect([record.completed, record.failed, record.plan.requests, record.plan.concurrency]).toEqual([8, 0, 8, 4])
    expect(record.failures).toEqual({})
  })

  test('holds exactly the figures vLLM wrote and invents none', () => {
    const std = (key: string): number => num(key, rawSummary) * Math.sqrt(8 / 7)
    expect(d.ttftMs).toEqual({
      samples: 8,
      mean: rawSummary.mean_ttft_ms,
      stddev: std('std_ttft_ms'),
      ci95Low: null,
      ci95High: null,
      min: null,
      p25: null,
      p50: rawSummary.median_ttft_ms,
      p75: null,
      p90: rawSummary.p90_ttft_ms,
      p95: null,
      p99: rawSummary.p99_ttft_ms,
      max: null,
    })
    expect(d.timeToFirstOutputMs).toEqual(d.ttftMs)
    expect(d.e2eMs.mean).toBe(rawSummary.mean_e2el_ms)
    expect(d.e2eMs.p99).toBe(rawSummary.p99_e2el_ms)
    expect(d.tpotMs.p50).toBe(rawSummary.median_tpot_ms)
    expect(d.itlMs.p90).toBe(rawSummary.p90_itl_ms)
    for (const name of ['generationMs', 'decodeTokPerS', 'effectivePrefillTokPerS', 'sendLagMs', 'queueDelayMs'] as const) {
      expect(d[name].samples, name).toBe(0)
      expect(d[name].mean, name).toBeNull()
    }
    expect(d.promptTokens).toMatchObject({ samples: 8, mean: 1024, p50: null, stddev: null })
    expect(record.metrics.outputThroughputTokPerS).toBe(rawSummary.output_throughput)
    expect(record.metrics.requestRateReqPerS).toBe(rawSummary.request_throughput)
    expect(record.metrics.wallClockMs).toBe(num('duration', rawSummary) * 1000)
    expect(record.metrics.p99DescriptiveOnly).toEqual(['ttftMs', 'timeToFirstOutputMs', 'e2eMs', 'tpotMs'])
  })

  test('without failed or num_prompts its failed count is null, never 0; with num_prompts it is derived', () => {
    const { failed: _failed, num_prompts: _prompts, ...unknown } = rawSummary
    const r = importText(unknown)
    expect([r.completed, r.failed, r.plan.requests]).toEqual([8, null, 8])
    expect(r.methodology.failedCount).toBe('not recorded: this vLLM version writes neither failed nor num_prompts, so failed is null')
    const derived = importText({ ...unknown, num_prompts: 10 })
    expect([derived.failed, derived.plan.requests]).toEqual([2, 10])
    expect(derived.methodology.failedCount).toBe('not written by this vLLM version; derived as num_prompts − completed (2)')
    expect(record.methodology.failedCount).toBe("vLLM's failed count (0)")
  })

  test("says its percentiles are numpy's, not nearest-rank", () => {
    expect(record.methodology.distributions).toMatch(/summary-only.*linear interpolation, not servegate's nearest-rank/)
    expect(record.methodology.import).toMatch(/^summary-only import of a vLLM --save-result file/)
  })

  test('fills a min and max only from p0 and p100 keys', () => {
    const r = importText({ ...rawSummary, p0_ttft_ms: 51.5, p100_ttft_ms: 299.5, 'p99.9_ttft_ms': 298 })
    expect(r.metrics.distributions.ttftMs).toMatchObject({ min: 51.5, max: 299.5 })
  })

  test('reads a client_queue_time summary as the queue delay', () => {
    const r = importText({
      ...rawSummary,
      mean_client_queue_time_ms: 12.5,
      median_client_queue_time_ms: 10,
      std_client_queue_time_ms: 2,
      p99_client_queue_time_ms: 30,
    })
    expect(r.metrics.distributions.queueDelayMs).toMatchObject({ samples: 8, mean: 12.5, p50: 10, p99: 30 })
  })
})

describe('vLLM --append-result files hold one run per line', () => {
  const text = `${summaryText}\n${detailedText}\n`

  test('the last run by default, another with line', () => {
    expect(parseRunText(text, 'a.json', { from: 'vllm' }).importedFrom?.perRequest).toBe(true)
    const first = parseRunText(text, 'a.json', { from: 'vllm', line: 1 })
    expect(first.importedFrom?.perRequest).toBe(false)
    expect(first.methodology.import).toMatch(/\(line 1\)/)
  })
})

describe('a file of the wrong shape for --from vllm', () => {
  const { duration: _d, ...noDuration } = rawSummary
  const { itls: _i, ...noItls } = raw
  test.each([
    ['a missing summary field', noDuration, /^x\.json: field "duration" is missing; pass the JSON that `vllm bench serve --save-result`/],
    ['a mistyped list', { ...raw, ttfts: 'fast' }, /^x\.json: field "ttfts" is the string "fast"; expected array;/],
    ['a mistyped entry', { ...raw, itls: [[0.1], ['x']] }, /^x\.json: field "itls\[1\]\[0\]" is the string "x"; expected number;/],
    [
      'a missing per-request list',
      noItls,
      /^x\.json: field "itls" is missing; a --save-detailed file holds input_lens, output_lens, ttfts, itls, errors together;/,
    ],
    ['lists of different lengths', { ...raw, errors: ['', ''] }, /^x\.json: field "errors" has 2 entries but "ttfts" has 6;/],
    [
      'a completed count the lists contradict',
      { ...raw, completed: 6 },
      /^x\.json: field "completed" is 6 but the per-request lists hold 5 requests with an empty errors\[i\]/,
    ],
    [
      'no requests at all',
      { ...noDuration, duration: 1, completed: 0, failed: null, num_prompts: null },
      /^x\.json: field "num_prompts" is missing and "completed" is 0/,
    ],
    [
      'an SGLang line',
      {
        backend: 'sglang',
        duration: 1,
        completed: 1,
        total_input_tokens: 1,
        total_output_tokens: 1,
        total_output_tokens_retokenized: 1,
        mean_e2e_latency_ms: 1,
      },
      /^x\.json: field "model_id" is missing and the keys are SGLang's .*; pass --from sglang$/,
    ],
    ['a JSON array', [1, 2], /^x\.json: is an array, not a JSON object;/],
  ])('%s throws FILE_INVALID naming the field', (_name, value, message) => {
    let caught: unknown
    try {
      importText(value)
    } catch (err) {
      caught = err
    }
    expect(caught).toBeInstanceOf(ServegateError)
    expect((caught as ServegateError).code).toBe('FILE_INVALID')
    expect((caught as ServegateError).message).toMatch(message)
    expect((caught as ServegateError).message).not.toMatch(/\n/)
  })

  test('a file that is not JSON names it', async () => {
    await expect(importRunFile(fileURLToPath(import.meta.url), 'vllm')).rejects.toThrow(
      /vllm\.test\.ts is not JSON \(.*\); pass the JSON that vllm bench serve --save-result writes$/,
    )
  })
})
