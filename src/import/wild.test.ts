import { readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, test } from 'vitest'
import { parseRunFile } from '../record/record-io.ts'
import { type RequestRecord, RunRecord } from '../schema/run.ts'
import { normalizePythonJson } from './result-file.ts'

/*
 * Other people's real result files (see fixtures/reference/wild/PROVENANCE.md, byte copies of ../shared/reference/wild): each one imports,
 * and servegate's figures agree with the file's own summaries to the file's precision (float64:
 * 1e-9 relative). Per-request imports are recomputed by servegate, so they are compared with the
 * numpy statistics (mean, population std, linear percentiles) taken over the imported requests.
 */
const WILD = join(import.meta.dirname, '../../fixtures/reference/wild')
const read = (name: string): string => readFileSync(join(WILD, name), 'utf8')
const json = (name: string): Record<string, unknown> => JSON.parse(normalizePythonJson(read(name))) as Record<string, unknown>
const lines = (name: string): Record<string, number>[] =>
  normalizePythonJson(read(name))
    .split('\n')
    .filter((l) => l.trim() !== '')
    .map((l) => JSON.parse(l) as Record<string, number>)

/** A figure the file must hold. */
function fig(f: Record<string, unknown>, key: string): number {
  const v = f[key]
  if (typeof v !== 'number') throw new Error(`the file has no number "${key}"`)
  return v
}

function close(actual: number | null | undefined, expected: unknown, label: string, rel = 1e-9): void {
  expect(typeof expected, `${label}: the file's figure`).toBe('number')
  expect(actual, label).not.toBeNull()
  const e = expected as number
  const err = Math.abs((actual as number) - e) / Math.max(Math.abs(e), 1e-300)
  expect(err, `${label}: ${actual} vs the file's ${e}`).toBeLessThanOrEqual(rel)
}

/** Per-request gaps are kept to the whole µs (docs/metrics.md, "Gaps, packed"): an ITL figure is within half a µs of the file's. */
function closeToUs(actual: number | null | undefined, expected: unknown, label: string): void {
  expect(typeof expected, `${label}: the file's figure`).toBe('number')
  expect(actual, label).not.toBeNull()
  expect(Math.abs((actual as number) - (expected as number)), `${label}: ${actual} vs the file's ${expected}`).toBeLessThanOrEqual(
    0.0005 + 1e-9,
  )
}

/** numpy.percentile's default (linear interpolation between closest ranks). */
function numpyPercentile(values: readonly number[], q: number): number {
  const s = [...values].sort((a, b) => a - b)
  const h = (s.length - 1) * (q / 100)
  const lo = Math.floor(h)
  const hi = Math.min(lo + 1, s.length - 1)
  return (s[lo] as number) + (h - lo) * ((s[hi] as number) - (s[lo] as number))
}
const mean = (v: readonly number[]): number => v.reduce((a, b) => a + b, 0) / v.length
const popStd = (v: readonly number[]): number => Math.sqrt(mean(v.map((x) => (x - mean(v)) ** 2)))

function importAll(name: string, from: 'auto' = 'auto'): RunRecord[] {
  const file = parseRunFile(read(name), join(WILD, name), { from, all: true })
  return file.runs.map((r) => RunRecord.parse(r.record))
}

test('every real file in the wild folder imports, every run of it', () => {
  const names = readdirSync(WILD).filter((n) => /\.jsonl?$/.test(n))
  expect(names.length).toBeGreaterThanOrEqual(8)
  for (const name of names) expect(importAll(name).length, name).toBeGreaterThanOrEqual(1)
})

