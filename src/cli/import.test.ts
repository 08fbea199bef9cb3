import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { RunRecord } from '../schema/run.ts'
import { cli } from '../../fixtures/cli.ts'

const fixture = (name: string): string => fileURLToPath(new URL(`../../fixtures/${name}`, import.meta.url))
const VLLM_DETAILED = fixture('import/vllm-save-detailed.json')
const VLLM_SUMMARY = fixture('import/vllm-save-result.json')
const SGLANG = fixture('import/sglang-bench-serving.jsonl')
const ANVIL = fixture('reference/anvil-serving-run-rtx5090.json')

async function readRecord(path: string): Promise<RunRecord> {
  return RunRecord.parse(JSON.parse(await readFile(path, 'utf8')))
}

let dir = ''
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'servegate-import-'))
})
afterAll(async () => {
  await rm(dir, { recursive: true, force: true })
})

describe('servegate import', () => {
  test('a vLLM --save-detailed file: one line, a valid record, and summarize recomputes the same figures', async () => {
    const out = join(dir, 'nested', 'vllm.json')
    const r = await cli(['import', VLLM_DETAILED, '--from', 'vllm', '--out', out])
    expect(r.stderr).toBe('')
    expect(r.code).toBe(0)
    expect(r.stdout).toBe(`imported vllm.save-result from ${VLLM_DETAILED}: per-request: 6 requests, 5 ok, 1 failed; wrote ${out}\n`)
    const record = await readRecord(out)
    expect(record.importedFrom?.perRequest).toBe(true)

    const s = await cli(['summarize', out, '--json'])
    expect(s.code).toBe(0)
    const { metrics } = JSON.parse(s.stdout) as { metrics: Record<string, unknown> }
    expect(metrics.ttftMs).toEqual(record.metrics.distributions.ttftMs)
    expect(metrics.e2eMs).toEqual(record.metrics.distributions.e2eMs)
  })

  test('a vLLM summary file: marked summary-only, and summarize shows it as such', async () => {
    const out = join(dir, 'vllm-summary.json')
    const r = await cli(['import', VLLM_SUMMARY, '--from', 'vllm', '--out', out])
    expect(r.code).toBe(0)
    expect(r.stdout).toBe(
      `imported vllm.save-result from ${VLLM_SUMMARY}: summary-only (no per-request data; 8 completed, 0 failed); wrote ${out}\n`,
    )
    const record = await readRecord(out)
    expect(record.requests).toEqual([])

    const table = await cli(['summarize', out])
    expect(table.code).toBe(0)
    expect(table.stdout).toMatch(/^summary-only import from vllm\.save-result/)
    expect(table.stdout).toMatch(/^ttft ms\s+8\s/m)
    const json = await cli(['summarize', out, '--json'])
    const { metrics } = JSON.parse(json.stdout) as { metrics: Record<string, { p25: number | null; p50: number | null }> }
    expect(metrics.ttftMs?.p25).toBeNull()
    expect(metrics.ttftMs?.p50).toBe(record.metrics.distributions.ttftMs.p50)
  })

  test('SGLang JSONL: the last line by default, another with --line', async () => {
    const last = join(dir, 'sglang-last.json')
    const first = join(dir, 'sglang-first.json')
    const r2 = await cli(['import', SGLANG, '--from', 'sglang', '--out', last])
    expect(r2.stdout).toBe(
      `imported sglang.bench-serving from ${SGLANG} line 2 (the last of 2 runs; --line N picks another, --all imports each): ` +
        `per-request: 5 requests, 4 ok, 1 failed; wrote ${last}\n`,
    )
    const r1 = await cli(['import', SGLANG, '--from', 'sglang', '--line', '1', '--model', 'Qwen/Qwen3-8B', '--out', first])
    expect(r1.stdout).toBe(
      `imported sglang.bench-serving from ${SGLANG} line 1 (of 2 runs; --line N picks another, --all imports each): ` +
        `summary-only (no per-request data; 10 completed, failed unknown); wrote ${first}\n`,
    )
    expect((await readRecord(first)).plan.model).toBe('Qwen/Qwen3-8B')
    expect((await readRecord(first)).failed).toBeNull()
    expect((await readRecord(last)).failures).toEqual({ HTTP_STATUS: 1 })
  })

  test('--from auto recognizes each format, anvil included', async () => {
    for (const [file, schema] of [
      [VLLM_DETAILED, 'vllm.save-result'],
      [VLLM_SUMMARY, 'vllm.save-result'],
      [SGLANG, 'sglang.bench-serving'],
      [ANVIL, 'anvil-serving.benchmark/v1'],
    ] as const) {
      const out = join(dir, 'auto.json')
      const r = await cli(['import', file, '--from', 'auto', '--out', out])
      expect(r.code, file).toBe(0)
      expect((await readRecord(out)).importedFrom?.schema).toBe(schema)
    }
    const anvil = await cli(['import', ANVIL, '--from', 'anvil', '--out', join(dir, 'anvil.json')])
    expect(anvil.stdout).toMatch(/: per-request: 3 requests, 3 ok, 0 failed;/)
  })
})

