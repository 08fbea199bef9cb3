import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { runServegateCli } from './cli-run.ts'
import { findPythonClient, runPythonIngest, runPythonItl } from './python-client.ts'
import { gapErrors, takeSendLog } from './send-truth.ts'
import { type ServerProcess, startServerProcess } from './servers/spawn.ts'
import { abba, type Figure, figure, type Pair, renderSideBySide, type SideBySideReport } from './side-by-side.ts'

const py = await findPythonClient()

/** A paced server that logs its sends, and a zero-delay one that writes one event per socket write. */
let dir: string
const servers: ServerProcess[] = []
let paced: ServerProcess
let perEvent: ServerProcess
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'side-by-side-'))
  paced = await startServerProcess('paced', ['--interval-ms', '10', '--log', join(dir, 'sends.jsonl')])
  servers.push(paced)
  perEvent = await startServerProcess('zeroDelay', ['--events-per-write', '1'])
  servers.push(perEvent)
})
afterAll(async () => {
  await Promise.all(servers.map((s) => s.close()))
  await rm(dir, { recursive: true, force: true })
})

describe.skipIf(py === null)('Python aiohttp client against the bench servers', () => {
  test('ingest: every request ok, every token counted, from a server writing one event per write', async () => {
    if (py === null) return
    const run = await runPythonIngest(py, { origin: perEvent.origin, concurrency: 4, requests: 8, tokens: 50, deadlineMs: 10_000 })
    expect(run.failures).toEqual([])
    expect(run).toMatchObject({ concurrency: 4, requests: 8, okRequests: 8, completionTokens: 400 })
    expect(run.tokPerS).toBeGreaterThan(0)
    expect(run.cpuShare).toBeGreaterThan(0)
    expect(run.peakRssMB).toBeGreaterThan(5)
  })

  test("ITL: every chunk delivered; arrival latency small and positive, so perf_counter is the server's clock", async () => {
    if (py === null) return
    await takeSendLog(paced.origin)
    const run = await runPythonItl(py, { origin: paced.origin, intervalMs: 10, concurrency: 2, chunks: 20, rounds: 1, detail: true })
    expect(run.failures).toEqual([])
    expect(run).toMatchObject({ requests: 2, okRequests: 2, offeredTokens: 40, deliveredTokens: 40, deliveredShare: 1, deadlineMs: 300 })
    expect(run.arrivalLatencyMs.samples).toBe(40)
    expect(run.arrivalLatencyMs.min).toBeGreaterThan(0)
    expect(run.arrivalLatencyMs.max).toBeLessThan(50)
    expect(run.itlErrorMs.samples).toBe(38)
    expect(run.clientErrorMs.samples).toBe(38)
    // --detail: each request's body digest is the one the server logged (warm-up bodies differ), with every gap.
    const log = await takeSendLog(paced.origin)
    expect(log.requests).toBe(4)
    expect(log.ambiguous.size).toBe(0)
    const errors = gapErrors(run.requestsDetail ?? [], log)
    expect(errors).toMatchObject({ requests: 2, matched: 2, incomplete: 0, gaps: 38 })
  })
})

describe('servegate run, the CLI, against the bench servers', () => {
  test("ITL: every request matched to the paced server's log by its wireSha256, every gap compared; send lag recorded", async () => {
    await takeSendLog(paced.origin)
    const out = join(dir, 'itl.json')
    const run = await runServegateCli({ origin: paced.origin, concurrency: 2, requests: 4, warmup: 2, maxTokens: 10, out, cpu: null })
    expect(run.exitCode).toBe(0)
    expect(run.record.completed).toBe(4)
    const log = await takeSendLog(paced.origin)
    // The warm-up's requests reach the server too, with bytes of their own.
    expect(log.requests).toBe(6)
    expect(log.ambiguous.size).toBe(0)
    const errors = gapErrors(
      run.record.requests.map((r) => ({ sha256: r.wireSha256, gapsMs: r.itlMs ?? [] })),
      log,
    )
    expect(errors).toMatchObject({ requests: 4, matched: 4, incomplete: 0, gaps: 36 })
    expect(errors.errorMeanMs).not.toBeNull()
    expect(run.record.requests.every((r) => r.sendLagMs !== null)).toBe(true)
    expect(run.record.harness.sendLagP99Ms).not.toBeNull()
  })

  test('peak RSS: the VmHWM of the process that ran the cell; the record on disk', async () => {
    const out = join(dir, 'rss.json')
    const run = await runServegateCli({
      origin: perEvent.origin,
      concurrency: 2,
      requests: 2,
      warmup: 0,
      maxTokens: 50,
      out,
      cpu: null,
      sampleRss: true,
    })
    expect(run.exitCode).toBe(0)
    expect(run.record.metrics.totalCompletionTokens).toBe(100)
    expect(run.peakRssMB).toBeGreaterThan(20)
    expect(run.recordBytes).toBeGreaterThan(100)
  })
})

