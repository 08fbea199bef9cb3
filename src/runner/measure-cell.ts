import { monitorEventLoopDelay } from 'node:perf_hooks'
import type { StreamObservation } from '../client/stream.ts'
import { sanitizeMessage, ServegateError } from '../errors.ts'
import { planArrivals, type ArrivalSchedule } from '../load/plan.ts'
import { computeCellMetrics } from '../metrics/cell-metrics.ts'
import { parseBaseUrl } from '../loopback.ts'
import type { OpenLoopStats } from '../schema/load.ts'
import type { CellProgress, PhaseListener } from '../schema/progress.ts'
import type { ErrorInfo, RequestRecord, RunRecord } from '../schema/run.ts'
import { bodyBytes, requestStreamSha256, stripModel } from '../workload/bytes.ts'
import { type PreparedRequest, preparedFor } from '../workload/prepare.ts'
import { type CellOptions, type ResolvedCellOptions, resolveCellOptions } from './cell-options.ts'
import { type CellTransport, connectionsToWarm, httpTransport } from './cell-transport.ts'
import { closedLoop, openLoop, type Slot } from './dispatch.ts'
import { type Clock, systemClock } from './environment.ts'
import { probeEndpoint } from './probe.ts'
import { assembleRecord, busySpanMs, cellPlan, harnessHealth, requestRecord } from './run-record.ts'
import { warmClientJit } from './warm.ts'

export type { CellProgress } from '../schema/progress.ts'

export interface RunCellHooks {
  /** Called after each measured request ends. */
  onProgress?: (progress: CellProgress) => void
  /**
   * Called as the cell changes phase: calibrating, warm-up (each request), the measured requests
   * (at each stage's start and after each request), and a sequential arm's wait for its turn.
   */
  onPhase?: PhaseListener
  /** Cancels the cell: requests in flight fail as REQUEST_ABORTED, the record is still returned. */
  signal?: AbortSignal
  /**
   * The engine being measured, when servegate launched it: if it exits mid-cell, the requests in
   * flight and those not sent fail, and the record's `cellFailure` says why (exit code, log tail).
   */
  engine?: { exited: Promise<unknown>; failure(): ErrorInfo | null }
  /** Called after warm-up, right before the measured requests (telemetry marks its idle baseline's end). */
  onMeasureStart?: () => void | Promise<void>
  /** Measure in stages, taking turns with another cell (one arm of a sequential pair). */
  stages?: CellStages
  /** The wall clock of the record's times. @default the system clock */
  clock?: Clock
}

/**
 * A cell measured in stages, each a block of the plan's requests in order. Before each stage it
 * waits for its turn (stage 0's turn comes before calibration and warm-up, so nothing of this
 * cell overlaps the other arm's stages) and may be told to stop there. Idle time between stages
 * counts in neither the wall clock nor the harness figures.
 */
export interface CellStages {
  /** Ascending request counts ending each stage; requests past the plan's count are ignored. */
  ends: readonly number[]
  /** Resolves when the stage may run: true to run it, false to stop before it (the first stage always runs). */
  turn(stage: number): Promise<boolean>
  /** A stage ended: every record so far, in plan order; `broken` when the cell cannot go on (engine gone, aborted). */
  done(stage: number, records: readonly RequestRecord[], broken: boolean): void
  /** The cell threw: release whoever waits on it. */
  abandon(): void
}

/**
 * Measures one closed-loop cell: optional warm-up, then N requests at concurrency C against
 * an OpenAI-compatible endpoint, and returns its run record. Request failures never stop
 * the cell; they are counted by code. Throws only before any load is sent: bad options
 * (CONFIG_INVALID) or an unreachable endpoint (CONNECT_FAILED).
 */
export async function runCell(input: CellOptions, hooks: RunCellHooks = {}): Promise<RunRecord> {
  const o = resolveCellOptions(input)
  const { origin, display } = parseBaseUrl(o.baseUrl)
  await probeEndpoint(origin, o.model, hooks.signal)
  return measureCell(o, httpTransport(o, origin), display, hooks)
}

/** The measured requests, closed loop at the concurrency or open loop on the schedule; the open loop's own stats. */
async function measuredPhase(
  o: ResolvedCellOptions,
  count: number,
  arrivals: ArrivalSchedule | null,
  startAt: number,
  signal: AbortSignal,
  send: (index: number) => Promise<StreamObservation>,
  onDone: (slot: Slot) => void,
): Promise<OpenLoopStats | null> {
  if (arrivals === null) {
    await closedLoop(count, o.concurrency, send, onDone)
    return null
  }
  return openLoop({ offsetsMs: arrivals.offsetsMs, maxInFlight: arrivals.plan.maxInFlight, startAt, signal }, send, onDone)
}