describe('vLLM, per request', () => {
  const ok = (r: RunRecord): RequestRecord[] => r.requests.filter((q) => q.status === 'ok')

  test('2024-08 (LambdaLabs): the empty "successful" request fails as EMPTY_COMPLETION, and the note says why TTFT differs', () => {
    const name = 'vllm-01-lambdalabs-benchmark_serving-2024-08-detailed.json'
    const f = json(name)
    const [r] = importAll(name) as [RunRecord]
    expect(r.completed).toBe(9)
    expect(r.failures).toEqual({ EMPTY_COMPLETION: 1 })
    const ttfts = ok(r).map((q) => q.ttftMs as number)
    // vLLM averaged the empty request's 0.0 in: the same sum over 10 requests, not 9.
    close(r.metrics.distributions.ttftMs.mean, ((f.mean_ttft_ms as number) * 10) / 9, 'mean ttft × 10 ÷ 9')
    const withZero = [...ttfts, 0]
    close(numpyPercentile(withZero, 50), f.median_ttft_ms, 'median ttft with vLLM’s 0.0')
    close(numpyPercentile(withZero, 99), f.p99_ttft_ms, 'p99 ttft with vLLM’s 0.0')
    close(popStd(withZero), f.std_ttft_ms, 'std ttft with vLLM’s 0.0')
    expect(r.methodology.emptySuccesses).toMatch(
      /1 request\(s\) vLLM counted successful .* servegate records them as failed EMPTY_COMPLETION/,
    )
    expect(r.methodology.emptySuccesses).toMatch(/mean_ttft_ms 51\.81 ms .* over the 9 others is 57\.57 ms/)
    const gaps = ok(r).flatMap((q) => q.itlMs ?? [])
    closeToUs(r.metrics.distributions.itlMs.mean, f.mean_itl_ms, 'mean itl')
    closeToUs(numpyPercentile(gaps, 50), f.median_itl_ms, 'median itl')
    closeToUs(numpyPercentile(gaps, 99), f.p99_itl_ms, 'p99 itl')
    closeToUs(popStd(gaps), f.std_itl_ms, 'std itl')
    close(r.metrics.outputThroughputTokPerS, f.output_throughput, 'output throughput')
  })

  test('2025-03 (aurotripathy): TTFT, ITL, TPOT and throughput agree with the file', () => {
    const name = 'vllm-02-aurotripathy-benchmark_serving-2025-03-detailed.json'
    const f = json(name)
    const [r] = importAll(name) as [RunRecord]
    expect(r.completed).toBe(100)
    const ttfts = ok(r).map((q) => q.ttftMs as number)
    close(r.metrics.distributions.ttftMs.mean, f.mean_ttft_ms, 'mean ttft')
    close(numpyPercentile(ttfts, 50), f.median_ttft_ms, 'median ttft')
    close(numpyPercentile(ttfts, 99), f.p99_ttft_ms, 'p99 ttft')
    close(popStd(ttfts), f.std_ttft_ms, 'std ttft')
    const gaps = ok(r).flatMap((q) => q.itlMs ?? [])
    closeToUs(r.metrics.distributions.itlMs.mean, f.mean_itl_ms, 'mean itl')
    closeToUs(numpyPercentile(gaps, 99), f.p99_itl_ms, 'p99 itl')
    // vLLM's tpot runs to its own latency (the end of the stream), servegate's to the last chunk: 1e-3 apart at most.
    close(r.metrics.distributions.tpotMs.mean, f.mean_tpot_ms, 'mean tpot', 1e-3)
    close(r.metrics.outputThroughputTokPerS, f.output_throughput, 'output throughput')
    expect(r.plan.concurrency).toBe(1)
  })
})

