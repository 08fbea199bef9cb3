import { describe, expect, test } from 'vitest'
import { distribution } from '../src/metrics/distribution.ts'
import type { Distribution } from '../src/schema/run.ts'
import {
  type CellBenchReport,
  type CellRunResult,
  clientOnlyErrorMs,
  measurePrecision,
  type PacedRun,
  nextBisectionRung,
  perThreadCapacity,
  renderCellBench,
  runCellProcess,
  runRetainedProcess,
} from './cell-bench.ts'
import { serverCpu } from './cpu.ts'
import { findPythonClient } from './python-client.ts'
import { startServerProcess } from './servers/spawn.ts'

// cell-run.js runs the compiled package: `npm test` builds dist/ first.
describe('the cell path in a process of its own', () => {
  test('a zero-delay cell on one worker thread: every token delivered, its peak RSS and heap read', async () => {
    const server = await startServerProcess('zeroDelay')
    try {
      const r = await runCellProcess({ origin: server.origin, concurrency: 4, requests: 8, tokens: 50, workers: 1, spill: true })
      expect(r.completed).toBe(8)
      expect(r.deliveredShare).toBe(1)
      expect(r.workers).toBe(1)
      expect(r.harness.workers?.[0]?.requests).toBe(8)
      expect(r.peakRssMB).toBeGreaterThan(20)
      expect(r.heapAfterGcMB).toBeGreaterThan(1)
    } finally {
      await server.close()
    }
  }, 60_000)

  test('what a finished request leaves on the heap: its record when kept, next to nothing when spilled', async () => {
    const server = await startServerProcess('zeroDelay')
    try {
      const shape = { origin: server.origin, concurrency: 16, requests: 200, tokens: 50, workers: 0 }
      const kept = await runRetainedProcess(shape)
      const spilled = await runRetainedProcess({ ...shape, spill: true })
      expect(kept.requests).toBe(200)
      expect(kept.heapBytes[0]).toBeGreaterThan(2 ** 20)
      // A kept record holds its 49 ITL gaps and its fields, about 1 KB; a spilled one its place in the file.
      expect(kept.retainedBytesPerRequest).toBeGreaterThan(600)
      expect(kept.retainedBytesPerRequest - spilled.retainedBytesPerRequest).toBeGreaterThan(600)
    } finally {
      await server.close()
    }
  }, 120_000)

  test('C = 1 precision against the paced server reads the server’s own lateness beside the client’s error', async () => {
    const py = await findPythonClient()
    const { runs, python } = await measurePrecision(true, serverCpu(), () => {}, py)
    expect(runs.map((r) => r.workers)).toEqual([0, 1])
    if (py === null) expect(python).toBeNull()
    else {
      // The vLLM-style client ran on the same server, and the server was read for its run alone.
      expect(python?.runs).toHaveLength(1)
      expect(python?.runs[0]?.itlErrorMs.samples).toBe(49)
      expect(python?.runs[0]?.server.chunks).toBe(100)
      expect(python?.runs[0]?.clientErrorMs.samples).toBe(49)
      if (process.platform === 'linux') expect(python?.runs[0]?.hostStealShare).toBeGreaterThanOrEqual(0)
    }
    for (const r of runs) {
      expect(r.run.deliveredShare).toBe(1)
      expect(r.run.itlErrorMs?.p99).toBeGreaterThanOrEqual(0)
      // The server sent 50 chunks to the warm-up request and 50 to the measured one.
      expect(r.server.chunks).toBe(100)
      expect(r.server.lateP99Ms).not.toBeNull()
      // The client's own error, gap by gap against the server's send gaps of the measured stream.
      expect(r.clientErrorMs?.samples).toBe(49)
      expect(r.clientErrorMs?.p99).toBeGreaterThanOrEqual(0)
      // The cell's own record says what the host took meanwhile (Linux /proc/stat).
      if (process.platform === 'linux') expect(r.run.harness.hostStealShare).toBeGreaterThanOrEqual(0)
    }
  }, 60_000)
})

