import { monitorEventLoopDelay } from 'node:perf_hooks'
import type { StreamObservation } from '../client/stream.ts'
import { sanitizeMessage, ServegateError } from '../errors.ts'
import { planArrivals, type ArrivalSchedule } from '../load/plan.ts'
import { CellTally } from '../metrics/cell-metrics.ts'
import { parseBaseUrl } from '../loopback.ts'
import type { RequestSpill } from '../record/request-spill.ts'
import type { OpenLoopStats } from '../schema/load.ts'
import type { CellProgress, PhaseListener } from '../schema/progress.ts'
import type { ErrorInfo, RequestRecord, RunRecord } from '../schema/run.ts'
import { type PlannedRequest, preparedFor } from '../workload/prepare.ts'
import { BodyFeed, WireHash } from './body-feed.ts'
import { type CellOptions, type ResolvedCellOptions, resolveCellOptions } from './cell-options.ts'
import type { WorkerMeasure } from '../client/worker-protocol.ts'
import { type CellTransport, connectionsToWarm, httpTransport } from './cell-transport.ts'
import { closedLoop, openLoop, type Slot } from './dispatch.ts'
import { type Clock, systemClock } from './environment.ts'
import { checkContextFits, contextLimit, OPTION_NAMES } from './context-limit.ts'
import { probeEndpoint } from './probe.ts'
import { HostSteal } from './host-steal.ts'
import { assembleRecord, cellPlan, harnessHealth, requestRecord } from './run-record.ts'
import { warmClientJit } from './warm.ts'
import { monoMs } from '../client/clock.ts'
import { TurnSlice } from '../client/turn-slice.ts'

export type { CellProgress } from '../schema/progress.ts'

