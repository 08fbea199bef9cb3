import { readFile } from 'node:fs/promises'
import { describe, expect, test } from 'vitest'
import { deriveRequestMetrics } from '../metrics/request-metrics.ts'
import { parseRunRecord } from '../record/record-io.ts'
import type { Distribution, RequestMetricName } from '../schema/run.ts'
import { RunRecord } from '../schema/run.ts'

const REFERENCE = new URL('../../fixtures/reference/anvil-serving-run-rtx5090.json', import.meta.url)
const raw = JSON.parse(await readFile(REFERENCE, 'utf8')) as Record<string, unknown> & {
  metrics: Record<string, number>
  request_timings: Array<Record<string, number>>
}
const record = parseRunRecord(raw, 'reference')

/** servegate metric → anvil key stem and unit suffix. */
const ANVIL_KEYS: Record<RequestMetricName, [stem: string, unit: string]> = {
  ttftMs: ['ttft', '_ms'],
  timeToFirstOutputMs: ['time_to_first_output', '_ms'],
  e2eMs: ['e2e', '_ms'],
  generationMs: ['generation', '_ms'],
  tpotMs: ['tpot', '_ms'],
  decodeTokPerS: ['decode_tok_s', ''],
  effectivePrefillTokPerS: ['effective_prefill_tok_s', ''],
  promptTokens: ['prompt_tokens', ''],
  completionTokens: ['completion_tokens', ''],
}
const STAT_KEYS: Record<keyof Distribution, string> = {
  samples: 'samples',
  mean: 'mean',
  stddev: 'stddev',
  ci95Low: 'mean_ci95_low',
  ci95High: 'mean_ci95_high',
  min: 'min',
  p25: 'p25',
  p50: 'p50',
  p75: 'p75',
  p90: 'p90',
  p95: 'p95',
  p99: 'p99',
  max: 'max',
}

function expectRelClose(actual: number | null, expected: number, label: string): void {
  expect(actual, label).not.toBeNull()
  const rel = Math.abs((actual as number) - expected) / Math.max(Math.abs(expected), 1e-300)
  expect(rel, `${label}: ${actual} vs ${expected}`).toBeLessThanOrEqual(1e-9)
}