const run = (over: Partial<CellRunResult>): CellRunResult => ({
  concurrency: 256,
  requests: 512,
  tokens: 100,
  workers: 0,
  completed: 512,
  failed: 0,
  failures: {},
  offeredTokens: 51_200,
  deliveredTokens: 51_200,
  deliveredShare: 1,
  wallMs: 2000,
  chunksPerSPerWorker: 25_000,
  itlErrorMs: {
    samples: 50_000,
    mean: 0.5,
    stddev: 1,
    ci95Low: 0.4,
    ci95High: 0.6,
    min: 0,
    p25: 0.1,
    p50: 0.2,
    p75: 0.5,
    p90: 1,
    p95: 2,
    p99: 3,
    max: 9,
  },
  harness: {
    clientCpuMs: 1,
    clientCpuShare: 0.5,
    eventLoopDelayP99Ms: 1,
    eventLoopDelayMaxMs: 2,
    sendLagP99Ms: 1,
    harnessLimited: false,
    reasons: [],
  },
  peakRssMB: 200,
  heapAfterGcMB: 20,
  ...over,
})
/** A distribution whose p99 is `p99`, ms. */
const withP99 = (p99: number): Distribution => ({ ...distribution([0.2]), p99 })
/** `r` with a client's own error p99 of `p99` ms. */
const withOwn = (r: PacedRun, p99: number): PacedRun => ({ ...r, clientErrorMs: withP99(p99) })
const withSteal = (r: PacedRun, hostStealShare: number): PacedRun => ({
  ...r,
  run: { ...r.run, harness: { ...r.run.harness, hostStealShare } },
})
const rung = (concurrency: number, workers: number, holds: boolean, late = 0.2, chunksPerSPerWorker = 25_000): PacedRun => ({
  concurrency,
  workers,
  run: run({ concurrency, workers, chunksPerSPerWorker }),
  server: { chunks: 1, lateP50Ms: 0.1, lateP99Ms: late, lateMaxMs: late },
  clientErrorMs: null,
  holds,
  serverOnTime: late <= 1,
})

