import { monoMs } from '../client/clock.ts'
import { holdThread } from '../../fixtures/event-loop.ts'
import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, describe, expect, test } from 'vitest'
import { emptyObservation, type StreamObservation } from '../client/stream.ts'
import { arrivalSchedule } from '../load/arrival.ts'
import { RunRecord } from '../schema/run.ts'
import { type SimServer, startSimServer } from '../sim/server.ts'
import { type CellTransport, httpTransport } from './cell-transport.ts'
import { measureCell, runCell } from './measure-cell.ts'
import { type ResolvedRunCellOptions, resolveCellOptions } from './cell-options.ts'
import { failureOf } from '../../fixtures/matchers.ts'
import { sloGate } from '../gates/slo.ts'
import { parseBaseUrl } from '../loopback.ts'

let sim: SimServer | null = null
afterEach(async () => {
  await sim?.close()
  sim = null
})

/**
 * A transport with no engine behind it: each reply is 8 tokens, answered at once; `blockMs` of
 * synchronous work per send plays a client that cannot keep up.
 */
function instantTransport(blockMs: number): CellTransport {
  return {
    send: async () => {
      // Busy: the event loop is held, as a saturated client would hold it.
      holdThread(blockMs)
      const sentAt = monoMs()
      await new Promise((resolve) => setTimeout(resolve, 2))
      const at = monoMs()
      const obs: StreamObservation = {
        ...emptyObservation(sentAt),
        firstOutputAt: at,
        firstContentAt: at,
        endAt: at,
        outputChunkAt: Float64Array.of(at),
        contentChunks: 1,
        usagePromptTokens: 16,
        usageCompletionTokens: 1,
        finishReason: 'stop',
        httpStatus: 200,
        content: 'x',
      }
      return obs
    },
    tokenizer: async () => null,
    close: async () => {},
  }
}

const offline = (ratePerS: number, requests: number, limits: { sendLagLimitMs?: number; eventLoopDelayLimitMs?: number } = {}) =>
  resolveCellOptions({
    baseUrl: 'http://127.0.0.1:1',
    model: 'm',
    requests,
    maxTokens: 1,
    calibrate: false,
    workload: { promptTokens: 16 },
    arrival: { kind: 'constant', ratePerS },
    ...limits,
  })

describe('open-loop cells', () => {
  test('each request records its scheduled time and its send lag from it; the plan records the schedule; goodput under the SLO', async () => {
    sim = await startSimServer({ model: 'm', decodeTokPerS: 400, prefillTokPerS: 50_000 })
    const arrival = { kind: 'poisson', ratePerS: 40, seed: 4 } as const
    const cell = {
      baseUrl: sim.url,
      model: 'm',
      requests: 40,
      maxTokens: 6,
      workload: { promptTokens: 32 },
      arrival,
      slo: { ttftMs: 1000, tpotMs: 1000 },
    }
    const record = RunRecord.parse(await runCell(cell))
    expect(record.completed).toBe(40)
    const schedule = arrivalSchedule({ ...arrival, rampUp: null, maxInFlight: null }, 40)
    expect(record.plan.arrival).toMatchObject({ kind: 'poisson', ratePerS: 40, seed: 4, maxInFlight: null })
    expect(record.plan.arrival?.scheduledSpanMs).toBeCloseTo(schedule[39] as number, 9)
    for (const r of record.requests) {
      expect(r.scheduledOffsetMs).toBeCloseTo(schedule[r.index] as number, 9)
      expect(r.queueDelayMs).toBe(0)
      expect(r.sendLagMs as number).toBeGreaterThanOrEqual(0)
      // Sent at the scheduled time plus the send lag, on the one monotonic clock.
      expect(r.startOffsetMs as number).toBeCloseTo((r.scheduledOffsetMs as number) + (r.sendLagMs as number), 6)
    }
    expect(record.metrics.openLoop?.cappedRequests).toBe(0)
    expect(record.metrics.distributions.sendLagMs.samples).toBe(40)
    expect(record.harness.sendLagP99Ms).toBe(record.metrics.distributions.sendLagMs.p99)
    expect(record.metrics.goodput).toMatchObject({
      samples: 40,
      good: 40,
      fraction: 1,
      missed: { ttftMs: 0, tpotMs: 0, e2eMs: 0, itlMs: 0, failed: 0 },
    })
    expect(record.plan.workload.floorMet).toBeNull()

    const again = await runCell(cell)
    expect(again.plan.arrival?.scheduleSha256).toBe(record.plan.arrival?.scheduleSha256)
    expect(again.plan.workload.requestStreamSha256).toBe(record.plan.workload.requestStreamSha256)
  })

  test('a client that cannot send on time is flagged harness-limited; one that can is not', async () => {
    // Bounds a busy shared machine's scheduling stalls stay under; the default 5 ms is tested below.
    const healthy = await measureCell(offline(100, 100, { sendLagLimitMs: 50, eventLoopDelayLimitMs: 100 }), instantTransport(0), 'fake')
    expect(healthy.harness.harnessLimited).toBe(false)
    expect(healthy.harness.sendLagP99Ms as number).toBeLessThan(50)
    // 8 ms of work per send at one request every 4 ms: each send is later than the one before.
    const limited = await measureCell(offline(250, 40), instantTransport(8), 'fake')
    expect(limited.harness.harnessLimited).toBe(true)
    // The busy client also saturates its core, which is flagged too.
    expect(limited.harness.reasons).toContainEqual(expect.stringMatching(/^send lag p99 \d+\.\d+ ms > 5 ms$/))
    const lags = limited.requests.map((r) => r.sendLagMs as number)
    expect(lags[39] as number).toBeGreaterThan(100)
  })

  test('a trace replays its offsets and sizes; both arms get the same bytes and schedule', async () => {
    sim = await startSimServer({ model: 'm', decodeTokPerS: 1000, prefillTokPerS: 100_000 })
    const dir = await mkdtemp(join(tmpdir(), 'servegate-trace-cell-'))
    try {
      const path = join(dir, 'trace.jsonl')
      const rows = [
        [1000, 40, 3],
        [1050, 200, 5],
        [1050, 90, 2],
        [1400, 64, 4],
      ]
      await writeFile(path, rows.map(([t, i, o]) => JSON.stringify({ timestamp: t, input_length: i, output_length: o })).join('\n'))
      const cell = {
        baseUrl: sim.url,
        model: 'm',
        requests: 4,
        workload: { promptTokens: 32 },
        arrival: { kind: 'trace', path, timeScale: 0.5 },
      } as const
      const a = await runCell(cell)
      const b = await runCell(cell)
      expect(a.completed).toBe(4)
      expect(a.requests.map((r) => r.scheduledOffsetMs)).toEqual([0, 25, 25, 200])
      expect(a.requests.map((r) => r.completionTokens)).toEqual([3, 5, 2, 4])
      a.requests.forEach((r, i) => expect(Math.abs((r.promptTokens as number) - (rows[i]?.[1] as number))).toBeLessThanOrEqual(8))
      expect(a.plan.workload.calibration).toMatchObject({ method: 'engine-tokenizer', targetTokens: 99, outsideTolerance: 0 })
      expect(a.plan.arrival).toMatchObject({ kind: 'trace', trace: { rows: 4, replayed: 4, timeScale: 0.5 } })
      expect(b.plan.workload.requestStreamSha256).toBe(a.plan.workload.requestStreamSha256)
      expect(b.plan.arrival?.scheduleSha256).toBe(a.plan.arrival?.scheduleSha256)
    } finally {
      await rm(dir, { recursive: true, force: true })
    }
  })
})