describe('importing the anvil-serving reference run', () => {
  test('yields a valid servegate.run/v1 record with its counts', () => {
    expect(RunRecord.parse(record)).toEqual(record)
    expect(record.completed).toBe(3)
    expect(record.failed).toBe(0)
    expect(record.importedFrom?.engine).toBe('strata')
    expect(record.plan.concurrency).toBe(1)
  })

  test.each(Object.entries(ANVIL_KEYS))('recomputes every %s statistic to 1e-9 relative', (name, [stem, unit]) => {
    const d = record.metrics.distributions[name as RequestMetricName]
    for (const [stat, suffix] of Object.entries(STAT_KEYS)) {
      const key = stat === 'samples' ? `${stem}_samples` : `${stem}_${suffix}${unit}`
      const expected = raw.metrics[key]
      expect(expected, `reference key ${key}`).toBeTypeOf('number')
      expectRelClose(d[stat as keyof Distribution], expected as number, key)
    }
  })

  test('recomputes throughput and totals', () => {
    expectRelClose(record.metrics.outputThroughputTokPerS, raw.metrics.throughput_tok_s as number, 'throughput_tok_s')
    expect(record.metrics.totalCompletionTokens).toBe(raw.metrics.output_tokens)
    expect(record.metrics.totalPromptTokens).toBe(raw.metrics.prompt_tokens)
    expect(record.metrics.completionTokenSources.usage).toBe(3)
    expect(record.metrics.p99DescriptiveOnly).toContain('ttftMs')
  })

  test('derives each request’s decode, tpot, generation and effective prefill from its raw times', () => {
    for (const t of raw.request_timings) {
      const m = deriveRequestMetrics({
        sentAt: 0,
        firstOutputAt: t.time_to_first_output_ms as number,
        firstContentAt: t.ttft_ms as number,
        endAt: t.e2e_ms as number,
        outputChunkAt: [],
        usagePromptTokens: t.prompt_tokens as number,
        usageCompletionTokens: t.output_tokens as number,
      })
      expectRelClose(m.generationMs, t.generation_ms as number, 'generation_ms')
      expectRelClose(m.decodeTokPerS, t.decode_tok_s as number, 'decode_tok_s')
      expectRelClose(m.tpotMs, t.tpot_ms as number, 'tpot_ms')
      expectRelClose(m.effectivePrefillTokPerS, t.effective_prefill_tok_s as number, 'effective_prefill_tok_s')
      expect(m.completionTokenSource).toBe('usage')
    }
  })

  test('a failed or canary-invalid request is kept but enters no distribution', () => {
    const timings = raw.request_timings.map((t, i) => (i === 1 ? { ...t, request_canary: { passed: false } } : t))
    const failures = [{ request_index: 3, code: 'HTTP_STATUS', message: 'HTTP 500 Authorization: Bearer abcdefghijk' }]
    const r = parseRunRecord({ ...raw, request_timings: timings, failures, requests: 4 }, 'modified')
    expect(r.completed).toBe(2)
    expect(r.failed).toBe(2)
    expect(r.failures).toEqual({ CONTRACT_INVALID: 1, HTTP_STATUS: 1 })
    expect(r.metrics.distributions.ttftMs.samples).toBe(2)
    expect(JSON.stringify(r)).not.toContain('abcdefghijk')
  })

  test('an unknown schema is refused naming the field', () => {
    expect(() => parseRunRecord({ schema: 'other/v9' }, 'x.json')).toThrow(
      /x\.json: field "schema" is "other\/v9"; expected "servegate\.run\/v1"/,
    )
  })

  test('records canaries, output control, prompt-cache mode, sampling, unknown warm-up and the actual context', () => {
    const w = record.plan.workload
    expect(w.canaries).toBe(true)
    expect(record.metrics.canaries).toEqual({ samples: 3, passed: 3 })
    expect(record.requests[0]?.canary).toMatchObject({ marker: 'ANVIL_REQ_17_00000', atStart: true, foreignMarkers: [], passed: true })
    // observe with response_words 0: no length target, so nothing was controlled.
    expect(w.outputControl).toEqual({ mode: 'none', knob: null })
    expect(record.methodology.outputControl).toMatch(/"observe" with response_words 0: no length target/)
    expect(w.prefixCache).toEqual({ mode: 'unique', tokens: null })
    expect(w.sampling).toEqual({
      temperature: { requested: 0.9, sent: true, field: 'temperature', effective: 0.9, note: null },
      top_p: { requested: 0.95, sent: true, field: 'top_p', effective: 0.95, note: null },
    })
    expect(record.plan.warmupRequests).toBeNull()
    expect(record.methodology.warmup).toMatch(/does not record its warm-up/)
    expect(w.promptTokens).toBe(8192)
    expect(w.calibration).toMatchObject({ method: 'none', targetTokens: 8192, toleranceTokens: 41, outsideTolerance: 3 })
    expect(w.calibration?.warning).toMatch(/planned context_tokens 8192, but the engine counted 7415–7418 prompt tokens/)
  })

  test('keeps TPOT from mean_inter_token_latency_ms when that is all a request records', () => {
    const timings = raw.request_timings.map(({ tpot_ms: _t, mean_time_per_output_token_ms: _m, ...t }) => t)
    const r = parseRunRecord({ ...raw, request_timings: timings }, 'legacy')
    for (const [i, t] of raw.request_timings.entries()) expect(r.requests[i]?.tpotMs).toBe(t.mean_inter_token_latency_ms)
    expectRelClose(r.metrics.distributions.tpotMs.mean, raw.metrics.tpot_mean_ms as number, 'tpot mean')
    expect(r.methodology.tpot).toMatch(/3 request\(s\) record only the older key/)
  })
})