describe('vLLM, summary only', () => {
  test('0.25.1: the figures as written; ITL stddev rescaled by the gap count, not the request count', () => {
    const name = 'vllm-05-er0080-bench-serve-v0.25.1.json'
    const f = json(name)
    const [r] = importAll(name) as [RunRecord]
    const d = r.metrics.distributions
    expect(r.importedFrom?.perRequest).toBe(false)
    close(d.ttftMs.mean, f.mean_ttft_ms, 'mean ttft')
    close(d.ttftMs.p50, f.median_ttft_ms, 'median ttft')
    close(d.ttftMs.p99, f.p99_ttft_ms, 'p99 ttft')
    close(d.ttftMs.stddev, (f.std_ttft_ms as number) * Math.sqrt(8 / 7), 'ttft sample std')
    close(d.tpotMs.mean, f.mean_tpot_ms, 'mean tpot')
    close(d.tpotMs.p99, f.p99_tpot_ms, 'p99 tpot')
    const gaps = (f.total_output_tokens as number) - (f.completed as number)
    expect(d.itlMs.samples).toBe(gaps)
    close(d.itlMs.mean, f.mean_itl_ms, 'mean itl')
    close(d.itlMs.stddev, (f.std_itl_ms as number) * Math.sqrt(gaps / (gaps - 1)), 'itl sample std over 120 gaps')
    close(r.metrics.outputThroughputTokPerS, f.output_throughput, 'output throughput')
    close(r.metrics.requestRateReqPerS, f.request_throughput, 'request throughput')
    expect(r.methodology.failedCount).toBe("vLLM's failed count (0)")
  })

  test('0.25.1, every request failed: imports with nothing in the distributions (its 0.0 placeholders are not times)', () => {
    const [r] = importAll('vllm-06-er0080-bench-serve-v0.25.1-all-failed.json') as [RunRecord]
    expect([r.completed, r.failed, r.plan.requests]).toEqual([0, 8, 8])
    expect(r.metrics.distributions.ttftMs).toMatchObject({ samples: 0, mean: null, p99: null })
    expect(r.metrics.outputThroughputTokPerS).toBeNull()
  })
})