export interface RunCellHooks {
  /** Called after each measured request ends. */
  onProgress?: (progress: CellProgress) => void
  /**
   * Called as the cell changes phase: calibrating, warm-up (each request), the measured requests
   * (at each stage's start and after each request), and a sequential arm's wait for its turn.
   */
  onPhase?: PhaseListener
  /**
   * Cancels the cell: requests in flight fail as REQUEST_ABORTED, the rest are not sent (counted
   * as `unsent`), and the record is still returned.
   */
  signal?: AbortSignal
  /**
   * The engine being measured, when servegate launched it: if it exits mid-cell, the requests in
   * flight fail, those not sent are counted as `unsent`, and the record's `cellFailure` says why
   * (exit code, log tail).
   */
  engine?: { exited: Promise<unknown>; failure(): ErrorInfo | null }
  /** The CPU cores the engine takes on this machine, left to it by the client's worker threads (`clientWorkers: 'auto'`). @default 1 */
  engineCores?: number
  /** Called after warm-up, right before the measured requests (telemetry marks its idle baseline's end). */
  onMeasureStart?: () => void | Promise<void>
  /** Measure in stages, taking turns with another cell (one arm of a sequential pair). */
  stages?: CellStages
  /** The wall clock of the record's times. @default the system clock */
  clock?: Clock
  /**
   * Keep each finished request on disk, not in memory (a long cell's memory stays flat): the
   * returned record's `requests` is then empty, its counts and metrics cover every request, and
   * `writeSpilledRecord` writes the record with them. Not with `stages` (a sequential arm judges
   * its records between stages).
   */
  spill?: RequestSpill
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
 * the cell; they are counted by code. Throws only before any load is sent: bad options, or sizes
 * the served model's context cannot hold (CONFIG_INVALID), or an unreachable endpoint (CONNECT_FAILED).
 */
export async function runCell(input: CellOptions, hooks: RunCellHooks = {}): Promise<RunRecord> {
  const o = resolveCellOptions(input)
  const { origin, display } = parseBaseUrl(o.baseUrl)
  await probeEndpoint(origin, o.model, hooks.signal)
  // Sizes the served model cannot hold fail here, before any load: the engine would refuse them all.
  const limit = await contextLimit(origin, o.model)
  if (limit !== null) {
    const fromRows = o.workload.kind === 'dataset' || o.arrival?.kind === 'trace'
    checkContextFits(limit, o.maxTokens, fromRows ? null : o.workload.promptTokens, OPTION_NAMES)
  }
  return measureCell(o, httpTransport(o, origin, hooks.engineCores), display, hooks)
}

/**
 * The measured requests, closed loop at the concurrency or open loop on the schedule; the open loop's own stats.
 * @param slice the turn slices a closed loop starts its next requests in
 */
async function measuredPhase(
  o: ResolvedCellOptions,
  count: number,
  arrivals: ArrivalSchedule | null,
  startAt: number,
  signal: AbortSignal,
  send: (index: number) => Promise<StreamObservation>,
  onDone: (slot: Slot) => void,
  slice: TurnSlice,
): Promise<OpenLoopStats | null> {
  if (arrivals === null) {
    await closedLoop(count, o.concurrency, send, onDone, signal, slice)
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
  const spill = hooks.spill ?? null
  if (spill !== null && stages !== null) throw new ServegateError('INTERNAL', 'a staged cell cannot spill its requests')
  const phase = hooks.onPhase
  // A sequential arm says it waits before each stage's turn.
  const turn = (s: CellStages, stage: number): Promise<boolean> => {
    phase?.({ phase: 'turn', stage: stage + 1, stages: s.ends.length })
    return s.turn(stage)
  }
  const feeds: BodyFeed[] = []
  try {
    if (stages !== null) await turn(stages, 0)
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
      signal,
    )
    const captureChars = workload.spec.canaries || workload.spec.kind === 'dataset' ? workload.spec.captureChars : 0
    // Bodies are built as they are sent, a bounded look-ahead in front, never all at once.
    const measuredFeed = new BodyFeed(workload, o.model, 0, workload.measuredCount, signal)
    const warmupFeed = new BodyFeed(workload, o.model, workload.measuredCount, workload.measuredCount + workload.warmupCount, signal)
    feeds.push(measuredFeed, warmupFeed)
    // Each request's plan waits here only while it is in flight.
    const inFlight = new Map<number, PlannedRequest>()
    const send =
      (feed: BodyFeed, base: number, track: boolean) =>
      (index: number): Promise<StreamObservation> => {
        const fed = feed.take(base + index)
        if (track) inFlight.set(base + index, fed.planned)
        return transport.send(fed.bytes, captureChars, signal)
      }

    const clock = hooks.clock ?? systemClock
    const startedAt = clock.date()
    // One record per ended request, made as it ends: the observation (chunks written, content,
    // chunk times) is dropped then; only the record (in memory, or spilled to disk) and the
    // running hashes stay.
    const records: RequestRecord[] = []
    const wire = new WireHash()
    let ok = 0
    let failed = 0
    let done = 0
    warmClientJit()
    // Where the cell's thread reads the chunks itself, a closed loop starts its next requests in
    // the slices its sends go out in, the reads in between; elsewhere it has none to keep waiting.
    const loopSlice = transport.slice ?? new TurnSlice(Infinity)
    if (workload.warmupCount > 0) {
      let warmed = 0
      const total = workload.warmupCount
      phase?.({ phase: 'warmup', done: 0, total })
      await closedLoop(
        total,
        o.concurrency,
        send(warmupFeed, workload.measuredCount, false),
        () => phase?.({ phase: 'warmup', done: ++warmed, total }),
        signal,
        loopSlice,
      )
    }
    warmupFeed.close()
    await transport.warm?.(connectionsToWarm(o))

    await hooks.onMeasureStart?.()
    const loopDelay = monitorEventLoopDelay({ resolution: 2 })
    const steal = new HostSteal()
    const ends = stages?.ends ?? [workload.measuredCount]
    let cpuMs = 0
    let threadCpuMs = 0
    const workerMeasures: WorkerMeasure[][] = []
    let activeMs = 0
    let wallClockMs = 0
    let sent = 0
    const cellStart = monoMs()
    let openLoopStats: OpenLoopStats | null = null
    for (let stage = 0; stage < ends.length; stage++) {
      if (stage > 0 && (stages === null || !(await turn(stages, stage)))) break
      const end = Math.min(ends[stage] as number, workload.measuredCount)
      const offset = sent
      const stageOf = stages === null ? null : { index: stage + 1, of: ends.length }
      const requestsPhase = (): void => {
        phase?.({
          phase: 'requests',
          done,
          total: o.requests,
          ok,
          failed,
          elapsedMs: monoMs() - cellStart,
          stage: stageOf,
        })
      }
      requestsPhase()
      loopDelay.enable()
      steal.start()
      transport.workers?.measureStart()
      const cpuBefore = process.cpuUsage()
      const threadCpuBefore = process.threadCpuUsage()
      const stageStart = monoMs()
      // The stage's busy span, from its first send to its last end, kept as requests end.
      let firstSend = Infinity
      let lastEnd = -Infinity
      const onDone = (slot: Slot): void => {
        const index = offset + slot.index
        const { obs } = slot
        firstSend = Math.min(firstSend, obs.sentAt)
        lastEnd = Math.max(lastEnd, obs.endAt ?? obs.sentAt)
        const planned = inFlight.get(index) ?? workload.planned(index)
        inFlight.delete(index)
        const record = requestRecord({ ...slot, index }, cellStart, planned, workload)
        if (spill === null) records.push(record)
        else spill.add(record)
        wire.add(index, obs.sent)
        if (obs.error === null) ok++
        else failed++
        done++
        hooks.onProgress?.({ done, total: o.requests, ok, failed, elapsedMs: monoMs() - cellStart })
        requestsPhase()
      }
      openLoopStats = await measuredPhase(o, end - offset, arrivals, cellStart, signal, send(measuredFeed, offset, true), onDone, loopSlice)
      activeMs += monoMs() - stageStart
      const cpu = process.cpuUsage(cpuBefore)
      const threadCpu = process.threadCpuUsage(threadCpuBefore)
      cpuMs += (cpu.user + cpu.system) / 1000
      threadCpuMs += (threadCpu.user + threadCpu.system) / 1000
      loopDelay.disable()
      steal.stop()
      if (transport.workers !== undefined) workerMeasures.push(await transport.workers.measureStop())
      wallClockMs += Math.max(0, lastEnd - firstSend)
      sent = end
      records.sort((a, b) => a.index - b.index)
      if (stages !== null) stages.done(stage, records.slice(), signal.aborted || hooks.engine?.failure() != null)
    }
    measuredFeed.close()

    // The figures from one pass over every request, in plan order (read back when spilled).
    const tally = new CellTally(o.slo)
    if (spill === null) for (const r of records) tally.add(r)
    else for await (const r of spill.inOrder()) tally.add(r)
    return assembleRecord({
      options: o,
      startedAt,
      finishedAt: clock.date(),
      target,
      plan: cellPlan(o, workload, measuredFeed.requestStreamSha256, wire.digest(), arrivals?.plan ?? null, sent),
      requests: records,
      counts: tally,
      // Requests due that were never sent: the cell was cut short (an abort, the engine gone).
      unsent: sent - done,
      metrics: { ...tally.metrics(wallClockMs), openLoop: openLoopStats },
      harness: harnessHealth(
        o,
        cpuMs,
        activeMs,
        loopDelay,
        tally.sendLags,
        {
          count: transport.workers?.count ?? 0,
          cellThreadCpuMs: threadCpuMs,
          measures: workerMeasures,
        },
        steal.share(),
      ),
      manifest: null,
      cellFailure: hooks.engine?.failure() ?? null,
    })
  } catch (err) {
    stages?.abandon()
    if (err instanceof ServegateError) throw err
    throw new ServegateError('INTERNAL', `cell failed unexpectedly: ${sanitizeMessage((err as Error).message)}`, { cause: err })
  } finally {
    for (const feed of feeds) feed.close()
    await transport.close()
  }
}
