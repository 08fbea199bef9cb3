import { setTimeout as sleep } from 'node:timers/promises'
import { Worker } from 'node:worker_threads'
import { describe, expect, test } from 'vitest'
import { holdThread } from '../../fixtures/event-loop.ts'
import { monoMs } from '../client/clock.ts'
import type { WorkerMeasure } from '../client/worker-protocol.ts'
import { CellLoadMeter, type MeasuredWorkers } from './cell-load-meter.ts'
import { resolveCellOptions } from './cell-options.ts'
import { type CpuTicks, HostSteal } from './host-steal.ts'

const options = resolveCellOptions({ baseUrl: 'http://127.0.0.1:1', model: 'm', requests: 1, workload: { promptTokens: 16 } })

/** A steal meter reading these ticks in turn, as `/proc/stat` would give them. */
function stealOf(...reads: CpuTicks[]): HostSteal {
  return new HostSteal(() => reads.shift() ?? null)
}

/** Two workers whose figures for a stage are `requests` each; counts the stages started. */
function fakeWorkers(): MeasuredWorkers & { started: number } {
  let stage = 0
  const measure = (worker: number): WorkerMeasure => ({
    worker,
    requests: stage,
    cpuMs: 1,
    wallMs: 10,
    eventLoopDelayP99Ms: worker + 1,
    eventLoopDelayMaxMs: worker + 2,
    handoffLagsMs: [0.1],
    readBatching: { pauses: worker + 1, pausedMs: (worker + 1) / 10, longestPauseMs: 0.2 + worker / 100 },
  })
  return {
    count: 2,
    started: 0,
    measureStart() {
      this.started++
    },
    measureStop: async () => {
      stage++
      return [measure(0), measure(1)]
    },
  }
}

