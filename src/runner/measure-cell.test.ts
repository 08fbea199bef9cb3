import { afterEach, describe, expect, test } from 'vitest'
import type { SimOptions } from '../sim/sim-options.ts'
import { type SimServer, startSimServer } from '../sim/server.ts'
import { RunRecord } from '../schema/run.ts'
import { runCell } from './measure-cell.ts'

let sim: SimServer | null = null
afterEach(async () => {
  await sim?.close()
  sim = null
})

async function start(options: SimOptions = {}): Promise<SimServer> {
  sim = await startSimServer({ model: 'm', prefillTokPerS: 50_000, decodeTokPerS: 400, ...options })
  return sim
}

describe('runCell against the simulated engine', () => {
  test('measures every request of a closed-loop cell and keeps C streams in flight', async () => {
    const s = await start({ reasoningTokens: 4, tokensPerChunk: 2 })
    const record = await runCell({ baseUrl: s.url, model: 'm', concurrency: 3, requests: 9, maxTokens: 12, workload: { promptTokens: 64 } })
    expect(RunRecord.parse(record)).toBeTruthy()
    expect(record.completed).toBe(9)
    expect(record.failed).toBe(0)
    expect(record.requests.map((r) => r.index)).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8])
    expect(s.stats().maxActive).toBe(3)
    for (const r of record.requests) {
      expect(r.status).toBe('ok')
      expect(r.completionTokens).toBe(12)
      expect(r.completionTokenSource).toBe('usage')
      // Calibrated with the sim's own /tokenize (template included): within ±8 tokens, and the
      // engine's usage agrees with the planning-time count exactly.
      expect(Math.abs((r.promptTokens as number) - 64)).toBeLessThanOrEqual(8)
      expect(r.promptTokens).toBe(r.plannedPromptTokens)
      // Reasoning comes first, so the first content arrives after the first output.
      expect(r.ttftMs as number).toBeGreaterThan(r.timeToFirstOutputMs as number)
      expect(r.reasoningChunks).toBe(2)
      expect(r.contentChunks).toBe(4)
      expect(r.itlMs).toHaveLength(5)
      expect(r.generationMs).toBeCloseTo((r.e2eMs as number) - (r.timeToFirstOutputMs as number), 9)
      expect(r.decodeTokPerS).toBeCloseTo(11 / ((r.generationMs as number) / 1000), 6)
    }
    const m = record.metrics
    expect(m.distributions.ttftMs.samples).toBe(9)
    expect(m.totalCompletionTokens).toBe(108)
    expect(m.outputThroughputTokPerS).toBeCloseTo(108 / ((m.wallClockMs as number) / 1000), 9)
    expect(m.p99DescriptiveOnly).toContain('e2eMs')
    expect(record.plan.workload.requestStreamSha256).toMatch(/^[0-9a-f]{64}$/)
    expect(record.plan.workload.wireStreamSha256).toBe(record.plan.workload.requestStreamSha256)
    expect(record.plan.workload.wireMatchesPlan).toBe(true)
    expect(record.plan.workload.calibration?.method).toBe('engine-tokenizer')
    expect(record.harness.clientCpuShare).not.toBeNull()
    // The reading thread's pauses are counted whether or not it took any.
    expect(record.harness.readBatching).toEqual({
      pauses: expect.any(Number),
      pausedMs: expect.any(Number),
      longestPauseMs: expect.any(Number),
    })
    // Read from /proc/stat over the measured phase on Linux; a share, never a count of ticks.
    if (process.platform === 'linux') {
      expect(record.harness.hostStealShare).toBeGreaterThanOrEqual(0)
      expect(record.harness.hostStealShare).toBeLessThanOrEqual(1)
    }
  })

  test('decode timing follows the engine: tpot near 1000/decodeTokPerS at C=1', async () => {
    const s = await start({ decodeTokPerS: 100 })
    const record = await runCell({ baseUrl: s.url, model: 'm', requests: 3, maxTokens: 30, workload: { promptTokens: 32 } })
    const tpot = record.metrics.distributions.tpotMs.p50 as number
    expect(tpot).toBeGreaterThan(8)
    expect(tpot).toBeLessThan(20)
  })

  test('every fault becomes a failed request with its code; the cell goes on; failures enter no distribution', async () => {
    const s = await start({
      faults: [
        { kind: 'http500', requests: [1] },
        { kind: 'http429', requests: [2] },
        { kind: 'drop', requests: [3] },
        { kind: 'malformed', requests: [4] },
        { kind: 'stall', requests: [5] },
        { kind: 'empty', requests: [6] },
      ],
    })
    const record = await runCell({
      baseUrl: s.url,
      model: 'm',
      requests: 8,
      maxTokens: 16,
      workload: { promptTokens: 32 },
      requestTimeoutMs: 1500,
    })
    const codes = record.requests.map((r) => (r.status === 'failed' ? r.error.code : 'ok'))
    expect(codes).toEqual([
      'ok',
      'HTTP_STATUS',
      'HTTP_RATE_LIMITED',
      'STREAM_DROPPED',
      'STREAM_PROTOCOL',
      'REQUEST_DEADLINE',
      'EMPTY_COMPLETION',
      'ok',
    ])
    expect(record.completed).toBe(2)
    expect(record.failed).toBe(6)
    expect(record.failures).toEqual({
      HTTP_STATUS: 1,
      HTTP_RATE_LIMITED: 1,
      STREAM_DROPPED: 1,
      STREAM_PROTOCOL: 1,
      REQUEST_DEADLINE: 1,
      EMPTY_COMPLETION: 1,
    })
    for (const name of ['ttftMs', 'e2eMs', 'decodeTokPerS', 'completionTokens'] as const) {
      expect(record.metrics.distributions[name].samples).toBe(2)
    }
    const [, http500, http429, drop, malformed, stall] = record.requests
    expect(http500?.status === 'failed' && http500.error.httpStatus).toBe(500)
    expect(http429?.status === 'failed' && http429.error.retryAfterS).toBe(2)
    // Partial timings are kept: the dropped and stalled streams had output before they broke.
    expect(drop?.timeToFirstOutputMs).not.toBeNull()
    expect(malformed?.timeToFirstOutputMs).not.toBeNull()
    expect(stall?.e2eMs as number).toBeGreaterThanOrEqual(1400)
  })

  test('an abort fails the requests in flight, sends no more (counted as unsent) and still returns the record', async () => {
    const s = await start({ decodeTokPerS: 20 })
    const controller = new AbortController()
    setTimeout(() => controller.abort(), 300)
    const record = await runCell(
      { baseUrl: s.url, model: 'm', requests: 4, concurrency: 2, maxTokens: 100, workload: { promptTokens: 32 } },
      { signal: controller.signal },
    )
    expect(record.requests.map((r) => r.index)).toEqual([0, 1])
    expect(record.failures.REQUEST_ABORTED).toBe(2)
    expect(record.unsent).toBe(2)
    await expect.poll(() => s.stats().active).toBe(0)
  })

  test('aborting a huge cell records only what was in flight: a million planned requests cost nothing', async () => {
    const s = await start({ decodeTokPerS: 20 })
    const controller = new AbortController()
    setTimeout(() => controller.abort(), 300)
    const record = await runCell(
      { baseUrl: s.url, model: 'm', requests: 1_000_000, concurrency: 4, maxTokens: 100, calibrate: false, workload: { promptTokens: 32 } },
      { signal: controller.signal },
    )
    expect(record.requests).toHaveLength(4)
    expect(record.unsent).toBe(1_000_000 - 4)
    expect(record.completed + (record.failed as number) + record.unsent).toBe(1_000_000)
  })

  test('open loop: an abort sends nothing more, even what waited for the cap', async () => {
    const s = await start({ decodeTokPerS: 20 })
    const controller = new AbortController()
    setTimeout(() => controller.abort(), 400)
    const record = await runCell(
      {
        baseUrl: s.url,
        model: 'm',
        requests: 200,
        maxTokens: 100,
        calibrate: false,
        workload: { promptTokens: 32 },
        arrival: { kind: 'constant', ratePerS: 20, maxInFlight: 3 },
      },
      { signal: controller.signal },
    )
    expect(record.requests.length).toBeLessThanOrEqual(3)
    expect(record.requests.every((r) => r.status === 'failed' && r.error.code === 'REQUEST_ABORTED')).toBe(true)
    expect(record.completed + (record.failed as number) + record.unsent).toBe(200)
    await expect.poll(() => s.stats().active).toBe(0)
  })

  test('the API key is sent but never recorded', async () => {
    const s = await start()
    const record = await runCell({
      baseUrl: `${s.url}/v1`,
      model: 'm',
      requests: 1,
      maxTokens: 4,
      workload: { promptTokens: 16 },
      apiKey: 'sk-test-secret-123456',
    })
    expect(record.completed).toBe(1)
    expect(JSON.stringify(record)).not.toContain('sk-test-secret')
  })

  test('the same plan gives the same request stream hash; another seed another', async () => {
    const s = await start()
    const plan = { baseUrl: s.url, model: 'm', requests: 2, maxTokens: 2, workload: { promptTokens: 16 } }
    const a = await runCell(plan)
    const b = await runCell(plan)
    const c = await runCell({ ...plan, workload: { promptTokens: 16, seed: 5 } })
    expect(a.plan.workload.requestStreamSha256).toBe(b.plan.workload.requestStreamSha256)
    expect(c.plan.workload.requestStreamSha256).not.toBe(a.plan.workload.requestStreamSha256)
  })

  test('the measured phase starts with its connections open: none is opened while measuring', async () => {
    const s = await start({ decodeTokPerS: 10_000 })
    let atMeasureStart = -1
    let atLastEnd = -1
    const record = await runCell(
      { baseUrl: s.url, model: 'm', concurrency: 8, requests: 16, maxTokens: 4, workload: { promptTokens: 16 }, calibrate: false },
      {
        onMeasureStart: () => void (atMeasureStart = s.stats().connectionsAccepted),
        onProgress: (p) => void (p.done === p.total && (atLastEnd = s.stats().connectionsAccepted)),
      },
    )
    expect(record.completed).toBe(16)
    // The probe's and the warm-up's connections, the eight the loop streams over among them; the
    // sim answers a GET at once, so a warm-up that let one GET's connection carry the next opened fewer.
    expect(atMeasureStart).toBeGreaterThanOrEqual(8)
    expect(atLastEnd).toBe(atMeasureStart)
    // The tokenizer counts the streamed replies only after the last one ended.
    expect(record.requests.every((r) => r.usageRule === 'tokenizer')).toBe(true)
  })

  test('warm-up requests run first and are not recorded', async () => {
    const s = await start()
    const record = await runCell({
      baseUrl: s.url,
      model: 'm',
      requests: 3,
      warmupRequests: 2,
      maxTokens: 2,
      workload: { promptTokens: 16 },
    })
    expect(s.stats().requests).toBe(5)
    expect(record.requests).toHaveLength(3)
    expect(record.plan.warmupRequests).toBe(2)
  })

  test('a cell where the client is the bottleneck is flagged harness-limited with its reason', async () => {
    const s = await start()
    const plan = { baseUrl: s.url, model: 'm', requests: 2, maxTokens: 4, workload: { promptTokens: 16 } }
    const healthy = await runCell(plan)
    expect(healthy.harness.harnessLimited).toBe(false)
    expect(healthy.harness.reasons).toEqual([])
    // A CPU-share bound no client can stay under stands in for a saturated client.
    const limited = await runCell({ ...plan, cpuShareLimit: 1e-9 })
    expect(limited.harness.harnessLimited).toBe(true)
    expect(limited.harness.reasons[0]).toMatch(/^client CPU share \d+\.\d+ ≥ 1e-9/)
  })

  test('the completions API streams text', async () => {
    const s = await start()
    const record = await runCell({
      baseUrl: s.url,
      model: 'm',
      api: 'completions',
      requests: 2,
      maxTokens: 5,
      workload: { promptTokens: 16 },
    })
    expect(record.completed).toBe(2)
    expect(record.requests[0]?.contentChunks).toBe(5)
  })
})

describe('runCell refuses before sending load', () => {
  test('an unreachable endpoint', async () => {
    await expect(runCell({ baseUrl: 'http://127.0.0.1:9', model: 'm' })).rejects.toThrow(
      /cannot reach http:\/\/127\.0\.0\.1:9 \(connection refused\); start the engine there or fix --base-url/,
    )
  })

  test('a non-loopback host', async () => {
    await expect(runCell({ baseUrl: 'http://10.0.0.5:8000', model: 'm' })).rejects.toMatchObject({ code: 'CONFIG_INVALID' })
  })

  test('a model the server does not serve', async () => {
    const s = await start()
    await expect(runCell({ baseUrl: s.url, model: 'other' })).rejects.toThrow(
      /model "other" is not served .* \(it serves: m\); fix --model/,
    )
  })

  test('bad options name the field', async () => {
    await expect(runCell({ baseUrl: 'http://127.0.0.1:1', model: 'm', concurrency: 0 })).rejects.toThrow(/concurrency/)
  })
})
