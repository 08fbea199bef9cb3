import { copyFile, mkdtemp, readFile, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { parseRunText, readRunRecords } from '../record/record-io.ts'
import { RunRecord } from '../schema/run.ts'

/*
 * AIPerf, GuideLLM and llmperf fixtures (fixtures/import/README.md): synthetic numbers in each
 * tool's shape, its summaries computed by its own rules, so servegate's recomputation over the
 * per-request data must agree with the summary the tool wrote beside it.
 */
const FIXTURES = join(import.meta.dirname, '../../fixtures/import')
const AIPERF = join(FIXTURES, 'aiperf-run')
const LLMPERF = join(FIXTURES, 'llmperf-run')
const LLMPERF_STEM = 'Qwen-Qwen3-0.6B_512_8'
const GUIDELLM = join(FIXTURES, 'guidellm-benchmarks.json')

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- the tools' files are read as loose JSON
const readJson = async (path: string): Promise<Record<string, any>> => JSON.parse(await readFile(path, 'utf8'))

function close(actual: number | null | undefined, expected: number, label: string, rel = 1e-9): void {
  expect(actual, label).not.toBeNull()
  const err = Math.abs((actual as number) - expected) / Math.max(Math.abs(expected), 1e-300)
  expect(err, `${label}: ${actual} vs ${expected}`).toBeLessThanOrEqual(rel)
}

let alone = ''
beforeAll(async () => {
  // Each file alone, without its companion: the summary-only (or plan-less) import.
  alone = await mkdtemp(join(tmpdir(), 'servegate-harness-'))
  await copyFile(join(AIPERF, 'profile_export_aiperf.json'), join(alone, 'profile_export_aiperf.json'))
  await copyFile(join(LLMPERF, `${LLMPERF_STEM}_summary.json`), join(alone, `${LLMPERF_STEM}_summary.json`))
})
afterAll(async () => {
  await rm(alone, { recursive: true, force: true })
})

async function one(path: string, from: 'auto' | 'aiperf' | 'guidellm' | 'llmperf' = 'auto'): Promise<RunRecord> {
  const file = await readRunRecords(path, { from })
  return RunRecord.parse(file.runs[0]?.record)
}

describe('AIPerf', () => {
  test('profile_export_aiperf.json with its profile_export.jsonl beside it: per request, warm-up left out, agreeing with the aggregate', async () => {
    const agg = await readJson(join(AIPERF, 'profile_export_aiperf.json'))
    const file = await readRunRecords(join(AIPERF, 'profile_export_aiperf.json'))
    expect(file.format).toBe('aiperf')
    expect(file.companion).toBe(join(AIPERF, 'profile_export.jsonl'))
    const r = RunRecord.parse(file.runs[0]?.record)
    expect(r.importedFrom).toMatchObject({ schema: 'aiperf.profile-export', perRequest: true })
    expect([r.completed, r.failed, r.plan.warmupRequests, r.plan.concurrency, r.plan.model]).toEqual([6, 1, 1, 2, 'Qwen/Qwen3-0.6B'])
    expect(r.failures).toEqual({ HTTP_STATUS: 1 })
    const d = r.metrics.distributions
    close(d.ttftMs.mean, agg.time_to_first_token.avg, 'mean ttft')
    close(d.e2eMs.mean, agg.request_latency.avg, 'mean e2e')
    // AIPerf's inter_token_latency is servegate's tpot: (latency − ttft) ÷ (osl − 1).
    close(d.tpotMs.mean, agg.inter_token_latency.avg, 'mean tpot = AIPerf inter_token_latency')
    close(d.itlMs.mean, agg.inter_chunk_latency.avg, 'pooled itl = AIPerf inter_chunk_latency')
    close(r.metrics.wallClockMs, agg.benchmark_duration.avg * 1000, 'wall clock')
    close(r.metrics.outputThroughputTokPerS, agg.output_token_throughput.avg, 'output throughput')
    expect(r.methodology.warmup).toMatch(/^1 warm-up line\(s\) \(metadata\.benchmark_phase "warmup"\) left out/)
  })

  test('profile_export_aiperf.json alone: summary-only with its figures as written', async () => {
    const agg = await readJson(join(AIPERF, 'profile_export_aiperf.json'))
    const r = await one(join(alone, 'profile_export_aiperf.json'), 'aiperf')
    const d = r.metrics.distributions
    expect(r.importedFrom?.perRequest).toBe(false)
    expect([r.completed, r.failed]).toEqual([6, 1])
    close(d.ttftMs.p99, agg.time_to_first_token.p99, 'p99 ttft')
    close(d.ttftMs.p50, agg.time_to_first_token.p50, 'median ttft')
    close(d.ttftMs.min, agg.time_to_first_token.min, 'min ttft')
    close(d.tpotMs.mean, agg.inter_token_latency.avg, 'mean tpot')
    close(d.ttftMs.stddev, agg.time_to_first_token.std * Math.sqrt(6 / 5), 'ttft std: numpy population → sample')
    expect(d.itlMs.samples).toBe(agg.total_osl.avg - 6)
    expect(r.methodology.failedCount).toBe("AIPerf's error_request_count (1)")
    expect(r.startedAt).toBe('2025-10-07T05:00:07.500Z')
  })

  test('profile_export.jsonl is recognized by --from auto', async () => {
    const r = await one(join(AIPERF, 'profile_export.jsonl'))
    expect(r.importedFrom?.schema).toBe('aiperf.profile-export')
    expect(r.requests.map((q) => q.index)).toEqual([0, 1, 2, 3, 4, 5, 6])
  })
})

describe('GuideLLM', () => {
  test('a two-benchmark report: the last benchmark by default, every one with all, each agreeing with its own summary', async () => {
    const report = await readJson(GUIDELLM)
    const file = await readRunRecords(GUIDELLM, { all: true })
    expect(file.format).toBe('guidellm')
    expect(file.unit).toBe('benchmark')
    expect(file.runs.map((r) => r.position)).toEqual([1, 2])
    for (const [i, entry] of file.runs.entries()) {
      const r = RunRecord.parse(entry.record)
      const m = report.benchmarks[i].metrics
      const d = r.metrics.distributions
      close(d.ttftMs.mean, m.time_to_first_token_ms.successful.mean, `benchmark ${i + 1} mean ttft`)
      // GuideLLM reads percentiles off its CDF: with equal weights that is servegate's nearest rank, so they agree exactly.
      close(d.ttftMs.p50, m.time_to_first_token_ms.successful.median, `benchmark ${i + 1} median ttft`)
      close(d.ttftMs.p99, m.time_to_first_token_ms.successful.percentiles.p99, `benchmark ${i + 1} p99 ttft`)
      close(d.e2eMs.mean, m.request_latency.successful.mean * 1000, `benchmark ${i + 1} mean e2e`)
      close(r.metrics.wallClockMs, report.benchmarks[i].duration * 1000, `benchmark ${i + 1} wall clock`)
    }
    const [sync, concurrent] = file.runs.map((e) => e.record) as [RunRecord, RunRecord]
    expect([sync.plan.concurrency, concurrent.plan.concurrency]).toEqual([1, 3])
    expect([concurrent.completed, concurrent.failed]).toEqual([6, 1])
    expect(concurrent.methodology.import).toMatch(/benchmark 2 of 2\), concurrent: 3 streams/)
    expect((await one(GUIDELLM)).runId).toBe(concurrent.runId)
  })

  test('a sampled report is summary-only, nearest-rank percentiles, ITL from its token-weighted inter_token_latency_ms', async () => {
    const report = await readJson(GUIDELLM)
    const b = { ...report.benchmarks[1], request_samples: { successful: 3, incomplete: 0, errored: 1, total: null } }
    const dir = await mkdtemp(join(tmpdir(), 'servegate-guidellm-'))
    try {
      const path = join(dir, 'benchmarks.json')
      await import('node:fs/promises').then((fs) => fs.writeFile(path, JSON.stringify({ benchmarks: [b] })))
      const r = await one(path, 'guidellm')
      const m = b.metrics
      expect(r.importedFrom?.perRequest).toBe(false)
      expect(r.metrics.percentileMethod).toBe('nearest-rank')
      close(r.metrics.distributions.itlMs.mean, m.inter_token_latency_ms.successful.mean, 'mean itl')
      expect(r.metrics.distributions.itlMs.samples).toBe(m.inter_token_latency_ms.successful.count)
      close(r.metrics.distributions.ttftMs.p99, m.time_to_first_token_ms.successful.percentiles.p99, 'p99 ttft')
      expect(r.metrics.distributions.tpotMs.samples).toBe(0)
      expect(r.methodology.import).toMatch(/kept only a random sample of requests/)
    } finally {
      await rm(dir, { recursive: true, force: true })
    }
  })
})

