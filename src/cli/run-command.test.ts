import { readFile, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { describe, expect } from 'vitest'
import { CapacitySearch } from '../schema/capacity-record.ts'
import { RunRecord } from '../schema/run.ts'
import { parseSimArgs } from './sim.ts'
import { test } from '../../fixtures/test-context.ts'

test.override('simOptions', { model: 'm', decodeTokPerS: 500, prefillTokPerS: 50_000 })

describe('servegate run in the open loop', () => {
  test('--rate with --slo: the summary shows the arrival process and the goodput; the record keeps both', async ({
    cli,
    simEngine,
    tmpDir,
  }) => {
    const out = join(tmpDir, 'open.json')
    const r = await cli([
      'run',
      '--base-url',
      simEngine.url,
      '--model',
      'm',
      '--rate',
      '40',
      '--arrival',
      'gamma',
      '--burstiness',
      '0.5',
      '--arrival-seed',
      '2',
      '--requests',
      '30',
      '--max-tokens',
      '4',
      '--prompt-tokens',
      '32',
      '--slo',
      'ttft=2000,tpot=500',
      '--out',
      out,
    ])
    expect(r.stderr).toBe('')
    expect(r.code).toBe(0)
    expect(r.stdout).toMatch(/· chat · open loop\n/)
    expect(r.stdout).toMatch(
      /^open loop: gamma burstiness 0\.5 40 req\/s \(seed 2\) · offered \d+\.\d+ req\/s over \d+\.\d\d s · in flight at most \d+ · no in-flight cap · schedule [0-9a-f]{12}…$/m,
    )
    expect(r.stdout).toMatch(
      /^goodput \(ttft ≤ 2000 ms, tpot ≤ 500 ms\): 30\/30 good = 100\.0% \[88\.6%, 100\.0%\] \(Wilson 95%\) · \d+\.\d+ good req\/s$/m,
    )
    const record = RunRecord.parse(JSON.parse(await readFile(out, 'utf8')))
    expect(record.plan.arrival).toMatchObject({ kind: 'gamma', ratePerS: 40, burstiness: 0.5, seed: 2 })
    // The harness line says how much of the machine the host took while the cell measured (Linux).
    if (process.platform === 'linux') {
      expect(r.stdout).toMatch(/^(harness ok|HARNESS-LIMITED).* · event-loop delay p99 .* · host steal \d+\.\d%( · reads batched: .*)?$/m)
      expect(r.stdout).toContain(`host steal ${((record.harness.hostStealShare as number) * 100).toFixed(1)}%`)
    }
    // Batched reads are named on the line exactly when the record counts a pause.
    expect(r.stdout.includes(' · reads batched: ')).toBe((record.harness.readBatching?.pauses ?? 0) > 0)
    expect(record.metrics.goodput?.good).toBe(30)
    // summarize recomputes the goodput from the requests, under the SLO the record was judged by.
    const s = await cli(['summarize', out])
    expect(s.stdout).toMatch(/^goodput \(ttft ≤ 2000 ms, tpot ≤ 500 ms\): 30\/30 good = 100\.0%/m)
    expect(s.stdout).toMatch(/^open loop: gamma burstiness 0\.5 40 req\/s \(seed 2\)/m)
  })

  test('--trace replays every row unless --requests says fewer', async ({ cli, simEngine, tmpDir }) => {
    const trace = join(tmpDir, 'trace.jsonl')
    await writeFile(trace, [0, 20, 20, 90].map((t) => JSON.stringify({ timestamp: t, input_length: 40, output_length: 3 })).join('\n'))
    const out = join(tmpDir, 'trace.json')
    const r = await cli(['run', '--base-url', simEngine.url, '--model', 'm', '--trace', trace, '--trace-time-scale', '2', '--out', out])
    expect(r.stderr).toBe('')
    const record = RunRecord.parse(JSON.parse(await readFile(out, 'utf8')))
    expect(record.requests.map((q) => q.scheduledOffsetMs)).toEqual([0, 40, 40, 180])
    expect(r.stdout).toMatch(/^open loop: trace replay \(time ×2\) · 4 of 4 rows of /m)
  })

  test.for<[string[], RegExp]>([
    [
      ['--rate', '4', '--concurrency', '2'],
      /^servegate: --rate and --concurrency are exclusive \(open loop vs closed loop\); to cap the requests in flight pass --max-in-flight N\n$/,
    ],
    [['--rate', '4', '--trace', 't.jsonl'], /^servegate: --rate and --trace are exclusive/],
    [['--rate', '0'], /^servegate: --rate: "0" is not valid; pass a number > 0 and ≤ 100000\n$/],
    [['--rate', '4', '--arrival', 'weibull'], /^servegate: --arrival: "weibull" is not valid; pass one of constant, poisson, gamma\n$/],
    [['--rate', '4', '--arrival', 'gamma'], /^servegate: --arrival gamma needs --burstiness B/],
    [
      ['--rate', '4', '--arrival', 'constant', '--burstiness', '2'],
      /^servegate: --burstiness: only gamma arrivals have one; pass --arrival gamma or drop --burstiness\n$/,
    ],
    [['--rate', '4', '--arrival', 'constant', '--arrival-seed', '3'], /^servegate: --arrival-seed: constant arrivals draw nothing/],
    [['--rate', '4', '--ramp-up-from', '1'], /^servegate: --ramp-up-from needs --ramp-up-s S/],
    [['--max-in-flight', '4'], /^servegate: --max-in-flight shapes open-loop arrivals; pass --rate R \(requests\/s\) with it\n$/],
    [['--trace', 't.jsonl', '--arrival', 'poisson'], /^servegate: --arrival: a trace sets its own arrival times/],
    [['--trace-time-scale', '2'], /^servegate: --trace-time-scale needs --trace FILE\n$/],
    [['--trace-block-tokens', '64'], /^servegate: --trace-block-tokens needs --trace FILE\n$/],
    [
      ['--trace', 't.jsonl', '--trace-block-tokens', '0'],
      /^servegate: --trace-block-tokens: "0" is not valid; pass an integer from 1 to 1048576\n$/,
    ],
    [['--slo', 'ttft=fast'], /^servegate: --slo: ttft=fast is not valid; pass a number of ms > 0, e\.g\. ttft=500\n$/],
    [['--slo', 'latency=5'], /^servegate: --slo: unknown objective "latency"; use ttft, tpot, e2e, itl, itl-percentile/],
    [['--slo', 'itl-percentile=90'], /^servegate: --slo: give at least one of ttft, tpot, e2e, itl \(ms\)/],
  ])('bad load flags %j get one line and exit 2', async ([flags, message], { cli }) => {
    const r = await cli(['run', '--base-url', 'http://127.0.0.1:1', '--model', 'm', ...flags])
    expect(r.stderr).toMatch(message)
    expect(r.code).toBe(2)
  })

  test('a trace file that is not there is named', async ({ cli, simEngine, tmpDir }) => {
    const r = await cli(['run', '--base-url', simEngine.url, '--model', 'm', '--trace', join(tmpDir, 'missing.jsonl')])
    // Checked before the cell, as a configuration error.
    expect(r.code).toBe(2)
    expect(r.stderr).toMatch(/^servegate: --trace: .*missing\.jsonl does not exist; pass the path of a JSONL trace\n$/)
  })
})

describe('servegate capacity', () => {
  const FAKES = fileURLToPath(new URL('../../fixtures/fakes/', import.meta.url))

  test('--engine: one launch serves every probe; a third stream on two seats queues, so the bracket is [2, 3)', async ({ cli, tmpDir }) => {
    const config = join(tmpDir, 'engine.json')
    await writeFile(
      config,
      JSON.stringify({
        kind: 'vllm',
        executable: join(FAKES, 'vllm'),
        model: { id: 'fake/m' },
        extraArgs: ['--max-num-seqs', '2'],
        env: { FAKE_ENGINE_DECODE_TOK_PER_S: '100', FAKE_ENGINE_BATCH_SLOWDOWN: '0' },
        logDir: join(tmpDir, 'logs'),
      }),
    )
    const out = join(tmpDir, 'capacity.json')
    const r = await cli([
      'capacity',
      '--engine',
      config,
      '--axis',
      'concurrency',
      '--start',
      '2',
      '--max',
      '3',
      '--requests',
      '49',
      '--max-tokens',
      '8',
      '--prompt-tokens',
      '32',
      '--output-control',
      'observe',
      '--slo',
      'ttft=50',
      '--out',
      out,
      // Only gross lateness stops a probe on this shared 2-core machine; the bound itself is tested in the runner.
      '--send-lag-limit-ms',
      '100',
      '--event-loop-delay-limit-ms',
      '200',
    ])
    expect(r.stderr).toBe('')
    expect(r.code).toBe(0)
    expect(r.stdout.split('\n')[0]).toBe('probe    streams       good   share      98% interval  send lag p99  verdict')
    expect(r.stdout).toMatch(/^ {4}1 {10}2 {6}49\/49 {2}100\.0% {3}\[90\.1%, 100\.0%\] +\d+\.\d\d ms {2}pass$/m)
    expect(r.stdout).toMatch(/^ {4}2 {10}3 .* fail$/m)
    expect(r.stdout).toMatch(
      /^capacity in \[2, 3\) streams \(×1\.50\) under ttft ≤ 50 ms for 90% of requests; bracketed after 2 probe\(s\)$/m,
    )
    const search = CapacitySearch.parse(JSON.parse(await readFile(out, 'utf8')))
    expect(search.records.map((x) => x.manifest?.engine.argv)).toEqual([
      search.records[0]?.manifest?.engine.argv,
      search.records[0]?.manifest?.engine.argv,
    ])
    expect(search.records[0]?.manifest?.engine.argv).toContain('--max-num-seqs')
  })

  test.for<[string[], RegExp]>([
    [['--start', '4'], /^servegate: --slo is required; pass the objectives of one request, e\.g\. --slo ttft=500,tpot=50\n$/],
    [['--slo', 'ttft=5'], /^servegate: --start is required; pass the first rate \(requests\/s\) to probe, e\.g\. --start 4\n$/],
    [
      ['--slo', 'ttft=5', '--start', '4', '--axis', 'concurrency', '--arrival', 'poisson'],
      /^servegate: --arrival: a concurrency search runs closed-loop probes; drop it, or pass --axis rate\n$/,
    ],
    [
      ['--slo', 'ttft=5', '--start', '4', '--requests', '10'],
      /^servegate: invalid capacity search: requestsPerProbe: 10 requests can never show 90% good/,
    ],
    [
      ['--slo', 'ttft=5', '--start', '4', '--min', '8'],
      /^servegate: invalid capacity search: bracket\.start: 4 must lie within \[min 8, max 64\]\n$/,
    ],
  ])('bad flags %j get one line and exit 2', async ([flags, message], { cli, simEngine }) => {
    const r = await cli(['capacity', '--base-url', simEngine.url, '--model', 'm', ...flags])
    expect(r.stderr).toMatch(message)
    expect(r.code).toBe(2)
  })
})

describe('servegate sim capacity flags', () => {
  test('--max-batch and --kv-budget-tokens set the capacity model; a bad value names the flag', () => {
    expect(parseSimArgs(['--max-batch', '4', '--kv-budget-tokens', '4096'])).toMatchObject({ maxBatch: 4, kvBudgetTokens: 4096 })
    expect(() => parseSimArgs(['--max-batch', '0'])).toThrow(
      /^--max-batch: .*\(got "0"\); use an integer >= 1 \(requests admitted at once\), or leave it unset for no limit$/,
    )
  })
})