/** The HTTP transport to an endpoint, each send `lagMs` late: a client that cannot keep its schedule, by a known amount. */
function lateTransport(o: ResolvedRunCellOptions, lagMs: number): CellTransport {
  const inner = httpTransport(o, parseBaseUrl(o.baseUrl).origin)
  return {
    send: async (body, capture, signal) => {
      await new Promise((resolve) => setTimeout(resolve, lagMs))
      return inner.send(body, capture, signal)
    },
    tokenizer: () => inner.tokenizer(),
    ...(inner.warm === undefined ? {} : { warm: (connections: number) => (inner.warm as (n: number) => Promise<void>)(connections) }),
    ...(inner.slice === undefined ? {} : { slice: inner.slice }),
    close: () => inner.close(),
  }
}

describe('an open-loop cell the harness could not keep up with (issue 33)', () => {
  // 4 req/s, 24 requests (6 s), p90 of TTFT: every send 80 ms late, far above the stalls of a busy
  // two-core machine (up to ~40 ms at a load of 5), so the first run is harness-limited by its send
  // lag alone and the run that applies the hint is not.
  test(
    'toMeetSLO names sendLagLimitMs and the requests that decide it; setting them decides the gate',
    { retry: 1, timeout: 60_000 },
    async () => {
      sim = await startSimServer({ model: 'm', decodeTokPerS: 400, prefillTokPerS: 50_000 })
      const cell = {
        baseUrl: sim.url,
        model: 'm',
        requests: 24,
        maxTokens: 8,
        workload: { promptTokens: 32 },
        arrival: { kind: 'constant', ratePerS: 4 },
      } as const
      const measure = async (options: object) => {
        const o = resolveCellOptions({ ...cell, ...options })
        const record = await measureCell(o, lateTransport(o, 80), 'sim')
        return { kind: 'cell', id: 'c4', record, records: [record] } as const
      }
      const slo = { ttftMs: 1000, percentile: 90 }
      const first = await measure({})
      expect(first.record.harness.exceeded).toContainEqual(expect.objectContaining({ option: 'sendLagLimitMs', limit: 5, thread: 'cell' }))
      const message = failureOf(() => expect(first).toMeetSLO(slo))
      expect(message).toMatch(/warning: not judged: the harness was the bottleneck \(send lag p99 \d+\.\d+ ms > 5 ms/)
      // 24 requests cannot show p90 at 98% even if all are good; 49 can.
      expect(message).toMatch(
        /\nto decide it, set sendLagLimitMs: \d+ \(the send lag p99 was \d+\.\d+ ms, over 5 ms; [^)]*\) and requests: 49 \(24 requests cannot show 90% good at 98% confidence even if every one is good/,
      )
      const hint = sloGate(first.record, slo).decideHint
      expect(hint?.set).toEqual({ sendLagLimitMs: expect.any(Number), requests: 49 })

      const second = await measure(hint?.set ?? {})
      expect(second.record.requests).toHaveLength(49)
      expect(second.record.harness.harnessLimited).toBe(false)
      expect(sloGate(second.record, slo).outcome).toBe('pass')
      expect(second).toMeetSLO(slo)
    },
  )
})