describe('llmperf', () => {
  test('the summary with its individual responses beside it: per request, agreeing with the summary', async () => {
    const s = await readJson(join(LLMPERF, `${LLMPERF_STEM}_summary.json`))
    const file = await readRunRecords(join(LLMPERF, `${LLMPERF_STEM}_summary.json`))
    expect(file.companion).toBe(join(LLMPERF, `${LLMPERF_STEM}_individual_responses.json`))
    const r = RunRecord.parse(file.runs[0]?.record)
    expect(r.importedFrom?.perRequest).toBe(true)
    expect([r.completed, r.failed, r.plan.concurrency, r.plan.maxTokens]).toEqual([6, 1, 2, 8])
    expect(r.failures).toEqual({ HTTP_RATE_LIMITED: 1 })
    const d = r.metrics.distributions
    close(d.ttftMs.mean, s.results_ttft_s_mean * 1000, 'mean ttft')
    close(d.ttftMs.stddev, s.results_ttft_s_stddev * 1000, 'ttft std: both ddof 1')
    close(d.e2eMs.mean, s.results_end_to_end_latency_s_mean * 1000, 'mean e2e')
    close(r.metrics.outputThroughputTokPerS, s.results_mean_output_throughput_token_per_s, 'output throughput')
  })

  test('the individual responses alone name their limits; the summary alone is summary-only', async () => {
    const individual = await one(join(LLMPERF, `${LLMPERF_STEM}_individual_responses.json`))
    expect(individual.plan.model).toBe('Qwen/Qwen3-0.6B')
    const summary = await one(join(alone, `${LLMPERF_STEM}_summary.json`), 'llmperf')
    expect(summary.importedFrom?.perRequest).toBe(false)
    expect([summary.completed, summary.failed, summary.plan.requests]).toEqual([6, 1, 7])
  })
})

