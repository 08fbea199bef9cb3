import { afterEach, describe, expect, test } from 'vitest'
import { distribution } from '../metrics/distribution.ts'
import { RunRecord } from '../schema/run.ts'
import { type SimServer, startSimServer } from '../sim/server.ts'
import type { SimOptions } from '../sim/sim-options.ts'
import { clientWorkerCount } from './client-workers.ts'
import { runCell } from './measure-cell.ts'
import { StagedPair } from './staged-pair.ts'

const sims: SimServer[] = []
afterEach(async () => {
  await Promise.all(sims.splice(0).map((s) => s.close()))
})

async function sim(options: SimOptions = {}): Promise<SimServer> {
  const s = await startSimServer({ model: 'm', prefillTokPerS: 50_000, decodeTokPerS: 400, seed: 7, ...options })
  sims.push(s)
  return s
}

describe('clientWorkerCount', () => {
  test("'auto' leaves the engine its cores and the cell's thread one, one worker per 32 streams", () => {
    // This machine's case: 2 cores, an engine on one: the client stays in the cell's thread.
    expect(clientWorkerCount('auto', 256, 1, 2)).toBe(0)
    expect(clientWorkerCount('auto', 1, 1, 3)).toBe(1)
    expect(clientWorkerCount('auto', 64, 1, 16)).toBe(2)
    expect(clientWorkerCount('auto', 2048, 10, 64)).toBe(16)
    expect(clientWorkerCount('auto', 2048, 10, 16)).toBe(5)
    expect(clientWorkerCount('auto', null, 1, 8)).toBe(6)
    expect(clientWorkerCount('auto', 64, 16, 16)).toBe(0)
    // Asked for, taken as given.
    expect(clientWorkerCount(3, 1, 1, 2)).toBe(3)
    expect(clientWorkerCount(0, 1024, 1, 64)).toBe(0)
  })
})

