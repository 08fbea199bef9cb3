import { readFile } from 'node:fs/promises'
import { fileURLToPath } from 'node:url'
import { describe, expect, test } from 'vitest'
import { ServegateError } from '../errors.ts'
import { parseRunText } from '../record/record-io.ts'
import { quantizeGap } from '../schema/itl-packed.ts'
import { RunRecord } from '../schema/run.ts'
import { normalizePythonJson } from './result-file.ts'
import { SGLANG_FORMAT_ID } from './sglang.ts'

const FIXTURE = fileURLToPath(new URL('../../fixtures/import/sglang-bench-serving.jsonl', import.meta.url))
const text = await readFile(FIXTURE, 'utf8')
const [oldLine, recentLine] = text
  .trimEnd()
  .split('\n')
  .map((l) => JSON.parse(normalizePythonJson(l)) as Record<string, unknown>) as [
  Record<string, number | null>,
  Record<string, unknown> & { ttfts: number[]; itls: number[][]; input_lens: number[]; output_lens: number[]; errors: string[] },
]
const recentNum = (key: string): number => recentLine[key] as number

function expectRelClose(actual: number | null, expected: number, label: string): void {
  expect(actual, label).not.toBeNull()
  const rel = Math.abs((actual as number) - expected) / Math.max(Math.abs(expected), 1e-300)
  expect(rel, `${label}: ${actual} vs ${expected}`).toBeLessThanOrEqual(1e-12)
}

/** Gaps are kept to the whole microsecond (docs/metrics.md, "Gaps, packed"): an ITL figure is within half a µs of the source's. */
function expectWithinUs(actual: number | null, expected: number, label: string): void {
  expect(actual, label).not.toBeNull()
  expect(Math.abs((actual as number) - expected), `${label}: ${actual} vs ${expected}`).toBeLessThanOrEqual(0.0005 + 1e-9)
}

function importLine(value: unknown, source = 'x.jsonl'): RunRecord {
  return parseRunText(`${JSON.stringify(value)}\n`, source, { from: 'sglang' })
}

function thrown(fn: () => unknown): ServegateError {
  try {
    fn()
  } catch (err) {
    expect(err).toBeInstanceOf(ServegateError)
    return err as ServegateError
  }
  throw new Error('expected a ServegateError')
}