describe('a summary without a failed count records null, never 0', () => {
  test('AIPerf without error_request_count or error_summary', async () => {
    const { error_request_count: _count, error_summary: _summary, ...agg } = await readJson(join(AIPERF, 'profile_export_aiperf.json'))
    const r = RunRecord.parse(parseRunText(JSON.stringify(agg), 'a.json', { from: 'aiperf' }))
    expect([r.completed, r.failed, r.plan.requests]).toEqual([6, null, 6])
    expect(r.methodology.failedCount).toBe('not recorded: the file has neither error_request_count nor error_summary, so failed is null')
  })

  test('a GuideLLM benchmark without request_totals', async () => {
    const report = await readJson(GUIDELLM)
    const benchmarks = report.benchmarks.map((b: Record<string, unknown>) => ({ ...b, request_totals: undefined, request_samples: 5 }))
    const r = RunRecord.parse(parseRunText(JSON.stringify({ ...report, benchmarks }), 'g.json', { from: 'guidellm' }))
    expect([r.importedFrom?.perRequest, r.failed]).toEqual([false, null])
    expect(r.methodology.failedCount).toMatch(/^not recorded: the benchmark has no request_totals/)
  })

  test('an llmperf summary without results_number_errors', async () => {
    const { results_number_errors: _errors, ...s } = await readJson(join(LLMPERF, `${LLMPERF_STEM}_summary.json`))
    const r = RunRecord.parse(parseRunText(JSON.stringify(s), 'l.json', { from: 'llmperf' }))
    expect([r.completed, r.failed]).toEqual([6, null])
    expect(r.methodology.failedCount).toBe('not recorded: the summary has no results_number_errors, so failed is null')
  })
})

