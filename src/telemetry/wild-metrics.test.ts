import { existsSync, readFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { describe, expect, test } from 'vitest'
import { parseExposition } from './exposition.ts'
import { metricLine, preemptionsOver, readEngineMetrics, timingDeltas } from './prometheus.ts'

// Real /metrics dumps other people published (provenance in fixtures/reference/wild/PROVENANCE.md).
const WILD = fileURLToPath(new URL('../../fixtures/reference/wild/metrics/', import.meta.url))

function wild(name: string): string {
  const path = `${WILD}${name}`
  if (!existsSync(path)) throw new Error(`${path} is missing: these tests read the real dumps in fixtures/reference/wild/metrics/`)
  return readFileSync(path, 'utf8')
}

/** Two snapshots of the same scrape a second apart: what is absent, and why. */
function absentReasons(text: string, kind: Parameters<typeof readEngineMetrics>[1]): Record<string, string> {
  const reading = readEngineMetrics(parseExposition(text), kind)
  return timingDeltas({ atMs: 0, reading }, { atMs: 1000, reading }, kind).reasons
}

describe('the real dumps in wild/metrics, read by the scraper', () => {
  test('vLLM V1 (cut at 40 lines by its author: gauges and counters, no histograms)', () => {
    const text = wild('vllm.prom')
    const reading = readEngineMetrics(parseExposition(text), 'vllm', 'llama-vllm-single')
    expect(reading).toEqual({
      running: 0,
      waiting: 0,
      kvUsage: 0,
      timings: { prefill: null, decode: null, ttft: null, queue: null },
      promptTokens: 0,
      generationTokens: 0,
      // vllm:num_preemptions_total, with its _created gauge beside it.
      preemptions: 0,
      specDecode: null,
      line: 'vLLM 0.9 or later (vllm:kv_cache_usage_perc)',
    })
    // Another served model's series are left out.
    expect(readEngineMetrics(parseExposition(text), 'vllm', 'other-model')).toMatchObject({ running: null, kvUsage: null })
  })

  test('SGLang 2025 metric set: gauges, TTFT and token counters; no stage series, so no prefill and no decode', () => {
    const text = wild('sglang.prom')
    const reading = readEngineMetrics(parseExposition(text), 'sglang', 'meta-llama/Llama-3.1-8B-Instruct')
    expect(reading).toEqual({
      running: 162,
      waiting: 2826,
      kvUsage: 0.28,
      timings: { prefill: null, decode: null, ttft: { secondsSum: 2.3518979474117756e6, count: 11008 }, queue: null },
      promptTokens: 8.128902e6,
      generationTokens: 7.557572e6,
      preemptions: null,
      specDecode: null,
      line: 'SGLang 2025 metric set (no per-stage or queue-time histograms)',
    })
    const reasons = absentReasons(text, 'sglang')
    expect(reasons['timings.prefill']).toMatch(/per_stage_req_latency_seconds\{stage="prefill_forward"\} is not in the engine's metrics/)
    expect(reasons['timings.prefill']).toMatch(/the scrape shows a SGLang 2025 metric set/)
    expect(reasons['timings.decode']).toMatch(/^SGLang exports no per-request decode time/)
  })

  test('preemptions over a window: the real vLLM counter read; the SGLang 2025 set has no retraction counter, and says so', () => {
    const vllm = readEngineMetrics(parseExposition(wild('vllm.prom')), 'vllm', 'llama-vllm-single')
    expect(preemptionsOver({ atMs: 0, reading: vllm }, { atMs: 1000, reading: vllm }, 'vllm')).toEqual({ preemptions: 0, reason: null })
    const sglang = readEngineMetrics(parseExposition(wild('sglang.prom')), 'sglang', 'meta-llama/Llama-3.1-8B-Instruct')
    const over = preemptionsOver({ atMs: 0, reading: sglang }, { atMs: 1000, reading: sglang }, 'sglang')
    expect(over.preemptions).toBeNull()
    expect(over.reason).toMatch(
      /^sglang:num_retracted_requests_total is not in the engine's metrics \(a scheduler counter of the 0\.5\.x line/,
    )
    expect(over.reason).toMatch(/the scrape shows a SGLang 2025 metric set/)
  })

  test('llama-server, current CUDA build: counters and slots; no KV gauge (removed in PR #13660)', () => {
    const text = wild('llama-server.prom')
    const reading = readEngineMetrics(parseExposition(text), 'llama-server')
    expect(reading).toEqual({
      running: 0,
      waiting: 0,
      kvUsage: null,
      timings: { prefill: { secondsSum: 32.378, count: null }, decode: { secondsSum: 469.376, count: null }, ttft: null, queue: null },
      promptTokens: 26129,
      generationTokens: 10911,
      preemptions: null,
      specDecode: null,
      line: 'llama.cpp build after PR #13660 (May 2025: no KV-usage gauge)',
    })
  })

  test('trtllm-serve 1.1/1.2: unprefixed series labelled model_name="undefined" are recognized as that line', () => {
    const text = wild('trtllm.prom')
    const exposition = parseExposition(text)
    expect(metricLine(exposition, 'trtllm')).toBe('trtllm-serve up to 1.2 (five unprefixed request series only)')
    // The placeholder label does not hide the series from a scraper told the served name.
    const reading = readEngineMetrics(exposition, 'trtllm', 'Qwen3-8B')
    expect(reading).toMatchObject({
      running: null,
      waiting: null,
      kvUsage: null,
      promptTokens: null,
      line: expect.stringMatching(/up to 1\.2/),
    })
    const reasons = absentReasons(text, 'trtllm')
    expect(reasons['timings.prefill']).toBe(
      "trtllm_request_prefill_time_seconds is not in the engine's metrics " +
        '(first scheduled → first token, 1.3 line; releases up to 1.2 export no prefill histogram); ' +
        'the scrape shows a trtllm-serve up to 1.2 (five unprefixed request series only)',
    )
    // The dump was cut after three buckets: no _count, so no TTFT total either.
    expect(reasons['timings.ttft']).toMatch(/trtllm_time_to_first_token_seconds \/ time_to_first_token_seconds is not in/)
  })

  test('a complete trtllm-serve 1.2 histogram under the placeholder label is read through the unprefixed name', () => {
    const text = [
      'time_to_first_token_seconds_sum{engine_type="undefined",model_name="undefined"} 1.5',
      'time_to_first_token_seconds_count{engine_type="undefined",model_name="undefined"} 6.0',
      'request_queue_time_seconds_sum{engine_type="undefined",model_name="undefined"} 0.25',
      'request_queue_time_seconds_count{engine_type="undefined",model_name="undefined"} 6.0',
    ].join('\n')
    expect(readEngineMetrics(parseExposition(text), 'trtllm', 'Qwen3-8B').timings).toEqual({
      prefill: null,
      decode: null,
      ttft: { secondsSum: 1.5, count: 6 },
      queue: { secondsSum: 0.25, count: 6 },
    })
  })
})
