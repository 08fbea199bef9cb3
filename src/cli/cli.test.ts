import { alive, treePids } from '../../fixtures/processes.ts'
import { readFile, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { execa } from 'execa'
import { describe, expect } from 'vitest'
import { RunRecord } from '../schema/run.ts'
import { test } from '../../fixtures/test-context.ts'

const BIN = fileURLToPath(new URL('../../bin/servegate.js', import.meta.url))
const REFERENCE = fileURLToPath(new URL('../../fixtures/reference/anvil-serving-run-rtx5090.json', import.meta.url))

test.override('simOptions', { model: 'm', decodeTokPerS: 500, prefillTokPerS: 50_000 })

describe('servegate run', () => {
  test('runs a cell, prints the summary table and writes a valid run record', async ({ cli, simEngine, tmpDir }) => {
    const out = join(tmpDir, 'run.json')
    const r = await cli([
      'run',
      '--base-url',
      simEngine.url,
      '--model',
      'm',
      '--concurrency',
      '2',
      '--requests',
      '6',
      '--max-tokens',
      '8',
      '--prompt-tokens',
      '32',
      '--out',
      out,
    ])
    expect(r.stderr).toBe('')
    expect(r.code).toBe(0)
    expect(r.stdout).toMatch(/6 requests: 6 ok, 0 failed/)
    expect(r.stdout).toMatch(/^ttft ms\s+6\s/m)
    expect(r.stdout).toMatch(/p99 is descriptive only below 100 samples/)
    const record = RunRecord.parse(JSON.parse(await readFile(out, 'utf8')))
    expect(record.completed).toBe(6)

    const s = await cli(['summarize', out, '--json'])
    expect(s.code).toBe(0)
    const summarized = JSON.parse(s.stdout) as { metrics: Record<string, unknown> }
    expect(summarized.metrics.ttftMs).toEqual(record.metrics.distributions.ttftMs)
  })

  test.for<[string[], RegExp]>([
    [
      ['run', '--model', 'm'],
      /^servegate: --base-url is required; pass e\.g\. --base-url http:\/\/127\.0\.0\.1:8000 \(or --engine FILE to launch an engine\)\n$/,
    ],
    [['run', '--base-url', 'http://127.0.0.1:1', '--engine', 'e.json'], /^servegate: --base-url and --engine are exclusive/],
    [
      ['run', '--engine', '/nonexistent/engine.json'],
      /^servegate: --engine: cannot read \/nonexistent\/engine\.json; pass the path of a JSON engine config\n$/,
    ],
    [['run', '--base-url', 'http://127.0.0.1:1'], /^servegate: --model is required/],
    [
      ['run', '--base-url', 'http://127.0.0.1:1', '--model', 'm', '--concurrency', 'four'],
      /^servegate: --concurrency: "four" is not valid; pass an integer from 1 to 4096\n$/,
    ],
    [['run', '--bogus'], /^servegate: unknown flag --bogus; see servegate run --help\n$/],
    [['run', '--base-url'], /^servegate: --base-url needs a value/],
    [
      ['run', '--base-url', 'http://127.0.0.1:1', '--model', 'm', '--api', 'grpc'],
      /^servegate: --api: "grpc" is not valid; pass chat or completions\n$/,
    ],
    [['frobnicate'], /^servegate: unknown command "frobnicate"; run servegate --help\n$/],
    [
      ['run', '--base-url', 'http://127.0.0.1:1', '--model', 'm', '--workload', 'chatty'],
      /^servegate: --workload: "chatty" is not valid; pass one of synthetic-summary, synthetic-repeated-code, shared-prefix, dataset, conversation\n$/,
    ],
    [
      ['run', '--base-url', 'http://127.0.0.1:1', '--model', 'm', '--prefix-cache', 'shared'],
      /^servegate: --prefix-cache: "shared" is not valid; pass unique or shared:N \(N shared prefix tokens\)\n$/,
    ],
    [
      ['run', '--base-url', 'http://127.0.0.1:1', '--model', 'm', '--temperature', '3'],
      /^servegate: --temperature: "3" is not valid; pass a number from 0 to 2\n$/,
    ],
    [
      ['run', '--base-url', 'http://127.0.0.1:1', '--model', 'm', '--thinking', 'maybe'],
      /^servegate: --thinking: "maybe" is not valid; pass one of on, off\n$/,
    ],
    [
      ['run', '--base-url', 'http://127.0.0.1:1', '--model', 'm', '--output-control', 'exact'],
      /^servegate: --output-control: "exact" is not valid; pass one of none, observe, strict\n$/,
    ],
  ])('bad input %j gets one line naming the problem and exit 2', async ([argv, message], { cli }) => {
    const r = await cli(argv)
    expect(r.code).toBe(2)
    expect(r.stderr).toMatch(message)
    expect(r.stderr.trim().split('\n')).toHaveLength(1)
  })

  test('an unreachable endpoint gets one line and exit 1', async ({ cli }) => {
    const r = await cli(['run', '--base-url', 'http://127.0.0.1:9', '--model', 'm'])
    expect(r.code).toBe(1)
    expect(r.stderr).toBe('servegate: cannot reach http://127.0.0.1:9 (connection refused); start the engine there or fix --base-url\n')
  })
})

describe('servegate run with workload flags', () => {
  test('canaries, shared prefix, observed output control and sampling reach the record', async ({ cli, simEngine, tmpDir }) => {
    const out = join(tmpDir, 'workload.json')
    const r = await cli([
      'run',
      '--base-url',
      simEngine.url,
      '--model',
      'm',
      '--requests',
      '4',
      '--max-tokens',
      '6',
      '--prompt-tokens',
      '120',
      '--seed',
      '77',
      '--canaries',
      '--prefix-cache',
      'shared:40',
      '--output-control',
      'observe',
      '--output-knob',
      'min_tokens',
      '--temperature',
      '0.2',
      '--thinking',
      'off',
      '--out',
      out,
    ])
    expect(r.stderr).toBe('')
    expect(r.stdout).toMatch(/canaries 4\/4 passed · output control observe \(min_tokens\): 4\/4 exact/)
    expect(r.stdout).toMatch(/· shared prefix \d+ tokens · seed 77 · request stream [0-9a-f]{12}… \(wire bytes match\)/)
    expect(r.stdout).not.toMatch(/below the floor/)
    const record = RunRecord.parse(JSON.parse(await readFile(out, 'utf8')))
    expect(record.plan.workload).toMatchObject({
      kind: 'synthetic-summary',
      seed: 77,
      canaries: true,
      outputControl: { mode: 'observe', knob: 'min_tokens' },
    })
    expect(record.plan.workload.sampling?.thinking).toMatchObject({ sent: true, effective: false })
  })

  test('a dataset line that is not JSON is reported with its line number, on one line, exit 2', async ({ cli, simEngine, tmpDir }) => {
    const bad = join(tmpDir, 'bad.jsonl')
    await writeFile(bad, '{"prompt":"What is 1 + 1?","answer":2,"scorer":"numeric"}\n{not json}\n')
    const r = await cli(['run', '--base-url', simEngine.url, '--model', 'm', '--dataset', bad])
    // Read before anything runs, as a usage error (src/cli/input-files.test.ts has the rest).
    expect(r.code).toBe(2)
    expect(r.stderr).toMatch(new RegExp(`^servegate: --dataset: ${bad.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')}:2: `))
    expect(r.stderr.trim().split('\n')).toHaveLength(1)
  })
})

describe('servegate run --engine', () => {
  const FAKES = fileURLToPath(new URL('../../fixtures/fakes/', import.meta.url))

  test('launches the engine from its config, measures, writes the manifest, tears it down', async ({ cli, tmpDir }) => {
    const config = join(tmpDir, 'engine.json')
    await writeFile(
      config,
      JSON.stringify({ kind: 'vllm', executable: join(FAKES, 'vllm'), model: { id: 'fake/m' }, logDir: join(tmpDir, 'logs') }),
    )
    const out = join(tmpDir, 'engine-run.json')
    const r = await cli(['run', '--engine', config, '--requests', '3', '--max-tokens', '4', '--prompt-tokens', '32', '--out', out])
    expect(r.stderr).toBe('')
    expect(r.code).toBe(0)
    const record = RunRecord.parse(JSON.parse(await readFile(out, 'utf8')))
    expect(record.completed).toBe(3)
    expect(record.manifest?.engine).toMatchObject({ kind: 'vllm', version: { value: '0.11.0' } })
    // No nvidia-smi here: absent, with the reason, never invented.
    expect(record.manifest?.gpus.status).toBe('absent')
    expect(r.stdout).toMatch(/^engine vllm 0\.11\.0 · http · model fake\/m · no GPU facts \(/m)
    expect(r.stdout).toMatch(/^engine metrics: running max \d+, waiting max \d+ · concurrency /m)
  })

  test('an engine that dies at start-up: the record is written, the cell fails with exit 1 and one line', async ({ cli, tmpDir }) => {
    const config = join(tmpDir, 'dying.json')
    await writeFile(
      config,
      JSON.stringify({
        kind: 'vllm',
        executable: join(FAKES, 'vllm'),
        model: { id: 'fake/m' },
        env: { FAKE_ENGINE_EXIT_ON_START: '7' },
        logDir: join(tmpDir, 'logs'),
      }),
    )
    const out = join(tmpDir, 'dying-run.json')
    const r = await cli(['run', '--engine', config, '--out', out])
    expect(r.code).toBe(1)
    expect(r.stderr).toMatch(/^servegate: the cell failed: ENGINE_EXITED: engine vllm exited during start-up with code 7; log .*\n$/)
    expect(RunRecord.parse(JSON.parse(await readFile(out, 'utf8'))).cellFailure?.code).toBe('ENGINE_EXITED')
  })

  test('Ctrl-C mid-cell: the partial record is written, the engine tree is gone, exit 130', { timeout: 60_000 }, async ({ tmpDir }) => {
    const pids = join(tmpDir, 'ctrlc-pids.txt')
    const config = join(tmpDir, 'slow.json')
    const env = { FAKE_ENGINE_PIDFILE: pids, FAKE_ENGINE_DECODE_TOK_PER_S: '20' }
    await writeFile(
      config,
      JSON.stringify({ kind: 'vllm', executable: join(FAKES, 'vllm'), model: { id: 'fake/m' }, env, logDir: join(tmpDir, 'logs') }),
    )
    const out = join(tmpDir, 'ctrlc-run.json')
    const child = execa(
      process.execPath,
      [BIN, 'run', '--engine', config, '--requests', '20', '--max-tokens', '40', '--prompt-tokens', '32', '--out', out],
      { reject: false },
    )
    await expect
      .poll(async () => (await readFile(pids, 'utf8').catch(() => '')).split('\n').filter(Boolean).length, { timeout: 20_000 })
      .toBe(3)
    await new Promise((r) => setTimeout(r, 1500))
    child.kill('SIGINT')
    const result = await child
    expect(result.exitCode).toBe(130)
    expect(result.stderr).toMatch(/interrupted by SIGINT; the requests measured so far are in the record/)
    const record = RunRecord.parse(JSON.parse(await readFile(out, 'utf8')))
    expect(record.requests.length + record.unsent).toBe(20)
    expect(record.unsent).toBeGreaterThan(0)
    expect(result.stderr).toMatch(new RegExp(`, ${record.unsent} never sent are counted as unsent`))
    expect(record.failures.REQUEST_ABORTED).toBeGreaterThan(0)
    const tree = await treePids(pids)
    await expect.poll(() => tree.filter(alive), { timeout: 5000 }).toEqual([])
  })

  test('a bad engine config names the field', async ({ cli, tmpDir }) => {
    const config = join(tmpDir, 'bad.json')
    await writeFile(config, JSON.stringify({ kind: 'vllm', model: {} }))
    const r = await cli(['run', '--engine', config])
    expect(r.code).toBe(2)
    expect(r.stderr).toMatch(/^servegate: --engine .*bad\.json: invalid engine config: engine\.model\.id: /)
  })
})

describe('servegate summarize', () => {
  test('--json recomputes the anvil-serving reference into the fixed key shape', async ({ cli }) => {
    const r = await cli(['summarize', REFERENCE, '--json'])
    expect(r.code).toBe(0)
    const { metrics } = JSON.parse(r.stdout) as { metrics: Record<string, Record<string, number>> }
    expect(Object.keys(metrics)).toEqual([
      'ttftMs',
      'timeToFirstOutputMs',
      'e2eMs',
      'generationMs',
      'tpotMs',
      'decodeTokPerS',
      'effectivePrefillTokPerS',
      'promptTokens',
      'completionTokens',
    ])
    expect(Object.keys(metrics.ttftMs as object)).toEqual([
      'samples',
      'mean',
      'stddev',
      'ci95Low',
      'ci95High',
      'min',
      'p25',
      'p50',
      'p75',
      'p90',
      'p95',
      'p99',
      'max',
    ])
    expect(metrics.ttftMs?.p50).toBe(27812.978400001157)
    expect(metrics.decodeTokPerS?.mean).toBeCloseTo(88.63771760159608, 9)
  })

  test('the table marks p99 descriptive', async ({ cli }) => {
    const r = await cli(['summarize', REFERENCE])
    expect(r.stdout).toMatch(/benchmark-20261005T112704Z · qwen38/)
    expect(r.stdout).toMatch(/p99 is descriptive only below 100 samples/)
  })

  test.for<[string[], RegExp]>([
    [
      ['summarize', '/nonexistent/x.json'],
      /^servegate: cannot read \/nonexistent\/x\.json \(no such file\); pass the path of a run record JSON file\n$/,
    ],
    [['summarize'], /^servegate: summarize takes one run record file, got 0/],
    [['summarize', BIN], /^servegate: .*servegate\.js is not JSON/],
  ])('%j gets one line and a non-zero exit', async ([argv, message], { cli }) => {
    const r = await cli(argv)
    expect(r.code).not.toBe(0)
    expect(r.stderr).toMatch(message)
  })
})

describe('the servegate bin', () => {
  test('prints one line and no stack trace for bad input, in a real process', async () => {
    const r = await execa(process.execPath, [BIN, 'run', '--base-url', 'http://127.0.0.1:1', '--model', 'm', '--requests=-1'], {
      reject: false,
    })
    expect(r.exitCode).toBe(2)
    expect(r.stderr).toBe('servegate: --requests: "-1" is not valid; pass an integer from 1 to 1000000')
    expect(r.stderr).not.toMatch(/at .*\.ts:\d+/)
  })
})