describe('an SGLang bench_serving --output-details line (the last line, by default)', () => {
  const record = parseRunText(text, FIXTURE, { from: 'sglang' })
  const ok = [0, 1, 3, 4]

  test('becomes a valid per-request servegate.run/v1 record', () => {
    expect(RunRecord.parse(record)).toEqual(record)
    expect(record.importedFrom).toEqual({ schema: SGLANG_FORMAT_ID, runId: null, engine: 'sglang 0.5.4', gpu: null, perRequest: true })
    expect(record.runId).toBe('sglang-sglang-line2')
    expect([record.requests.length, record.completed, record.failed]).toEqual([5, 4, 1])
    expect(record.plan).toMatchObject({ api: null, model: 'Qwen/Qwen3-8B', concurrency: 2, requests: 5, maxTokens: 10 })
    expect(record.plan.workload.promptTokens).toBe(1024)
  })

  test('converts every per-request time from seconds to ms exactly', () => {
    for (const i of ok) {
      const r = record.requests[i]
      const itl = recentLine.itls[i] as number[]
      expect(r?.status).toBe('ok')
      expect(r?.ttftMs).toBe((recentLine.ttfts[i] as number) * 1000)
      expect(r?.itlMs).toEqual(itl.map((s) => quantizeGap(s * 1000)))
      expect(r?.e2eMs).toBe(((recentLine.ttfts[i] as number) + itl.reduce((a, b) => a + b, 0)) * 1000)
      expect(r?.completionTokens).toBe(recentLine.output_lens[i])
      expect(r?.completionTokenSource).toBe('usage')
    }
  })

  test('keeps the failed request (HTTP 400) outside the distributions, its 0 ttft not taken as a time', () => {
    const failed = record.requests[2]
    expect(failed?.status).toBe('failed')
    if (failed?.status !== 'failed') return
    expect(failed.error).toMatchObject({ code: 'HTTP_STATUS', httpStatus: 400 })
    expect(failed.error.message).toMatch(/^Bad Request: \{"object":"error","message":"The input \(9216 tokens\)/)
    expect([failed.ttftMs, failed.e2eMs, failed.itlMs, failed.completionTokens]).toEqual([null, null, null, null])
    expect(failed.promptTokens).toBe(1024)
    const d = record.metrics.distributions
    expect(d.ttftMs.samples).toBe(4)
    expect(d.promptTokens.samples).toBe(4)
    expectRelClose(d.ttftMs.mean, recentNum('mean_ttft_ms'), 'mean_ttft_ms')
    expectWithinUs(d.itlMs.mean, recentNum('mean_itl_ms'), "mean_itl_ms (SGLang apportions a multi-token chunk's gap)")
    expect(record.metrics.totalCompletionTokens).toBe(recentLine.total_output_tokens)
  })

  test("e2e ends at the last text chunk, a little before SGLang's own latency (which runs to [DONE])", () => {
    const mean = record.metrics.distributions.e2eMs.mean as number
    expect(mean).toBeLessThan(recentNum('mean_e2e_latency_ms'))
    expect(recentNum('mean_e2e_latency_ms') - mean).toBeLessThan(1)
    expect(record.methodology.e2e).toMatch(/^ttft \+ Σ itl/)
  })
})

describe('a 2024-shaped SGLang line (no per-request lists, bare Infinity request rate)', () => {
  const record = parseRunText(text, FIXTURE, { from: 'sglang', line: 1 })
  const d = record.metrics.distributions

  test('is marked summary-only, with no requests and nothing invented', () => {
    expect(RunRecord.parse(record)).toEqual(record)
    expect(record.importedFrom?.perRequest).toBe(false)
    expect(record.requests).toEqual([])
    expect(d.ttftMs).toEqual({
      samples: 10,
      mean: null,
      stddev: null,
      ci95Low: null,
      ci95High: null,
      min: null,
      p25: null,
      p50: oldLine.median_ttft_ms,
      p75: null,
      p90: null,
      p95: null,
      p99: null,
      max: null,
    })
    expect(d.e2eMs).toMatchObject({ samples: 10, mean: oldLine.mean_e2e_latency_ms, p50: oldLine.median_e2e_latency_ms, stddev: null })
    expect(d.itlMs).toMatchObject({ samples: (oldLine.total_output_tokens as number) - 10, p50: oldLine.median_itl_ms, mean: null })
    expect(d.tpotMs.samples).toBe(0)
    expect(record.metrics.outputThroughputTokPerS).toBe(oldLine.output_throughput)
    expect(record.metrics.requestRateReqPerS).toBeNull()
    expect(record.plan).toMatchObject({ concurrency: 10, requests: 10, maxTokens: 32, model: 'unknown' })
    expect(record.methodology.import).toMatch(/every request released at once \(request_rate inf\)/)
    expect(record.methodology.plan).toMatch(/pass --model/)
  })

  test('takes the model from the caller when SGLang names none', () => {
    expect(parseRunText(text, FIXTURE, { from: 'sglang', line: 1, model: 'Qwen/Qwen3-8B' }).plan.model).toBe('Qwen/Qwen3-8B')
  })
})

describe('key spellings across SGLang versions', () => {
  const canonical = importLine(recentLine)

  test("metrics.py's __dict__ spelling with nested details imports to the same record", () => {
    const {
      total_input_tokens,
      total_output_tokens,
      total_output_tokens_retokenized,
      input_lens,
      output_lens,
      ttfts,
      itls,
      generated_texts,
      errors,
      ...rest
    } = recentLine
    const variant = {
      ...rest,
      total_input: total_input_tokens,
      total_output: total_output_tokens,
      total_output_retokenized: total_output_tokens_retokenized,
      details: { input_lens, output_lens, ttfts, itls, generated_texts, errors },
    }
    const r = importLine(variant)
    expect(r.requests).toEqual(canonical.requests)
    expect(r.metrics).toEqual(canonical.metrics)
    expect(r.methodology.import).toMatch(
      'key spellings mapped: total_input → total_input_tokens, total_output → total_output_tokens, ' +
        'total_output_retokenized → total_output_tokens_retokenized, details.* → top level',
    )
  })

  test('vLLM-style *_e2el_ms keys read as the e2e latency', () => {
    const renamed = Object.fromEntries(Object.entries(oldLine).map(([k, v]) => [k.replace(/_e2e_latency_ms$/, '_e2el_ms'), v]))
    const r = importLine(renamed)
    expect(r.metrics.distributions.e2eMs).toMatchObject({ mean: oldLine.mean_e2e_latency_ms, p50: oldLine.median_e2e_latency_ms })
    expect(r.methodology.import).toMatch(/\*_e2el_ms → \*_e2e_latency_ms/)
  })

  test('a summary line of a recent version fills p90, p95 and p99', () => {
    const { input_lens: _a, output_lens: _b, ttfts: _c, itls: _d, generated_texts: _e, errors: _f, ...summary } = recentLine
    const r = importLine(summary)
    expect(r.importedFrom?.perRequest).toBe(false)
    expect(r.metrics.distributions.ttftMs).toMatchObject({
      samples: 4,
      p90: recentLine.p90_ttft_ms,
      p95: recentLine.p95_ttft_ms,
      p99: recentLine.p99_ttft_ms,
    })
    expectRelClose(r.metrics.distributions.ttftMs.stddev, recentNum('std_ttft_ms') * Math.sqrt(4 / 3), 'std → sample sd')
    expect(r.metrics.completionTokenSources).toEqual({ usage: 4, 'client-count': 0 })
  })

  test('an OpenAI backend records its output lengths as client-count and its api', () => {
    const r = importLine({ ...recentLine, backend: 'sglang-oai-chat' })
    expect(r.plan.api).toBe('chat')
    expect(r.requests[0]?.completionTokenSource).toBe('client-count')
  })
})

describe('bad SGLang input', () => {
  test('a line that is not JSON is named by its number', () => {
    const e = thrown(() => parseRunText(`${text}{"backend": "sglang", oops}\n`, 'runs.jsonl', { from: 'sglang' }))
    expect(e.code).toBe('FILE_INVALID')
    expect(e.message).toMatch(/^runs\.jsonl: line 3 is not JSON \(.+\); pass the JSONL that sglang\.bench_serving --output-file writes$/)
  })

  test('a missing field is named with the line', () => {
    const { duration: _d, ...noDuration } = oldLine
    const e = thrown(() => parseRunText(`${JSON.stringify(recentLine)}\n${JSON.stringify(noDuration)}\n`, 'runs.jsonl', { from: 'sglang' }))
    expect(e.message).toMatch(
      new RegExp(
        '^runs\\.jsonl line 2: field "duration" is missing; ' +
          'pass a line of the JSONL that `python -m sglang\\.bench_serving --output-file` appends',
      ),
    )
  })

  test('a --line with no run names the lines there are', () => {
    const e = thrown(() => parseRunText(text, 'runs.jsonl', { from: 'sglang', line: 5 }))
    expect(e.code).toBe('CONFIG_INVALID')
    expect(e.message).toBe('--line 5: runs.jsonl has no run on that line (its runs are on lines 1, 2); pass one of those line numbers')
  })

  test('a vLLM result given as SGLang says so', () => {
    const vllm = {
      date: '20260112-141503',
      backend: 'openai',
      model_id: 'm',
      num_prompts: 1,
      duration: 1,
      completed: 1,
      total_input_tokens: 1,
      total_output_tokens: 1,
      mean_ttft_ms: 1,
    }
    expect(thrown(() => importLine(vllm)).message).toMatch(
      /^x\.jsonl: field "total_output_tokens_retokenized" is missing and the keys are vLLM's .*; pass --from vllm$/,
    )
  })

  test('per-request lists must come together and agree with completed', () => {
    const { itls: _i, ...noItls } = recentLine
    expect(thrown(() => importLine(noItls)).message).toMatch(/^x\.jsonl: field "itls" is missing; an --output-details line holds/)
    expect(thrown(() => importLine({ ...recentLine, completed: 5 })).message).toMatch(
      /^x\.jsonl: field "completed" is 5 but the per-request lists hold 4/,
    )
  })
})