describe('CellLoadMeter', () => {
  test('sums each stage, and none of the idle time between them', async () => {
    const meter = new CellLoadMeter(null, { steal: stealOf() })
    const began = monoMs()
    // The idle gap as the clock saw it: a timer may fire a fraction of a millisecond early.
    let idleMs = 0
    for (let stage = 0; stage < 2; stage++) {
      if (stage > 0) {
        const idleFrom = monoMs()
        await sleep(100)
        idleMs += monoMs() - idleFrom
      }
      meter.start()
      holdThread(15)
      // The loop turns while measured: its delay is sampled.
      await sleep(10)
      await meter.stop()
    }
    const elapsed = monoMs() - began
    // 2 × (15 ms held + a 10 ms timer), less what a timer may fire early.
    expect(meter.activeMs).toBeGreaterThanOrEqual(45)
    expect(idleMs).toBeGreaterThan(90)
    expect(meter.activeMs).toBeLessThanOrEqual(elapsed - idleMs)
    expect(meter.cpuMs).toBeGreaterThan(0)
    expect(meter.threadCpuMs).toBeGreaterThan(0)
    const health = meter.health(options, [1, 2])
    expect(health.clientCpuMs).toBe(meter.cpuMs)
    // In the cell's thread the share is the process's, over the stages' span only.
    expect(health.clientCpuShare).toBeCloseTo(meter.cpuMs / meter.activeMs, 9)
    expect(health.eventLoopDelayP99Ms).not.toBeNull()
    expect(health.sendLagP99Ms).toBe(2)
    expect(health).not.toHaveProperty('clientWorkers')
    // The steal meter could not read its ticks: unknown, not 0.
    expect(health.hostStealShare).toBeNull()
  })

  test("a closed loop's opening round is reported on its own; the verdict judges the sends after it", async () => {
    const meter = new CellLoadMeter(null, { steal: stealOf() })
    meter.start()
    await meter.stop()
    // 256 sends due at once go out over 11 ms; every later one within 1 ms of its slot freeing.
    const opening = Array.from({ length: 256 }, (_, i) => (i * 11) / 255)
    const later = Array.from({ length: 768 }, (_, i) => (i % 10) / 10)
    const idle = meter.health(options, [...opening, ...later], 256)
    expect(idle.openingSendLagMaxMs).toBe(11)
    // Over every request the opening round still shows: a quarter of them lag up to 11 ms.
    expect(idle.sendLagP99Ms).toBeGreaterThan(10)
    expect(idle.reasons.filter((r) => r.includes('send lag'))).toEqual([])
    // A client too slow to send each next request on time is flagged whatever its opening round.
    const slow = meter.health(options, [...opening, ...later.map((lag) => lag + 8)], 256)
    expect(slow.harnessLimited).toBe(true)
    expect(slow.reasons).toContainEqual(expect.stringMatching(/^send lag p99 after the opening round 8\.90 ms > 5 ms$/))
    // Without an opening round (an open loop) every send is judged, as before.
    const open = meter.health(options, [...opening, ...later], 0)
    expect(open.openingSendLagMaxMs).toBeNull()
    expect(open.reasons).toContainEqual(expect.stringMatching(/^send lag p99 1\d\.\d\d ms > 5 ms$/))
  })

  test('measures the workers each stage and judges each on its stages together', async () => {
    const workers = fakeWorkers()
    const meter = new CellLoadMeter(workers, { steal: stealOf() })
    for (let stage = 0; stage < 3; stage++) {
      meter.start()
      await meter.stop()
    }
    expect(workers.started).toBe(3)
    const health = meter.health(options, [])
    expect(health.clientWorkers).toBe(2)
    // Stages report 1, 2 and 3 requests each.
    expect(health.workers?.map((w) => [w.worker, w.requests, w.eventLoopDelayP99Ms])).toEqual([
      [0, 6, 1],
      [1, 6, 2],
    ])
    expect(health.workers?.[0]?.cpuShare).toBeCloseTo(3 / 30, 9)
    // Every worker's pauses, every stage's, summed; the longest is the longest of any. This thread
    // read no stream and took none.
    expect(health.readBatching?.pauses).toBe(3 * (1 + 2))
    expect(health.readBatching?.pausedMs).toBeCloseTo(3 * 0.3, 9)
    expect(health.readBatching?.longestPauseMs).toBeCloseTo(0.21, 9)
  })

  test("the host's steal is summed over the stages' ticks", async () => {
    const at = (total: number, steal: number): CpuTicks => ({ totalTicks: total, stealTicks: steal, busyTicks: steal })
    const meter = new CellLoadMeter(null, { steal: stealOf(at(0, 0), at(100, 1), at(1000, 50), at(1300, 53)) })
    for (let stage = 0; stage < 2; stage++) {
      meter.start()
      await meter.stop()
    }
    expect(meter.health(options, []).hostStealShare).toBeCloseTo((1 + 3) / (100 + 300), 9)
  })

  test("beside an in-process engine the client's CPU is the cell thread's: the engine's threads are not counted", async () => {
    // Another thread of this process burns CPU while the cell's thread waits, as an in-process
    // engine's compute threads do; the process's CPU time counts it, the cell thread's does not.
    const measureWith = async (engineInProcess: boolean) => {
      const meter = new CellLoadMeter(null, { engineInProcess, steal: stealOf() })
      meter.start()
      const engine = new Worker('const end = Date.now() + 150; while (Date.now() < end);', { eval: true })
      await new Promise((resolve) => engine.once('exit', resolve))
      await meter.stop()
      return { meter, health: meter.health(options, []) }
    }
    const inProcess = await measureWith(true)
    expect(inProcess.meter.cpuMs).toBeGreaterThan(100)
    expect(inProcess.health.clientCpuMs).toBe(inProcess.meter.threadCpuMs)
    expect(inProcess.health.clientCpuMs).toBeLessThan(inProcess.meter.cpuMs / 2)
    expect(inProcess.health.harnessLimited).toBe(false)
    const sameProcessClient = await measureWith(false)
    expect(sameProcessClient.health.clientCpuMs).toBe(sameProcessClient.meter.cpuMs)
    expect(sameProcessClient.health.clientCpuShare).toBeGreaterThan(0.5)
  })
})