describe('servegate summarize reads vLLM and SGLang files directly', () => {
  test.each([
    [VLLM_DETAILED, 5],
    [VLLM_SUMMARY, 8],
    [SGLANG, 4],
  ])('%s', async (file, samples) => {
    const r = await cli(['summarize', file, '--json'])
    expect(r.stderr).toBe('')
    const { metrics } = JSON.parse(r.stdout) as { metrics: Record<string, { samples: number }> }
    expect(metrics.ttftMs?.samples).toBe(samples)
  })

  test('a source that records no failed count reads "failed unknown", never "0 failed"', async () => {
    const wild = fileURLToPath(new URL('../../fixtures/reference/wild/sglang-10-datacrunch-2024-12-online.jsonl', import.meta.url))
    const r = await cli(['summarize', wild])
    expect(r.stderr).toBe('')
    expect(r.stdout).toMatch(/ requests: \d+ ok, failed unknown · /)
    expect(r.stdout).not.toMatch(/ 0 failed/)
  })

  test('a wall clock the source never recorded reads "unknown", never 0 s, in a record 0.1.0 wrote as 0', async () => {
    const stored = fixture('records/aiperf-summary-only-0.1.0.json')
    const r = await cli(['summarize', stored])
    expect(r.stderr).toBe('')
    expect(r.stdout).toMatch(/^7 requests: 6 ok, 1 failed · wall clock unknown · output 104.8 tok\/s · /m)
    expect(r.stdout).not.toMatch(/wall clock 0/)
  })
})