describe('renderCellBench', () => {
  test('judges each figure against its target and says when the server, not the client, was late', () => {
    const report: CellBenchReport = {
      memory: {
        peaks: [
          {
            label: 'C = 1 × 1000 tokens',
            concurrency: 1,
            tokens: 1000,
            targetMB: 100,
            workerFlagsMB: 98,
            workerFlagsRunsMB: [97, 98, 104],
            defaultMB: 112,
            heapAfterGcMB: 16,
          },
        ],
        retained: { concurrency: 64, tokens: 200, requests: [1500, 4500], spilledBytesPerRequest: 40, inMemoryBytesPerRequest: 2600 },
      },
      precision: {
        runs: [
          withSteal(withOwn(rung(1, 0, true, 2.5), 1.2), 0.01),
          withSteal(withOwn(rung(1, 0, true, 0.2), 0.9), 0.03),
          withSteal(withOwn(rung(1, 0, true, 0.2), 1.0), 0.02),
        ],
        python: {
          python: '3.11.2',
          aiohttp: '3.8.4',
          runs: [
            {
              itlErrorMs: { ...run({}).itlErrorMs!, p99: 3.5 },
              clientErrorMs: withP99(1.1),
              server: rung(1, 0, true).server,
              hostStealShare: null,
            },
          ],
        },
      },
      ladder: [rung(256, 0, true), rung(512, 0, false, 30), withSteal(rung(256, 2, true, 0.3, 20_000), 0.042)],
      ladderServerCpus: [12, 13, 14, 15],
    }
    const text = renderCellBench(report)
    expect(text).toContain("The server: 4 paced processes on CPU 12, 13, 14, 15; the cell's process on the CPUs below.")
    expect(text).toContain('| C = 1 × 1000 tokens | 98 MB (97, 98, 104) | ≤ 100 MB (met) | 112 MB | 16.0 MB |')
    // The clients' own errors judged, against the vLLM-style client's on the same server: 1.00 ms ≤ its 1.10 ms.
    expect(text).toContain("Target: the client's own error p99 ≤ the vLLM-style client's median here, 1.100 ms.")
    expect(text).toContain(
      "| servegate, cell's thread | 3 | 0.200 ms | 3.000 ms [3.000–3.000] | 1.000 ms [0.900–1.200] | met | 2.500 ms (late: its ITL error holds the server’s lateness) | 2.0% |",
    )
    expect(text).toContain(
      '| vLLM-style (Python 3.11.2, aiohttp 3.8.4) | 1 | 0.200 ms | 3.500 ms [3.500–3.500] | 1.100 ms [1.100–1.100] | (the target) | 0.200 ms | – |',
    )
    expect(text).toContain('40 B spilled to disk (target ≤ 200 B: met)')
    expect(text).toContain('| 0 | 512 | 100.0% | 3.00 ms | 25000 | 30.00 ms | – | no (server late) |')
    expect(text).toContain('| 2 | 256 | 100.0% | 3.00 ms | 20000 | 0.30 ms | 4.2% | yes |')
    expect(text).toContain('- 0 workers: highest C that held: 256')
    expect(text).toContain('about 9 worker threads')
  })

  test('a C = 1 client’s own error: each gap against the gap the server sent it with, the measured streams last', () => {
    // A warm-up stream of 3 chunks, then two measured ones of 3: lateness in send order.
    const late = [0.5, 0.1, 0.2, 0, 2, 0.5, 0.1, 0.1, 0.3]
    // Stream 1 went out with gaps 12 and 8.5 ms, stream 2 with 10 and 10.2 ms; the client read 12.1, 8.5, 10.4 and 10.2.
    const own = clientOnlyErrorMs(
      [
        [12.1, 8.5],
        [10.4, 10.2],
      ],
      late,
      3,
      10,
    )
    expect(own?.samples).toBe(4)
    expect(own?.max).toBeCloseTo(0.4, 9)
    expect(own?.min).toBeCloseTo(0, 9)
    // A request that missed a chunk, or more gaps than the server sent chunks: no figure.
    expect(clientOnlyErrorMs([[12.1], [10.4, 10.2]], late, 3, 10)).toBeNull()
    expect(
      clientOnlyErrorMs(
        [
          [1, 1],
          [1, 1],
          [1, 1],
          [1, 1],
        ],
        late,
        3,
        10,
      ),
    ).toBeNull()
  })

  test('per-thread capacity comes from rungs that held, else the best rung as a lower bound', () => {
    // 512 failed with the server on time: the client's capacity lies below its 51 200 chunks/s.
    expect(perThreadCapacity([rung(256, 0, true, 0.2, 20_000), rung(512, 0, false, 0.2, 30_000)])).toEqual({
      workers: 0,
      chunksPerS: 20_000,
      held: true,
      failedAtChunksPerS: 51_200,
    })
    // A rung the server was late for bounds nothing; one it overloaded (chunks in bursts) gives no rate at all.
    expect(perThreadCapacity([rung(256, 0, false, 3, 24_000)])).toEqual({
      workers: 0,
      chunksPerS: 24_000,
      held: false,
      failedAtChunksPerS: null,
    })
    expect(perThreadCapacity([rung(256, 0, false, 3, 24_000), rung(1024, 0, false, 600, 63_000)])?.chunksPerS).toBe(24_000)
    expect(perThreadCapacity([rung(1024, 0, false, 600, 63_000)])).toBeNull()
    // On two workers, C = 512 offers each 25 600 chunks/s.
    expect(perThreadCapacity([rung(256, 2, true, 0.2, 12_800), rung(512, 2, false, 0.2, 20_000)])?.failedAtChunksPerS).toBe(25_600)
    // A count's failure bounds only that count: one worker failing C = 128 does not bound the cell's thread that held it.
    const mixed = [
      rung(128, 0, true, 0.2, 12_600),
      rung(256, 0, false, 0.2, 24_000),
      rung(64, 1, true, 0.2, 6_300),
      rung(128, 1, false, 0.2, 12_500),
    ]
    expect(perThreadCapacity(mixed)).toEqual({ workers: 0, chunksPerS: 12_600, held: true, failedAtChunksPerS: 25_600 })
    expect(perThreadCapacity([])).toBeNull()
  })

  test('a rung the client failed with the server on time bounds a thread from above only', () => {
    // 64: only the server failed it (a lower bound); 128: the client failed it, the server on time.
    expect(perThreadCapacity([rung(64, 0, false, 1.8, 6_344), rung(128, 0, false, 0.74, 12_500)])).toEqual({
      workers: 0,
      chunksPerS: 6_344,
      held: false,
      failedAtChunksPerS: 12_800,
    })
    // Only rungs the client failed: no lower bound, the lowest offer above.
    const failedOnly = [rung(128, 0, false, 0.5, 12_500), rung(256, 0, false, 0.5, 20_000), rung(128, 1, false, 0.5, 12_400)]
    expect(perThreadCapacity(failedOnly)).toEqual({ workers: 0, chunksPerS: null, held: false, failedAtChunksPerS: 12_800 })
    const text = renderCellBench({ memory: null, precision: null, ladder: failedOnly })
    // 204 800 / 12 800 = 16 threads at that offer, so more than 16 below it.
    expect(text).toContain(
      "(the cell's thread): no rung held; one that offered 12800 chunk arrivals/s a thread did not hold with the server on time",
    )
    expect(text).toContain('204800 chunks/s: at least 17 worker threads')
    expect(text).toContain('a 64-core runner (up to 16) does not have.')
  })

  test('the ladder bisects between the highest rung held and the first the client failed, to within an eighth', () => {
    // 128 held, 256 failed with the server on time: try 192.
    const base = [rung(64, 0, true), rung(128, 0, true), rung(256, 0, false, 0.2)]
    expect(nextBisectionRung(base, 0)).toBe(192)
    // 192 held: between 192 and 256, 224; then 240; 240 to 256 is within 240 / 8.
    expect(nextBisectionRung([...base, rung(192, 0, true)], 0)).toBe(224)
    expect(nextBisectionRung([...base, rung(192, 0, true), rung(224, 0, true)], 0)).toBe(240)
    expect(nextBisectionRung([...base, rung(192, 0, true), rung(224, 0, true), rung(240, 0, true)], 0)).toBeNull()
    // 192 failed: down to 160, then 144, then 128 to 144 is within 128 / 8.
    expect(nextBisectionRung([...base, rung(192, 0, false, 0.2)], 0)).toBe(160)
    expect(nextBisectionRung([...base, rung(192, 0, false, 0.2), rung(160, 0, false, 0.2)], 0)).toBe(144)
    expect(nextBisectionRung([...base, rung(192, 0, false, 0.2), rung(160, 0, false, 0.2), rung(144, 0, false, 0.2)], 0)).toBeNull()
    // The middle failed on the server: it says nothing of the client, and is not tried again.
    expect(nextBisectionRung([...base, rung(192, 0, false, 3)], 0)).toBeNull()
    // Nothing held, or nothing the client failed: no bounds to bisect; other worker counts do not count.
    expect(nextBisectionRung([rung(64, 0, false, 0.2)], 0)).toBeNull()
    expect(nextBisectionRung([rung(64, 0, true), rung(128, 0, false, 3)], 0)).toBeNull()
    expect(nextBisectionRung(base, 1)).toBeNull()
  })

  test('the ladder table lists each worker count by C, bisected rungs between the doublings', () => {
    const text = renderCellBench({
      memory: null,
      precision: null,
      ladder: [rung(128, 0, true), rung(256, 0, false, 0.2), rung(192, 0, true), rung(64, 1, true), rung(96, 1, false, 0.2)],
    })
    const rows = text
      .split('\n')
      .filter((l) => /^\| \d+ \| \d+ \|/.test(l))
      .map((l) =>
        l
          .split('|')
          .slice(1, 3)
          .map((c) => Number(c.trim())),
      )
    expect(rows).toEqual([
      [0, 128],
      [0, 192],
      [0, 256],
      [1, 64],
      [1, 96],
    ])
    expect(text).toContain('- 0 workers: highest C that held: 192')
  })

  test('the ladder states the thread count C = 2048 needs as a range where a rung bounds it from above', () => {
    const report: CellBenchReport = {
      memory: null,
      precision: null,
      ladder: [rung(64, 1, true, 0.2, 6_300), rung(128, 1, true, 0.2, 12_500), rung(256, 1, false, 0.2, 24_000)],
    }
    const text = renderCellBench(report)
    expect(text).toContain('- 1 workers: highest C that held: 128')
    expect(text).toContain('(1 workers): 12500 chunk arrivals/s at a rung that held; a rung that offered 25600 a thread did not hold')
    // 204 800 chunks/s: 8 threads at 25 600 each, 17 at 12 500.
    expect(text).toContain('204800 chunks/s: 8 to 17 worker threads')
  })
})
