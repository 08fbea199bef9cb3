import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { findPythonClient, runPythonIngest, runPythonItl } from './python-client.ts'
import { type ServerProcess, startServerProcess } from './servers/spawn.ts'
import { type Figure, figure, type Pair, renderSideBySide, type SideBySideReport } from './side-by-side.ts'

const py = await findPythonClient()

describe.skipIf(py === null)('Python aiohttp client against the bench servers', () => {
  const servers: ServerProcess[] = []
  let zeroDelay: ServerProcess
  let paced: ServerProcess
  beforeAll(async () => {
    zeroDelay = await startServerProcess('zeroDelay')
    servers.push(zeroDelay)
    paced = await startServerProcess('paced', ['--interval-ms', '10'])
    servers.push(paced)
  })
  afterAll(async () => {
    await Promise.all(servers.map((s) => s.close()))
  })

  test('ingest: every request ok, every token counted', async () => {
    if (py === null) return
    const run = await runPythonIngest(py, { origin: zeroDelay.origin, concurrency: 4, requests: 8, tokens: 50, deadlineMs: 10_000 })
    expect(run.failures).toEqual([])
    expect(run).toMatchObject({ concurrency: 4, requests: 8, okRequests: 8, completionTokens: 400 })
    expect(run.tokPerS).toBeGreaterThan(0)
    expect(run.cpuShare).toBeGreaterThan(0)
    expect(run.peakRssMB).toBeGreaterThan(5)
  })

  test("ITL: every chunk delivered; arrival latency small and positive, so perf_counter is the server's clock", async () => {
    if (py === null) return
    const run = await runPythonItl(py, { origin: paced.origin, intervalMs: 10, concurrency: 2, chunks: 20, rounds: 1 })
    expect(run.failures).toEqual([])
    expect(run).toMatchObject({ requests: 2, okRequests: 2, offeredTokens: 40, deliveredTokens: 40, deliveredShare: 1, deadlineMs: 300 })
    expect(run.arrivalLatencyMs.samples).toBe(40)
    expect(run.arrivalLatencyMs.min).toBeGreaterThan(0)
    expect(run.arrivalLatencyMs.max).toBeLessThan(50)
    expect(run.itlErrorMs.samples).toBe(38)
    expect(run.clientErrorMs.samples).toBe(38)
  })
})

describe('renderSideBySide', () => {
  const pair = (servegate: number[], python: number[]): Pair<Figure> => ({
    servegate: figure(servegate),
    python: figure(python),
  })
  const report: SideBySideReport = {
    startedAt: '2026-01-02T03:04:05.000Z',
    quick: false,
    cpus: 2,
    serverCpu: 1,
    clientCpu: 0,
    runsPerFigure: 2,
    versions: { node: 'v24.0.0', python: '3.11.2', aiohttp: '3.8.4', numpy: '1.24.2', pythonExecutable: '/usr/bin/python3' },
    ingest: [
      {
        concurrency: 1,
        tokens: 1000,
        requests: 100,
        tokPerS: pair([400_000, 420_000], [200_000, 200_000]),
        cpuSPerMTok: pair([2, 2.2], [4, 5]),
        tokPerSRatio: 2,
        allOk: { servegate: true, python: true },
      },
      {
        concurrency: 256,
        tokens: 1000,
        requests: 512,
        tokPerS: pair([600_000, 620_000], [200_000, 210_000]),
        cpuSPerMTok: pair([1.5, 1.6], [5, 5]),
        tokPerSRatio: 3,
        allOk: { servegate: true, python: true },
      },
    ],
    itl: [
      {
        concurrency: 64,
        intervalMs: 10,
        chunks: 200,
        rounds: 3,
        itlErrorP99Ms: pair([1.27, 1.3], [1.69, 1.8]),
        clientErrorP99Ms: pair([1, 1.1], [1.5, 1.6]),
        arrivalLatencyP50Ms: pair([0.2, 0.3], [0.4, 0.5]),
        deliveredShareMin: { servegate: 1, python: 0.995 },
      },
    ],
    rss: [{ concurrency: 1, tokens: 1000, requests: 200, peakRssMB: pair([163, 170], [32, 32]) }],
    wallS: 300,
    failures: [],
  }

  test('a Markdown table with the date, the method, the versions and every figure', () => {
    const text = renderSideBySide(report)
    expect(text).toContain('(2026-01-02)')
    expect(text).toContain('server pinned to CPU 1, both clients to CPU 0')
    expect(text).toContain('A B B A')
    expect(text).toContain('2 runs per figure per client')
    expect(text).toContain('Node v24.0.0, Python 3.11.2, aiohttp 3.8.4, numpy 1.24.2')
    expect(text).toContain("servegate ingests 2×–3× the Python client's tokens/s; CPU per 1M tokens 1.5–2 s vs 4–5 s.")
    expect(text).toContain('| ingest, C=1 × 1000 tok (tok/s) | 400k [400k–420k] | 200k | 2× |')
    expect(text).toContain('| CPU per 1M tokens, C=256 (s) | 1.5 [1.5–1.6] | 5 | 3.33× |')
    expect(text).toContain('| ITL error p99, 10 ms/chunk, C=64 (ms) | 1.27 [1.27–1.3] | 1.69 [1.69–1.8] | 1.33× |')
    expect(text).toContain('| delivered (lowest run), C=64 | 100.00% | 99.50% |  |')
    expect(text).toContain('| peak RSS, C=1 × 1000 tok (MB) | 163 [163–170] | 32 | 5.09× |')
    expect(text).not.toContain('Failed requests')
  })

  test('lists runs with failed requests', () => {
    const text = renderSideBySide({ ...report, failures: ['python ingest C=1 run 2: 1 failed, e.g. deadline'] })
    expect(text).toContain('Failed requests (1 runs):\n- python ingest C=1 run 2: 1 failed, e.g. deadline')
  })
})