describe('bad import input gets one line', () => {
  let notJsonl = ''
  beforeAll(async () => {
    notJsonl = join(dir, 'broken.jsonl')
    await writeFile(notJsonl, `${(await readFile(SGLANG, 'utf8')).trimEnd()}\n{"backend": oops\n`)
  })

  test.each([
    [
      ['import', VLLM_DETAILED, '--out', 'x.json'],
      2,
      /^servegate: --from is required; pass --from with one of auto, vllm, sglang, anvil, aiperf, guidellm, llmperf\n$/,
    ],
    [
      ['import', VLLM_DETAILED, '--from', 'tgi', '--out', 'x.json'],
      2,
      /^servegate: --from: "tgi" is not valid; pass one of auto, vllm, sglang, anvil, aiperf, guidellm, llmperf\n$/,
    ],
    [
      ['import', VLLM_DETAILED, '--from', 'vllm'],
      2,
      /^servegate: --out is required; pass --out FILE, the servegate\.run\/v1 record to write\n$/,
    ],
    [
      ['import', SGLANG, '--from', 'sglang', '--line', 'two', '--out', 'x.json'],
      2,
      /^servegate: --line: "two" is not valid; pass an integer ≥ 1\n$/,
    ],
    [
      ['import', SGLANG, '--from', 'sglang', '--line', '7', '--out', 'x.json'],
      2,
      /^servegate: --line 7: .*sglang-bench-serving\.jsonl has no run on that line \(its runs are on lines 1, 2\); pass one of those line numbers\n$/,
    ],
    [['import', '--from', 'vllm', '--out', 'x.json'], 2, /^servegate: import takes one results file, got 0;/],
    [
      ['import', VLLM_DETAILED, '--from', 'vllm', '--out', 'x.json', '--bogus'],
      2,
      /^servegate: unknown flag --bogus; see servegate import --help\n$/,
    ],
    [
      ['import', SGLANG, '--from', 'vllm', '--out', 'x.json'],
      1,
      /^servegate: .*sglang-bench-serving\.jsonl line 2: field "model_id" is missing and the keys are SGLang's .*; pass --from sglang\n$/,
    ],
    [
      ['import', VLLM_SUMMARY, '--from', 'anvil', '--out', 'x.json'],
      1,
      /^servegate: .*vllm-save-result\.json: field "schema" is undefined; expected "anvil-serving\.benchmark\/v1" for --from anvil\n$/,
    ],
    [
      ['import', '/nonexistent/r.json', '--from', 'vllm', '--out', 'x.json'],
      1,
      /^servegate: cannot read \/nonexistent\/r\.json \(no such file\);/,
    ],
  ])('%j exits %i', async (argv, code, message) => {
    const r = await cli(argv)
    expect(r.code).toBe(code)
    expect(r.stderr).toMatch(message)
    expect(r.stderr.trim().split('\n')).toHaveLength(1)
    expect(r.stdout).toBe('')
  })

  test('a JSONL line that is not JSON is named by its number', async () => {
    const r = await cli(['import', notJsonl, '--from', 'sglang', '--out', join(dir, 'x.json')])
    expect(r.code).toBe(1)
    expect(r.stderr).toMatch(
      /^servegate: .*broken\.jsonl: line 3 is not JSON \(.+\); pass the JSONL that sglang\.bench_serving --output-file writes\n$/,
    )
  })

  test('--all writes one record per run of an appended file and names the runs; without it the line and count are said', async () => {
    const wild = fileURLToPath(new URL('../../fixtures/reference/wild/sglang-10-datacrunch-2024-12-online.jsonl', import.meta.url))
    const out = join(dir, 'all')
    const r = await cli(['import', wild, '--from', 'auto', '--all', '--out', out, '--model', 'meta-llama/Llama-3.3-70B-Instruct'])
    expect(r.stderr).toBe('')
    const rows = r.stdout.trimEnd().split('\n')
    expect(rows[0]).toBe(`${wild} holds 7 runs; no run is marked warm-up (the file does not say which, if any, were)`)
    expect(rows).toHaveLength(8)
    expect(rows[7]).toBe(
      `  line 7: sglang.bench-serving, summary-only (no per-request data; 2400 completed, failed unknown); ` +
        `wrote ${join(out, 'sglang-10-datacrunch-2024-12-online-line7.json')}`,
    )
    const line3 = await readRecord(join(out, 'sglang-10-datacrunch-2024-12-online-line3.json'))
    expect([line3.completed, line3.plan.model]).toEqual([1200, 'meta-llama/Llama-3.3-70B-Instruct'])
    const one = await cli(['import', wild, '--from', 'sglang', '--out', join(dir, 'one.json')])
    expect(one.stdout).toMatch(/ line 7 \(the last of 7 runs; --line N picks another, --all imports each\): summary-only/)
    const both = await cli(['import', wild, '--from', 'sglang', '--all', '--line', '2', '--out', out])
    expect(both.stderr).toMatch(/--line and --all do not go together/)
  })

  test('a tagged warm-up line is marked in the output and in its record', async () => {
    const lines = (await readFile(SGLANG, 'utf8')).trimEnd().split('\n')
    const tagged = join(dir, 'warm.jsonl')
    await writeFile(tagged, `${lines[0]?.replace('{', '{"tag": "warmup", ')}\n${lines[1]}\n`)
    const r = await cli(['import', tagged, '--from', 'sglang', '--all', '--out', join(dir, 'warm')])
    expect(r.stdout).toMatch(/warm-up: line 1 \(marked by its tag or label\)/)
    expect(r.stdout).toMatch(/^ {2}line 1 \(warm-up\): /m)
    expect((await readRecord(join(dir, 'warm', 'warm-line1.json'))).methodology.warmupRun).toMatch(/marked warm-up/)
  })

  test('--from auto on an unknown shape names what it looked for, the keys the file has, and the fix', async () => {
    const odd = join(dir, 'odd.json')
    await writeFile(odd, JSON.stringify({ results: [], model: 'x', tokens_per_second: 3 }))
    const r = await cli(['import', odd, '--from', 'auto', '--out', join(dir, 'x.json')])
    expect(r.code).toBe(1)
    expect(r.stderr).toMatch(/not a format servegate recognizes: it looked for a "schema" field .* a GuideLLM "benchmarks" array/)
    expect(r.stderr).toMatch(
      /but the file holds \{ results, model, tokens_per_second \}; pass a servegate\.run\/v1 .* or name the format with --from/,
    )
  })

  test.each([
    ['aiperf', 'aiperf-run/profile_export_aiperf.json', 'aiperf.profile-export', 'per-request: 7 requests, 6 ok, 1 failed'],
    ['guidellm', 'guidellm-benchmarks.json', 'guidellm.benchmarks', 'per-request: 7 requests, 6 ok, 1 failed'],
    ['llmperf', 'llmperf-run/Qwen-Qwen3-0.6B_512_8_summary.json', 'llmperf.token-benchmark', 'per-request: 7 requests, 6 ok, 1 failed'],
  ])('--from %s and auto import %s', async (from, name, schema, shape) => {
    for (const f of [from, 'auto']) {
      const out = join(dir, `${from}-${f}.json`)
      const r = await cli(['import', fixture(`import/${name}`), '--from', f, '--out', out])
      expect(r.stderr).toBe('')
      expect(r.stdout).toContain(shape)
      expect((await readRecord(out)).importedFrom?.schema).toBe(schema)
    }
  })

  test('--help prints the formats', async () => {
    const r = await cli(['import', '--help'])
    expect(r.code).toBe(0)
    expect(r.stdout).toMatch(/--from FORMAT\s+vllm/)
  })
})