describe('a cell streamed on worker threads', () => {
  const cell = (baseUrl: string, clientWorkers: number) =>
    runCell({
      baseUrl,
      model: 'm',
      concurrency: 8,
      requests: 48,
      maxTokens: 24,
      workload: { promptTokens: 64, seed: 3 },
      clientWorkers,
    })

  test('1 and 2 workers send the same request stream as the cell thread, and measure agreeing distributions', async () => {
    const s = await sim()
    const inThread = await cell(s.url, 0)
    const one = await cell(s.url, 1)
    const two = await cell(s.url, 2)
    for (const record of [inThread, one, two]) {
      expect(RunRecord.parse(record)).toBeTruthy()
      expect(record.completed).toBe(48)
      expect(record.requests.map((r) => r.index)).toEqual(Array.from({ length: 48 }, (_, i) => i))
      expect(record.plan.workload.wireMatchesPlan).toBe(true)
      expect(record.requests.every((r) => r.completionTokens === 24 && r.itlMs?.length === 23)).toBe(true)
    }
    // The same bodies, in the same order, whoever streamed them.
    expect(one.plan.workload.requestStreamSha256).toBe(inThread.plan.workload.requestStreamSha256)
    expect(two.plan.workload.requestStreamSha256).toBe(inThread.plan.workload.requestStreamSha256)
    expect(two.plan.workload.wireStreamSha256).toBe(inThread.plan.workload.wireStreamSha256)
    expect(two.requests.map((r) => r.wireSha256)).toEqual(inThread.requests.map((r) => r.wireSha256))

    // Each worker's own figures; together they streamed every measured request.
    expect(inThread.harness.clientWorkers).toBeUndefined()
    expect(one.harness.clientWorkers).toBe(1)
    expect(two.harness.clientWorkers).toBe(2)
    expect(two.harness.workers?.map((w) => w.worker)).toEqual([0, 1])
    expect(two.harness.workers?.reduce((n, w) => n + w.requests, 0)).toBe(48)
    for (const w of two.harness.workers ?? []) {
      expect(w.requests).toBeGreaterThan(0)
      expect(w.handoffLagP99Ms).not.toBeNull()
      expect(w.cpuShare).toBeGreaterThan(0)
    }

    // The same engine, the same load: the TPOT and e2e medians agree with the cell thread's to within
    // 10% (TTFT, about 3 ms here, is left out: a scheduling jitter on a busy machine is a large share of it).
    const median = (r: typeof one, metric: 'tpotMs' | 'e2eMs') => distribution(r.requests.map((q) => q[metric] as number)).p50 as number
    for (const record of [one, two]) {
      for (const metric of ['tpotMs', 'e2eMs'] as const) {
        expect(median(record, metric) / median(inThread, metric)).toBeGreaterThan(0.9)
        expect(median(record, metric) / median(inThread, metric)).toBeLessThan(1.1)
      }
    }
  }, 60_000)

  test('the open loop sends on its schedule through the workers', async () => {
    const s = await sim()
    const record = await runCell({
      baseUrl: s.url,
      model: 'm',
      requests: 30,
      maxTokens: 8,
      workload: { promptTokens: 32 },
      arrival: { kind: 'poisson', ratePerS: 60, seed: 2, maxInFlight: 16 },
      clientWorkers: 2,
    })
    expect(record.completed).toBe(30)
    expect(record.harness.clientWorkers).toBe(2)
    expect(record.plan.workload.wireMatchesPlan).toBe(true)
    for (const r of record.requests) {
      expect(r.scheduledOffsetMs).not.toBeNull()
      // Sent at its scheduled time, not long after: the hand-off to a worker costs well under a few ms.
      expect(r.sendLagMs as number).toBeLessThan(50)
    }
  }, 60_000)

  test('a staged pair on workers takes turns and stops at the deciding look', async () => {
    const slow = await sim({ decodeTokPerS: 250 })
    const fast = await sim({ decodeTokPerS: 500 })
    const staged = new StagedPair({ looks: [16, 32], gates: [{ gate: 'toWinDecode', margin: 0.05 }] }, 48)
    const arm = async (which: 'baseline' | 'candidate', s: SimServer) => {
      try {
        return await runCell(
          { baseUrl: s.url, model: 'm', concurrency: 4, requests: 48, maxTokens: 16, workload: { promptTokens: 32 }, clientWorkers: 2 },
          { stages: staged.stagesFor(which) },
        )
      } finally {
        staged.leave(which)
      }
    }
    const [baseline, candidate] = await Promise.all([arm('baseline', slow), arm('candidate', fast)])
    expect(staged.plan().stoppedAt).toBe(16)
    expect(baseline.requests).toHaveLength(16)
    expect(candidate.requests).toHaveLength(16)
    expect(candidate.harness.clientWorkers).toBe(2)
    expect(candidate.harness.workers?.reduce((n, w) => n + w.requests, 0)).toBe(16)
  }, 60_000)

  test('cancelled mid-cell, the workers abort what is in flight and the rest is unsent', async () => {
    const s = await sim({ decodeTokPerS: 50 })
    const stop = new AbortController()
    const record = await runCell(
      {
        baseUrl: s.url,
        model: 'm',
        concurrency: 4,
        requests: 400,
        maxTokens: 32,
        workload: { promptTokens: 32 },
        calibrate: false,
        clientWorkers: 2,
      },
      { signal: stop.signal, onProgress: (p) => p.done === 8 && stop.abort() },
    )
    // No slot takes another request once aborted; the (at most four) still streaming end in their
    // workers, completed if their last chunk was already on its way, else aborted.
    expect(record.completed).toBeGreaterThanOrEqual(8)
    expect(record.completed + (record.failed as number)).toBeLessThanOrEqual(12)
    expect(Object.keys(record.failures).filter((code) => code !== 'REQUEST_ABORTED')).toEqual([])
    expect(record.completed + (record.failed as number) + record.unsent).toBe(400)
    expect(record.unsent).toBeGreaterThanOrEqual(388)
  }, 60_000)
})