describe('abba', () => {
  test('alternates A B B A, then A B…, as many runs of each', () => {
    expect(abba(1)).toEqual(['servegate', 'python'])
    expect(abba(3)).toEqual(['servegate', 'python', 'python', 'servegate', 'servegate', 'python'])
  })
})

describe('renderSideBySide', () => {
  const pair = (servegate: number[], python: number[]): Pair<Figure | null> => ({
    servegate: figure(servegate),
    python: figure(python),
  })
  const report: SideBySideReport = {
    startedAt: '2026-01-02T03:04:05.000Z',
    quick: false,
    cpus: 2,
    serverCpu: 1,
    clientCpu: 0,
    runsPerFigure: 3,
    servegateSide: { itl: '`servegate run`', ingest: 'measureIngest in-process', rss: '`servegate run`' },
    versions: { node: 'v24.0.0', python: '3.11.2', aiohttp: '3.8.4', numpy: '1.24.2', pythonExecutable: '/usr/bin/python3' },
    itl: [
      {
        concurrency: 256,
        chunks: 100,
        rounds: 4,
        intervalMs: 10,
        requests: 1024,
        errorMeanMs: pair([0.7, 0.69, 0.75], [0.31, 0.33, 0.32]),
        errorP99Ms: pair([10, 10, 10], [5, 4.6, 5.4]),
        firstGapSignedMeanMs: pair([-0.21, -0.2, -0.3], [0.01, 0.01, 0.02]),
        matchedShareMin: { servegate: 1, python: 0.995 },
        gapsMin: { servegate: 101_376, python: 101_376 },
        cpuShare: pair([0.5], [0.6]),
        sendLagP99Ms: figure([139, 143, 141]),
        sendLagAfterOpeningP99Ms: figure([1.5, 1.7, 1.6]),
        openingSendLagMaxMs: figure([140, 144, 142]),
        harnessLimited: [true, true, false],
        harnessReasons: ['send lag p99 139 ms > 5 ms'],
      },
    ],
    ingest: [
      {
        eventsPerWrite: 1,
        concurrency: 16,
        tokens: 1000,
        requests: 100,
        tokPerS: pair([170_000, 160_000, 180_000], [168_000, 168_000, 168_000]),
        cpuSPerMTok: pair([5.6, 5.7, 5.8], [5.8, 5.8, 5.8]),
        allOk: { servegate: true, python: true },
      },
    ],
    rss: [
      {
        concurrency: 256,
        tokens: 1000,
        requests: 512,
        peakRssMB: pair([331, 330, 340], [206, 206, 206]),
        recordBytesPerToken: figure([32, 32, 32]),
      },
    ],
    wallS: 300,
    failures: [],
  }

  test('a Markdown table with the date, the method, the versions and every figure, servegate over Python', () => {
    const text = renderSideBySide(report)
    expect(text).toContain('(2026-01-02)')
    expect(text).toContain('servers pinned to CPU 1, both clients to CPU 0')
    expect(text).toContain('A B B A A B')
    expect(text).toContain('3 run(s) per figure per client')
    expect(text).toContain('Node v24.0.0, Python 3.11.2, aiohttp 3.8.4, numpy 1.24.2')
    expect(text).toContain('C=256 100.0% / 99.5%')
    expect(text).toContain("| ITL error vs server's send gaps, mean, C=256 (ms) | 0.7 [0.69–0.75] | 0.32 [0.31–0.33] | 2.19× |")
    expect(text).toContain("| ITL error vs server's send gaps, p99, C=256 (ms) | 10 | 5 [4.6–5.4] | 2× |")
    expect(text).toContain('| first gap, signed mean error, C=256 (ms) | −0.21 [−0.3–−0.2] | +0.01 [+0.01–+0.02] |  |')
    expect(text).toContain(
      '| send lag p99, closed loop, C=256 (ms) | 141 [139–143]; harness-limited in 2/3 runs (send lag p99 139 ms > 5 ms) | — |  |',
    )
    expect(text).toContain("| send lag, C=256: the opening round's last send; p99 after it (ms) | 142 [140–144]; 1.6 [1.5–1.7] | — |  |")
    expect(text).toContain('| ingest, 1 event(s)/write, C=16 × 1000 tok (tok/s) | 170k [160k–180k] | 168k | 1.01× |')
    expect(text).toContain('| CPU per 1M tokens, 1 event/write, C=16 (s) | 5.7 [5.6–5.8] | 5.8 | 0.983× |')
    expect(text).toContain('| peak RSS, C=256 × 1000 tok, 512 requests (MB) | 331 [330–340] | 206 | 1.61× |')
    expect(text).toContain('| record on disk, C=256 × 1000 tok (bytes/token) | 32 | — |  |')
    expect(text).not.toContain('Runs with failed')
  })

  test('lists runs with failed or unmatched requests', () => {
    const text = renderSideBySide({ ...report, failures: ['python ITL C=1 run 2: 0 failed, 1 unmatched, 0 incomplete'] })
    expect(text).toContain('Runs with failed or unmatched requests (1):\n- python ITL C=1 run 2: 0 failed, 1 unmatched, 0 incomplete')
  })
})
