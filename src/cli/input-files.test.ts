/**
 * `--dataset` and `--trace` are read as the cell will read them before anything starts: a file
 * that cannot be read as one is a usage error (exit 2, docs/cli.md), never a failure found after
 * an engine was launched or the first probe ran.
 */
import { readdir, readFile, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { describe, expect } from 'vitest'
import { test } from '../../fixtures/test-context.ts'

const FAKES = fileURLToPath(new URL('../../fixtures/fakes/', import.meta.url))

test.override('simOptions', { model: 'm', decodeTokPerS: 2000, prefillTokPerS: 50_000 })

const BAD_FILES: Array<[string, string, RegExp]> = [
  ['--dataset', 'not json\n', /^servegate: --dataset: .*bad\.jsonl:1: not valid JSON \(.*\); write one JSON object per line/],
  ['--dataset', '{"prompt": "1 + 1?", "answer": 2}\n', /^servegate: --dataset: .*bad\.jsonl:1: missing field `scorer`; add it: /],
  ['--dataset', '\n\n', /^servegate: --dataset: .*bad\.jsonl: the dataset has no rows; add one JSON object per line\n$/],
  [
    '--dataset',
    '{"prompt": "What does it show?", "answer": "A", "scorer": "exact", "images": ["missing.png"]}\n',
    /^servegate: --dataset: .*bad\.jsonl:1: field `images\[0\]` "missing\.png" cannot be read/,
  ],
  [
    '--trace',
    '{"timestamp": "x", "input_length": 8, "output_length": 2}\n',
    /^servegate: --trace: .*bad\.jsonl:1: field `timestamp` is "x"; set it to a number ≥ 0\n$/,
  ],
]

describe('a malformed --dataset or --trace exits 2 before anything starts', () => {
  test.for(BAD_FILES)(
    'run %s %j: exit 2 naming the flag and the line; nothing is written',
    async ([flag, content, message], { cli, testDir }) => {
      const file = join(testDir, 'bad.jsonl')
      await writeFile(file, content)
      // --requests given, so a trace is not read for its row count: it is read anyway.
      const r = await cli([
        'run',
        '--base-url',
        'http://127.0.0.1:9',
        '--model',
        'm',
        '--requests',
        '2',
        '--out',
        join(testDir, 'run.json'),
        flag,
        file,
      ])
      expect(r.stderr).toMatch(message)
      expect(r.stderr.trim().split('\n')).toHaveLength(1)
      expect(r.code).toBe(2)
      expect(await readdir(testDir)).toEqual(['bad.jsonl'])
    },
  )

  test('run --engine with a malformed dataset: exit 2 and no engine is launched', async ({ cli, testDir }) => {
    const [dataset, pids, config] = ['bad.jsonl', 'pids.txt', 'engine.json'].map((f) => join(testDir, f)) as [string, string, string]
    await writeFile(dataset, 'not json\n')
    await writeFile(
      config,
      JSON.stringify({ kind: 'vllm', executable: join(FAKES, 'vllm'), model: { id: 'fake/m' }, env: { FAKE_ENGINE_PIDFILE: pids } }),
    )
    const r = await cli(['run', '--engine', config, '--dataset', dataset, '--out', join(testDir, 'run.json')])
    expect(r.stderr).toMatch(/^servegate: --dataset: .*bad\.jsonl:1: not valid JSON/)
    expect(r.code).toBe(2)
    expect(await readFile(pids, 'utf8').catch(() => '')).toBe('')
  })

  test('capacity with a malformed dataset: exit 2 before the first probe', async ({ cli, simEngine, testDir }) => {
    const dataset = join(testDir, 'bad.jsonl')
    await writeFile(dataset, '{"prompt": "1 + 1?", "answer": 2}\n')
    const out = join(testDir, 'capacity.json')
    const r = await cli([
      'capacity',
      '--base-url',
      simEngine.url,
      '--model',
      'm',
      '--slo',
      'ttft=5000',
      '--start',
      '2',
      '--dataset',
      dataset,
      '--out',
      out,
    ])
    expect(r.stderr).toMatch(/^servegate: --dataset: .*bad\.jsonl:1: missing field `scorer`/)
    expect(r.code).toBe(2)
    expect(await readdir(testDir)).toEqual(['bad.jsonl'])
  })
})

describe("what the cell and the engine read besides the flags' own files is read before anything starts", () => {
  const FIXTURES = fileURLToPath(new URL('../../fixtures/', import.meta.url))
  test.for<[string, string[], RegExp]>([
    [
      'a trace shorter than --requests',
      ['--trace', join(FIXTURES, 'traces/mooncake-blocks.jsonl'), '--requests', '500'],
      /^servegate: cell: requests: 500 but the trace .*mooncake-blocks\.jsonl has \d+ rows; pass requests ≤ \d+/,
    ],
    [
      'conversations shorter than --turns',
      [
        '--workload',
        'conversation',
        '--sessions',
        '2',
        '--turns',
        '9',
        '--conversations',
        join(FIXTURES, 'conversations/openai-messages.jsonl'),
      ],
      /^servegate: cell\.workload\.conversations: .*openai-messages\.jsonl: no conversation has 9 user turns/,
    ],
    [
      'dataset images over the completions API',
      ['--api', 'completions', '--dataset', join(FIXTURES, 'datasets/charts.jsonl')],
      /^servegate: cell\.api: the rows of .*charts\.jsonl have images, which need the chat API/,
    ],
  ])('run with %s: exit 2, nothing sent or written', async ([, flags, message], { cli, testDir }) => {
    const r = await cli(['run', '--base-url', 'http://127.0.0.1:9', '--model', 'm', '--out', join(testDir, 'run.json'), ...flags])
    expect(r.stderr).toMatch(message)
    expect(r.stderr.trim().split('\n')).toHaveLength(1)
    expect(r.code).toBe(2)
    expect(await readdir(testDir)).toEqual([])
  })

  test('run --engine whose trtllm-serve options file is missing: exit 2 and no engine is launched', async ({ cli, testDir }) => {
    const [pids, config] = ['pids.txt', 'engine.json'].map((f) => join(testDir, f)) as [string, string]
    const options = join(testDir, 'nowhere', 'extra.yaml')
    await writeFile(
      config,
      JSON.stringify({
        kind: 'trtllm',
        executable: join(FAKES, 'trtllm-serve'),
        model: { id: 'fake/m' },
        extraArgs: ['--config', options],
        env: { FAKE_ENGINE_PIDFILE: pids },
      }),
    )
    const r = await cli(['run', '--engine', config, '--out', join(testDir, 'run.json')])
    expect(r.stderr).toMatch(
      /^servegate: --engine .*engine\.json: engine\.extraArgs: the trtllm-serve options file .*extra\.yaml cannot be read \(ENOENT: no such file .*\); fix the path\n$/,
    )
    expect(r.code).toBe(2)
    expect(await readFile(pids, 'utf8').catch(() => '')).toBe('')
  })
})

describe('a negative number is a value', () => {
  test.for<[string[], string]>([
    [['--requests', '-1'], '--requests: "-1" is not valid; pass an integer from 1 to 1000000'],
    [['--concurrency', '-3'], '--concurrency: "-3" is not valid; pass an integer from 1 to 4096'],
    [['--temperature', '-1'], '--temperature: "-1" is not valid; pass a number from 0 to 2'],
    [['--top-p', '-0.5'], '--top-p: "-0.5" is not valid; pass a number > 0 and ≤ 1'],
    [['--rate', '-2'], '--rate: "-2" is not valid; pass a number > 0 and ≤ 100000'],
  ])('run %j gets the bound, not "needs a value", and exit 2', async ([flags, message], { cli }) => {
    const r = await cli(['run', '--base-url', 'http://127.0.0.1:9', '--model', 'm', ...flags])
    expect(r.stderr).toBe(`servegate: ${message}\n`)
    expect(r.code).toBe(2)
  })

  test.for<[string[], string]>([
    [['--top-p', '7'], '--top-p: "7" is not valid; pass a number > 0 and ≤ 1'],
    [['--rate', '0'], '--rate: "0" is not valid; pass a number > 0 and ≤ 100000'],
    [['--rate', '1', '--burstiness', '0'], '--burstiness: "0" is not valid; pass a number > 0 and ≤ 1000'],
  ])('run %j: an exclusive bound prints as > 0, never as the smallest double', async ([flags, message], { cli }) => {
    const r = await cli(['run', '--base-url', 'http://127.0.0.1:9', '--model', 'm', ...flags])
    expect(r.stderr).toBe(`servegate: ${message}\n`)
    expect(r.code).toBe(2)
  })

  test('capacity --confidence 0.5 says > 0.5', async ({ cli }) => {
    const r = await cli([
      'capacity',
      '--base-url',
      'http://127.0.0.1:9',
      '--model',
      'm',
      '--slo',
      'ttft=5',
      '--start',
      '1',
      '--confidence',
      '0.5',
    ])
    expect(r.stderr).toBe('servegate: --confidence: "0.5" is not valid; pass a number > 0.5 and ≤ 0.999999\n')
    expect(r.code).toBe(2)
  })
})