describe('SGLang', () => {
  test('2024-12 (datacrunch): all 7 appended runs import, with their figures and the random range as the plan', () => {
    const name = 'sglang-10-datacrunch-2024-12-online.jsonl'
    const file = lines(name)
    const runs = importAll(name)
    expect(runs).toHaveLength(7)
    for (const [i, r] of runs.entries()) {
      const f = file[i] as Record<string, number>
      close(r.metrics.distributions.ttftMs.p50, f.median_ttft_ms, `line ${i + 1} median ttft`)
      close(r.metrics.distributions.itlMs.p50, f.median_itl_ms, `line ${i + 1} median itl`)
      close(r.metrics.distributions.e2eMs.mean, f.mean_e2e_latency_ms, `line ${i + 1} mean e2e`)
      close(r.metrics.outputThroughputTokPerS, f.output_throughput, `line ${i + 1} output throughput`)
      expect(r.completed).toBe(f.completed)
      expect(r.failed).toBeNull()
      expect(r.methodology.failedCount).toMatch(/^not recorded: SGLang lines without --output-details record no failed count/)
    }
    const first = runs[0] as RunRecord
    // random_input_len 1024 with random_range_ratio 0.0: lengths drawn from [1, 1024], so no single planned size.
    expect(first.plan.workload.promptTokens).toBe(Math.round(152612 / 300))
    expect(first.plan.workload.promptTokensEstimator).toMatch(
      /drawn uniformly from \[1, 1024\] \(random_input_len 1024, random_range_ratio 0\)/,
    )
    expect(first.plan.maxTokens).toBeNull()
    expect(first.methodology.plan).toMatch(/plan\.maxTokens is null: output lengths drawn uniformly from \[1, 1024\]/)
    expect(runs[6]?.plan.workload.promptTokensEstimator).toBe('SGLang total_input_tokens ÷ completed (mean prompt tokens)')
  })

  test('2025-12 (agg_local): every summary figure, engine and model from server_info', () => {
    const name = 'sglang-12-tonyli15-agg_local.jsonl'
    const [f] = lines(name) as [Record<string, number>]
    const [r] = importAll(name) as [RunRecord]
    const d = r.metrics.distributions
    for (const [key, dist] of [
      ['ttft', d.ttftMs],
      ['tpot', d.tpotMs],
      ['itl', d.itlMs],
      ['e2e_latency', d.e2eMs],
    ] as const) {
      close(dist.mean, f[`mean_${key}_ms`], `mean ${key}`)
      close(dist.p50, f[`median_${key}_ms`], `median ${key}`)
      close(dist.p99, f[`p99_${key}_ms`], `p99 ${key}`)
    }
    close(d.ttftMs.stddev, fig(f, 'std_ttft_ms') * Math.sqrt(200 / 199), 'ttft sample std')
    const gaps = fig(f, 'total_output_tokens') - fig(f, 'completed')
    close(d.itlMs.stddev, fig(f, 'std_itl_ms') * Math.sqrt(gaps / (gaps - 1)), 'itl sample std over the gap count')
    close(r.metrics.requestRateReqPerS, fig(f, 'request_throughput'), 'request throughput')
    expect(r.importedFrom?.engine).toBe('sglang 0.5.5.post3')
    expect(r.plan.model).toBe('Qwen/Qwen2.5-3B-Instruct')
    // random_range_ratio 0.0 here too: 52317 input tokens over 200 requests is the [1, 512] mean, not 512.
    expect(r.plan.maxTokens).toBeNull()
    expect(r.plan.workload.promptTokens).toBe(Math.round(52317 / 200))
    expect(r.plan.workload.promptTokensEstimator).toMatch(/\[1, 512\]/)
  })

  test('prefill/decode-disaggregated (pd_1p1d): model and both engine versions from the servers, as the methodology says', () => {
    const name = 'sglang-13-tonyli15-pd_1p1d.jsonl'
    const [f] = lines(name) as [Record<string, number>]
    const [r] = importAll(name) as [RunRecord]
    expect(r.plan.model).toBe('Qwen/Qwen2.5-3B-Instruct')
    expect(r.importedFrom?.engine).toBe('sglang 0.5.5.post3 prefill + 0.5.6 decode')
    expect(r.methodology.plan).toMatch(
      /^plan\.model from server_info\.prefill\[0\]\.served_model_name \(a prefill\/decode-disaggregated router: 1 prefill and 1 decode servers/,
    )
    close(r.metrics.distributions.ttftMs.mean, f.mean_ttft_ms, 'mean ttft')
    close(r.metrics.distributions.ttftMs.p99, f.p99_ttft_ms, 'p99 ttft')
    close(r.metrics.distributions.tpotMs.p50, f.median_tpot_ms, 'median tpot')
    close(r.metrics.distributions.itlMs.p99, f.p99_itl_ms, 'p99 itl')
  })
})

describe('llmperf', () => {
  test('a 2023 summary (anyscale 7b): its figures in ms, its sample std kept as is, the wall clock from its rate', () => {
    const name = 'other-llmperf-summary-anyscale_7b.json'
    const f = json(name) as Record<string, number>
    const [r] = importAll(name) as [RunRecord]
    const d = r.metrics.distributions
    expect(r.importedFrom?.schema).toBe('llmperf.token-benchmark')
    expect([r.completed, r.failed, r.plan.concurrency, r.plan.model]).toEqual([150, 0, 5, 'meta-llama/Llama-2-7b-chat-hf'])
    close(d.ttftMs.mean, fig(f, 'results_ttft_s_mean') * 1000, 'mean ttft')
    close(d.ttftMs.p50, fig(f, 'results_ttft_s_quantiles_p50') * 1000, 'median ttft')
    close(d.ttftMs.p99, fig(f, 'results_ttft_s_quantiles_p99') * 1000, 'p99 ttft')
    close(d.ttftMs.stddev, fig(f, 'results_ttft_s_stddev') * 1000, 'ttft std (pandas, already ddof 1)')
    close(d.ttftMs.min, fig(f, 'results_ttft_s_min') * 1000, 'min ttft')
    close(d.e2eMs.p99, fig(f, 'results_end_to_end_latency_s_quantiles_p99') * 1000, 'p99 e2e')
    close(d.completionTokens.mean, fig(f, 'results_number_output_tokens_mean'), 'mean output tokens')
    close(r.metrics.outputThroughputTokPerS, fig(f, 'results_mean_output_throughput_token_per_s'), 'output throughput')
    close(r.metrics.wallClockMs, (150 / fig(f, 'results_num_completed_requests_per_min')) * 60_000, 'wall clock')
    // llmperf's ITL includes the TTFT: it is neither servegate's itl nor its tpot, and says so.
    expect(d.itlMs.samples).toBe(0)
    expect(d.tpotMs.samples).toBe(0)
    expect(r.methodology.itl).toMatch(/not imported: llmperf's inter_token_latency_s is per request \(ttft \+ Σ gaps\)/)
  })
})