describe('a total or a duration the source never recorded is null, never 0', () => {
  test('an AIPerf aggregate without total_isl, total_osl and benchmark_duration: both totals and the wall clock', async () => {
    const { total_isl: _i, total_osl: _o, benchmark_duration: _d, ...agg } = await readJson(join(AIPERF, 'profile_export_aiperf.json'))
    const r = RunRecord.parse(parseRunText(JSON.stringify(agg), 'a.json', { from: 'aiperf' }))
    expect(r.importedFrom?.perRequest).toBe(false)
    expect([r.metrics.totalPromptTokens, r.metrics.totalCompletionTokens, r.metrics.wallClockMs]).toEqual([null, null, null])
    expect(r.methodology.unrecorded).toBe(
      'not recorded by AIPerf, so null (unknown, never 0): totalPromptTokens, totalCompletionTokens, wallClockMs',
    )
    // The distributions keep AIPerf's own summaries, and its throughput its own figure.
    close(r.metrics.distributions.promptTokens.mean, agg.input_sequence_length.avg, 'mean prompt tokens')
    close(r.metrics.outputThroughputTokPerS, agg.output_token_throughput.avg, 'output throughput')
    // With them it records every figure and no note.
    const full = await one(join(alone, 'profile_export_aiperf.json'), 'aiperf')
    expect(full.metrics.totalPromptTokens).toBeGreaterThan(0)
    expect(full.methodology.unrecorded).toBeUndefined()
  })

  test('AIPerf per-request lines alone without their start and end times: no wall clock, so no rate', async () => {
    const lines = (await readFile(join(AIPERF, 'profile_export.jsonl'), 'utf8')).trim().split('\n')
    const untimed = lines.map((l) => {
      const line = JSON.parse(l)
      const { request_start_ns: _s, request_end_ns: _e, ...metadata } = line.metadata
      return JSON.stringify({ ...line, metadata })
    })
    const r = RunRecord.parse(parseRunText(untimed.join('\n'), 'profile_export.jsonl', { from: 'aiperf' }))
    expect(r.importedFrom?.perRequest).toBe(true)
    expect([r.metrics.wallClockMs, r.metrics.outputThroughputTokPerS, r.metrics.requestRateReqPerS]).toEqual([null, null, null])
    // Per request the totals are servegate's own sums of the requests' counts.
    expect(r.metrics.totalPromptTokens).toBeGreaterThan(0)
    expect(r.methodology.unrecorded).toBe('not recorded by AIPerf, so null (unknown, never 0): wallClockMs')
  })

  test('a sampled GuideLLM benchmark without duration, times and token sums', async () => {
    const report = await readJson(GUIDELLM)
    const { duration: _d, start_time: _s, end_time: _e, ...b } = report.benchmarks[1]
    const metrics = Object.fromEntries(
      Object.entries(b.metrics as Record<string, Record<string, Record<string, unknown>>>).map(([name, m]) => {
        const { total_sum: _t, ...successful } = m.successful ?? {}
        return [name, { ...m, successful }]
      }),
    )
    const benchmark = { ...b, metrics, request_samples: { successful: 3, incomplete: 0, errored: 1, total: null } }
    const r = RunRecord.parse(parseRunText(JSON.stringify({ benchmarks: [benchmark] }), 'g.json', { from: 'guidellm' }))
    expect(r.importedFrom?.perRequest).toBe(false)
    const m = r.metrics
    expect([m.totalPromptTokens, m.totalCompletionTokens, m.wallClockMs, m.outputThroughputTokPerS, m.requestRateReqPerS]).toEqual([
      null,
      null,
      null,
      null,
      null,
    ])
    expect(r.methodology.unrecorded).toMatch(/^not recorded by GuideLLM, so null \(unknown, never 0\): /)
  })

  test('a real llmperf summary without its completed-per-minute rate: its test time is unknown, not 0', async () => {
    const wild = join(import.meta.dirname, '../../fixtures/reference/wild/other-llmperf-summary-anyscale_7b.json')
    const { results_num_completed_requests_per_min: _rate, ...s } = await readJson(wild)
    const r = RunRecord.parse(parseRunText(JSON.stringify(s), 'l.json', { from: 'llmperf' }))
    expect([r.metrics.wallClockMs, r.metrics.requestRateReqPerS]).toEqual([null, null])
    // Its end is recorded (timestamp), its start is not: the duration it would be counted back from is unknown.
    expect([r.startedAt, r.finishedAt]).toEqual([null, new Date(s.timestamp * 1000).toISOString()])
    // llmperf's token totals come back exactly from its means × completed.
    expect([r.metrics.totalPromptTokens, r.metrics.totalCompletionTokens]).toEqual([
      550 * 150,
      Math.round(s.results_number_output_tokens_mean * 150),
    ])
    expect(r.methodology.unrecorded).toBe('not recorded by llmperf, so null (unknown, never 0): wallClockMs')
  })
})