/** The measuring core shared by every transport; closes the transport when done. */
export async function measureCell(
  o: ResolvedCellOptions,
  transport: CellTransport,
  target: string,
  hooks: RunCellHooks = {},
): Promise<RunRecord> {
  const stop = new AbortController()
  const signal = hooks.signal === undefined ? stop.signal : AbortSignal.any([hooks.signal, stop.signal])
  void hooks.engine?.exited.then(() => {
    if (hooks.engine?.failure() !== null) stop.abort()
  })
  const stages = hooks.stages ?? null
  const phase = hooks.onPhase
  // A sequential arm says it waits before each stage's turn.
  const turn = (s: CellStages, stage: number): Promise<boolean> => {
    phase?.({ phase: 'turn', stage: stage + 1, stages: s.ends.length })
    return s.turn(stage)
  }
  try {
    if (stages !== null) await turn(stages, 0)
    const send =
      (bodies: Buffer[], captureChars: number, offset = 0) =>
      (index: number) =>
        transport.send(bodies[offset + index] as Buffer, captureChars, signal)
    // Drawn (or read) before anything is sent: a trace also sizes the requests.
    const arrivals = o.arrival === null ? null : await planArrivals(o.arrival, o.requests)
    const workload = await preparedFor(
      o.workload,
      { api: o.api, maxTokens: o.maxTokens, requests: o.requests, warmupRequests: o.warmupRequests, sizes: arrivals?.sizes ?? null },
      async () => {
        if (!o.calibrate) return null
        phase?.({ phase: 'calibrating' })
        return transport.tokenizer()
      },
    )
    const captureChars = workload.spec.canaries || workload.spec.kind === 'dataset' ? workload.spec.captureChars : 0
    const measuredBytes = workload.measured.map((r) => bodyBytes(o.model, r.body))
    const warmupBytes = workload.warmup.map((r) => bodyBytes(o.model, r.body))

    const clock = hooks.clock ?? systemClock
    const startedAt = clock.date()
    const slots: Slot[] = []
    let ok = 0
    let failed = 0
    warmClientJit()
    if (warmupBytes.length > 0) {
      let warmed = 0
      const total = warmupBytes.length
      phase?.({ phase: 'warmup', done: 0, total })
      await closedLoop(total, o.concurrency, send(warmupBytes, captureChars), () => phase?.({ phase: 'warmup', done: ++warmed, total }))
    }
    await transport.warm?.(connectionsToWarm(o))

    await hooks.onMeasureStart?.()
    const loopDelay = monitorEventLoopDelay({ resolution: 2 })
    const ends = stages?.ends ?? [measuredBytes.length]
    let cpuMs = 0
    let activeMs = 0
    let wallClockMs = 0
    let sent = 0
    const cellStart = performance.now()
    let openLoopStats: OpenLoopStats | null = null
    for (let stage = 0; stage < ends.length; stage++) {
      if (stage > 0 && (stages === null || !(await turn(stages, stage)))) break
      const end = Math.min(ends[stage] as number, measuredBytes.length)
      const offset = sent
      const before = slots.length
      const stageOf = stages === null ? null : { index: stage + 1, of: ends.length }
      const requestsPhase = (): void => {
        phase?.({
          phase: 'requests',
          done: slots.length,
          total: o.requests,
          ok,
          failed,
          elapsedMs: performance.now() - cellStart,
          stage: stageOf,
        })
      }
      requestsPhase()
      loopDelay.enable()
      const cpuBefore = process.cpuUsage()
      const stageStart = performance.now()
      const onDone = (slot: Slot): void => {
        slots.push({ ...slot, index: offset + slot.index })
        if (slot.obs.error === null) ok++
        else failed++
        hooks.onProgress?.({ done: slots.length, total: o.requests, ok, failed, elapsedMs: performance.now() - cellStart })
        requestsPhase()
      }
      openLoopStats = await measuredPhase(o, end - offset, arrivals, cellStart, signal, send(measuredBytes, captureChars, offset), onDone)
      activeMs += performance.now() - stageStart
      const cpu = process.cpuUsage(cpuBefore)
      cpuMs += (cpu.user + cpu.system) / 1000
      loopDelay.disable()
      wallClockMs += busySpanMs(slots.slice(before))
      sent = end
      if (stages !== null) {
        const records = slots
          .map((s) => requestRecord(s, cellStart, workload.measured[s.index] as PreparedRequest, workload))
          .sort((a, b) => a.index - b.index)
        stages.done(stage, records, signal.aborted || hooks.engine?.failure() != null)
      }
    }

    slots.sort((a, b) => a.index - b.index)
    const records = slots.map((s) => requestRecord(s, cellStart, workload.measured[s.index] as PreparedRequest, workload))
    const wireBodies = slots.map((s) => {
      const written = Buffer.concat(s.obs.sentChunks)
      return stripModel(o.model, written) ?? written
    })
    const wireStreamSha256 = requestStreamSha256(wireBodies)

    return assembleRecord({
      options: o,
      startedAt,
      finishedAt: clock.date(),
      target,
      plan: cellPlan(o, workload, wireStreamSha256, arrivals?.plan ?? null, sent),
      requests: records,
      metrics: { ...computeCellMetrics(records, wallClockMs, o.slo), openLoop: openLoopStats },
      harness: harnessHealth(o, cpuMs, activeMs, loopDelay, records),
      manifest: null,
      cellFailure: hooks.engine?.failure() ?? null,
    })
  } catch (err) {
    stages?.abandon()
    if (err instanceof ServegateError) throw err
    throw new ServegateError('INTERNAL', `cell failed unexpectedly: ${sanitizeMessage((err as Error).message)}`, { cause: err })
  } finally {
    await transport.close()
  }
}
