import type { SentDigest } from '../client/sent-digest.ts'
import type { StreamObservation } from '../client/stream.ts'
import { sanitizeMessage, ServegateError } from '../errors.ts'
import { planArrivals, type ArrivalSchedule } from '../load/plan.ts'
import { parseBaseUrl } from '../loopback.ts'
import type { RequestSpill } from '../record/request-spill.ts'
import type { OpenLoopStats } from '../schema/load.ts'
import type { CellProgress, PhaseListener } from '../schema/progress.ts'
import type { ErrorInfo, RequestRecord, RunRecord } from '../schema/run.ts'
import type { TokenizerProbe } from '../client/tokenize.ts'
import { type PreparedWorkload, preparedFor } from '../workload/prepare.ts'
import { BodyFeed, type FedRequest, LOOK_AHEAD } from './body-feed.ts'
import { type RunCellOptions, type ResolvedRunCellOptions, resolveCellOptions } from './cell-options.ts'
import { type CellTransport, connectionsToWarm, httpTransport } from './cell-transport.ts'
import { closedLoop, openLoop, type Send, type Slot } from './dispatch.ts'
import { type Clock, systemClock } from './environment.ts'
import { checkCellFits, contextLimit, OPTION_NAMES } from './context-limit.ts'
import { probeEndpoint } from './probe.ts'
import { withNetworkProbes } from './network-probes.ts'
import { assembleRecord, cellPlan, requestRecord } from './run-record.ts'
import { CellLoadMeter } from './cell-load-meter.ts'
import { RequestLedger } from './request-ledger.ts'
import { UsageCrossCheck } from './usage-check.ts'
import { conversationLoop } from './conversation-loop.ts'
import type { ConversationLayout } from '../workload/conversation.ts'
import { settleHeap, settleYoung, warmClientJit, warmRequestPath } from './warm.ts'
import { batchBackgroundThreads, v8WorkersQuiet, WorkerYield } from './background-threads.ts'
import { requestLine } from '../record/record-writer.ts'
import { TurnSlice } from '../client/turn-slice.ts'
import { drainFailure, EngineDrainCheck, type EngineMetricsRef } from '../telemetry/engine-drain.ts'
import { Cancellations } from './cancellations.ts'
import { type CellShard, ShardView, sleepUntil } from './shard-split.ts'

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
  /**
   * The engine's Prometheus endpoint, read around a cell that cancels requests to check the engine
   * goes back to idle after it; null where it has none. @default the endpoint's `/metrics`, its
   * engine recognized by the names it exports
   */
  metrics?: EngineMetricsRef | null
  /**
   * Measure one shard of the cell (`servegate run --shards`): send only this shard's requests of
   * the plan, from the start its barrier gives. @default none (every request, from now)
   */
  shard?: CellShard
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
export async function runCell(input: RunCellOptions, hooks: RunCellHooks = {}): Promise<RunRecord> {
  const o = resolveCellOptions(input)
  const { origin, display } = parseBaseUrl(o.baseUrl, o.remote)
  await probeEndpoint(origin, o.model, hooks.signal)
  // Sizes the served model cannot hold fail here, before any load: the engine would refuse them all.
  const limit = await contextLimit(origin, o.model)
  if (limit !== null) checkCellFits(limit, o, OPTION_NAMES)
  const metrics =
    hooks.metrics !== undefined ? hooks.metrics : { url: new URL('/metrics', origin).toString(), kind: null, modelName: o.model }
  const measure = (cellHooks: RunCellHooks): Promise<RunRecord> =>
    measureCell(o, httpTransport(o, origin, hooks.engineCores), display, { ...cellHooks, metrics })
  // A remote target's round trips are measured apart from its requests; loopback probes nothing.
  if (!o.remote) return measure(hooks)
  return withNetworkProbes(origin, o.apiKey, hooks, (onMeasureStart) => measure({ ...hooks, onMeasureStart }))
}

/**
 * The measured requests, closed loop at the concurrency or open loop on the schedule; the open loop's own stats.
 * @param slice the turn slices a closed loop makes its ended requests' records in
 */
async function measuredPhase(
  o: ResolvedRunCellOptions,
  count: number,
  arrivals: ArrivalSchedule | null,
  startAt: number,
  signal: AbortSignal,
  send: CellSend,
  onDone: (slot: Slot) => void,
  slice: TurnSlice,
  conversation: ConversationLayout | null,
): Promise<OpenLoopStats | null> {
  if (conversation !== null) {
    const { sessions, turns, plan } = conversation
    const schedule = {
      sessions,
      turns,
      thinkTimeMs: plan.thinkTimeMs,
      live: plan.history === 'live',
      indexOf: (s: number, t: number) => conversation.indexOf(s, t),
    }
    await conversationLoop(schedule, o.concurrency, send, onDone, signal, slice)
    return null
  }
  if (arrivals === null) {
    await closedLoop(count, o.concurrency, send, onDone, signal, slice)
    return null
  }
  return openLoop(
    { offsetsMs: arrivals.offsetsMs, maxInFlight: arrivals.plan.maxInFlight, startAt, signal, chain: arrivals.chain },
    send,
    onDone,
  )
}

/** Waits for a sequential arm's turn at `stage`, saying so first. */
function waitTurn(stages: CellStages, stage: number, phase: PhaseListener | undefined): Promise<boolean> {
  phase?.({ phase: 'turn', stage: stage + 1, stages: stages.ends.length })
  return stages.turn(stage)
}

/** The cell's workload, prepared once per plan (calibrated with the engine's tokenizer when asked). */
function cellWorkload(
  o: ResolvedRunCellOptions,
  tokenizer: () => Promise<TokenizerProbe | null>,
  arrivals: ArrivalSchedule | null,
  phase: PhaseListener | undefined,
  signal: AbortSignal,
): Promise<PreparedWorkload> {
  const plan = {
    api: o.api,
    maxTokens: o.maxTokens,
    requests: o.requests,
    warmupRequests: o.warmupRequests,
    sizes: arrivals?.sizes ?? null,
    blockTokens: arrivals?.blockTokens ?? null,
  }
  const probe = async (): Promise<TokenizerProbe | null> => {
    if (!o.calibrate) return null
    phase?.({ phase: 'calibrating' })
    return tokenizer()
  }
  return preparedFor(o.workload, plan, probe, signal)
}

/**
 * The engine's tokenizer, probed once per cell however many ask (calibration, the usage check);
 * null once the cell is aborted, without waiting for an endpoint that does not answer.
 */
function tokenizerOnce(transport: CellTransport, signal: AbortSignal): () => Promise<TokenizerProbe | null> {
  let probed: Promise<TokenizerProbe | null> | null = null
  return () => {
    if (signal.aborted) return Promise.resolve(null)
    probed ??= transport.tokenizer()
    return new Promise((resolve, reject) => {
      const onAbort = (): void => resolve(null)
      signal.addEventListener('abort', onAbort, { once: true })
      ;(probed as Promise<TokenizerProbe | null>).then(resolve, reject).finally(() => signal.removeEventListener('abort', onAbort))
    })
  }
}

/** The cell's signal: the caller's, and aborted when a launched engine exits with a failure. */
function cellSignal(hooks: RunCellHooks): AbortSignal {
  const stop = new AbortController()
  void hooks.engine?.exited.then(() => {
    if (hooks.engine?.failure() !== null) stop.abort()
  })
  return hooks.signal === undefined ? stop.signal : AbortSignal.any([hooks.signal, stop.signal])
}

/** A cell's send of request `index` (a live conversation's with the replies so far), and its build ahead where the transport has one. */
type CellSend = ((index: number, replies?: readonly string[] | null) => Promise<StreamObservation>) & Pick<Send, 'prepare' | 'settle'>

/**
 * Sends request `base + index` of a feed; a ledger, when given, keeps its plan while it is in
 * flight, and its requests keep their streamed text when `streamed` (the usage cross-check).
 */
type Sender = (feed: BodyFeed, base: number, ledger: RequestLedger | null, streamed?: boolean) => CellSend

function sender(
  transport: CellTransport,
  captureChars: number,
  signal: AbortSignal,
  cancels: Cancellations | null,
  turns: ArrivalSchedule['turns'] = null,
): Sender {
  return (feed, base, ledger, streamed = false) => {
    const capture = { contentChars: captureChars, streamed }
    const go = (index: number, fed: FedRequest, transmit: (signal: AbortSignal) => Promise<StreamObservation>) => {
      // A trace's session rows: the record keeps their session and turn.
      const turn = turns?.[base + index] ?? null
      ledger?.sending(base + index, turn === null ? fed.planned : { ...fed.planned, ...turn })
      // Only measured requests (those with a ledger) are cancelled; each from the moment it is sent.
      if (ledger === null || cancels === null) return transmit(signal)
      return cancels.send(base + index, signal, transmit)
    }
    const send: CellSend = (index, replies = null) => {
      const fed = feed.take(base + index, replies)
      return go(index, fed, (s) => transport.send(fed.bytes, capture, s))
    }
    const { prepare } = transport
    if (prepare !== undefined) {
      send.prepare = (index) => {
        const fed = feed.take(base + index)
        const transmit = prepare(fed.bytes, capture)
        return () => go(index, fed, transmit)
      }
      send.settle = async () => {
        await v8WorkersQuiet()
        settleYoung()
      }
    }
    return send
  }
}

/** The warm-up requests, closed loop at the cell's concurrency, each told as a phase; none is recorded. */
async function warmUp(
  workload: PreparedWorkload,
  o: ResolvedRunCellOptions,
  send: (index: number) => Promise<StreamObservation>,
  phase: PhaseListener | undefined,
  signal: AbortSignal,
  slice: TurnSlice,
  view: ShardView | null,
): Promise<void> {
  const first = workload.measuredCount
  const total = view === null ? workload.warmupCount : view.warmupCount(workload.warmupCount)
  if (total === 0) return
  let warmed = 0
  phase?.({ phase: 'warmup', done: 0, total })
  const onDone = (slot: Slot): void => {
    // Made, written out as a spill writes it, and dropped, so the code that keeps a measured
    // record is compiled before the first one: cold, it held the thread 1-3 ms as the next
    // request's first chunk arrived (the record, then its line: 0.5-0.8 ms more at C = 1).
    requestLine(requestRecord({ ...slot, index: first + slot.index }, slot.readyAt, workload.planned(first + slot.index), workload))
    phase?.({ phase: 'warmup', done: ++warmed, total })
  }
  const sendOwn = view === null ? send : (k: number) => send(view.warmupIndex(k))
  await closedLoop(total, view?.concurrency ?? o.concurrency, sendOwn, onDone, signal, slice)
}

/**
 * A shard's view of its cell, or null for a cell measured whole. A shard sends its share of one
 * plan: a trace whose requests wait for each other, or a conversation, cannot be split so.
 */
function shardViewOf(
  shard: CellShard | undefined,
  o: ResolvedRunCellOptions,
  arrivals: ArrivalSchedule | null,
  workload: PreparedWorkload,
): ShardView | null {
  if (shard === undefined) return null
  if (workload.conversation !== null || arrivals?.chain != null)
    throw new ServegateError(
      'CONFIG_INVALID',
      '--shards: a conversation, or a trace with sessions, cannot be split over shards (a turn waits for the one before it); drop --shards',
    )
  return new ShardView(shard, o.requests, arrivals === null ? o.concurrency : null)
}

/** The concurrency (or in-flight cap) from which a cell warms its request path first (`warmRequestPath`). */
const WARM_REQUEST_PATH_FROM = 128

/**
 * Readies the client's thread before a cell: Node's background threads batched, so that V8's
 * workers cannot preempt it mid-read (`batchBackgroundThreads`); the per-read path compiled
 * always; the request path only before rounds of many sends at once, where V8 compiling it
 * mid-round held the thread (at lower concurrency it compiles in the thread's idle time, and the
 * warmed code, partly deoptimized on the first real send, added 1–1.5 ms to that send at C = 1).
 */
async function warmClient(o: ResolvedRunCellOptions): Promise<void> {
  await batchBackgroundThreads()
  warmClientJit()
  if (connectionsToWarm(o) >= WARM_REQUEST_PATH_FROM) await warmRequestPath()
}

/** The measuring core shared by every transport; closes the transport when done. */
export async function measureCell(
  o: ResolvedRunCellOptions,
  transport: CellTransport,
  target: string,
  hooks: RunCellHooks = {},
): Promise<RunRecord> {
  const signal = cellSignal(hooks)
  const { stages = null, spill = null, onPhase: phase } = hooks
  if (spill !== null && stages !== null) throw new ServegateError('INTERNAL', 'a staged cell cannot spill its requests')
  const feeds: BodyFeed[] = []
  try {
    if (stages !== null) await waitTurn(stages, 0, phase)
    // Drawn (or read) before anything is sent: a trace also sizes the requests.
    const arrivals = o.arrival === null ? null : await planArrivals(o.arrival, o.requests)
    const tokenizer = tokenizerOnce(transport, signal)
    const workload = await cellWorkload(o, tokenizer, arrivals, phase, signal)
    const live = workload.conversation?.plan.history === 'live'
    const view = shardViewOf(hooks.shard, o, arrivals, workload)
    // A live conversation sends each reply back: its content is kept, up to the capture bound.
    const captureChars = workload.spec.canaries || workload.spec.kind === 'dataset' || live ? workload.spec.captureChars : 0
    if (workload.conversation !== null && stages !== null) {
      throw new ServegateError('CONFIG_INVALID', 'a conversation cannot be measured in stages (a sequential pair); remove stopEarly')
    }
    // Bodies are built before each phase as far as a byte budget goes (all of a cell of a few
    // thousand requests), then as they are sent, a bounded look-ahead in front.
    const { measuredCount, warmupCount } = workload
    // A conversation's sessions interleave: its bodies are built as each turn goes, none ahead.
    // Otherwise at least a round ahead: every slot's next body is ready when its request ends.
    const lookAhead = workload.conversation === null ? Math.max(LOOK_AHEAD, connectionsToWarm(o)) : 0
    const measuredFeed = new BodyFeed(workload, o.model, 0, measuredCount, signal, lookAhead * (view?.shard.count ?? 1), view?.owns)
    const warmupFeed = new BodyFeed(workload, o.model, measuredCount, measuredCount + warmupCount, signal)
    feeds.push(measuredFeed, warmupFeed)
    const cancels = o.cancel === null ? null : new Cancellations(o.cancel, o.workload.seed, o.requests)
    const send = sender(transport, captureChars, signal, cancels, arrivals?.turns ?? null)
    // A cell that cancels requests checks the engine goes back to where it was before its first request.
    const drain = o.cancel === null ? null : new EngineDrainCheck(hooks.metrics ?? null, o.cancel.drainWithinMs)
    await drain?.before(signal)
    const clock = hooks.clock ?? systemClock
    const startedAt = clock.date()
    await warmClient(o)
    // Where the cell's thread reads the chunks itself, a closed loop starts its next requests in
    // the slices its sends go out in, the reads in between; elsewhere it has none to keep waiting.
    const loopSlice = transport.slice ?? new TurnSlice(Infinity)
    await warmUp(workload, o, send(warmupFeed, measuredCount, null), phase, signal, loopSlice, view)
    warmupFeed.close()
    await transport.warm?.(connectionsToWarm(view === null ? o : { ...o, concurrency: view.concurrency }))

    // The tokenizer that checks the replies' usage is found now, before the measured requests.
    const usage = await UsageCrossCheck.start(o.usageCheck, tokenizer)
    await hooks.onMeasureStart?.()
    const workerYield = transport.workers == null ? await WorkerYield.start() : null
    const meter = new CellLoadMeter(transport.workers ?? null, { engineInProcess: transport.engineInProcess === true, workerYield })
    const ends = stages?.ends ?? [measuredCount]
    const cancelled = cancels === null ? undefined : (index: number) => cancels.fired(index)
    const onWire = view === null ? undefined : (index: number, sent: SentDigest | null) => view.wrote(index, sent)
    const outlets = { spill, onProgress: hooks.onProgress, onPhase: phase, usage, cancelled, onWire }
    // A shard's requests count from the start the shards share; a whole cell's from now.
    const ledger = new RequestLedger(workload, o.requests, outlets, view === null ? undefined : await view.shard.barrier())
    const onDone = (slot: Slot): void => ledger.end(slot)
    let openLoopStats: OpenLoopStats | null = null
    for (let stage = 0; stage < ends.length; stage++) {
      if (stage > 0 && (stages === null || !(await waitTurn(stages, stage, phase)))) break
      const end = Math.min(ends[stage] as number, measuredCount)
      ledger.beginStage(stages === null ? null : { index: stage + 1, of: ends.length })
      measuredFeed.prefill()
      settleHeap()
      if (view !== null) await sleepUntil(ledger.cellStart)
      meter.start()
      const due = send(measuredFeed, ledger.sent, ledger, usage.keepsText)
      const own = view?.dispatch(due, onDone) ?? { send: due, onDone }
      openLoopStats = await measuredPhase(
        view === null ? o : { ...o, concurrency: view.concurrency },
        view === null ? end - ledger.sent : view.own.length,
        view === null || arrivals === null ? arrivals : { ...arrivals, offsetsMs: view.offsets(arrivals.offsetsMs) },
        ledger.cellStart,
        signal,
        own.send,
        own.onDone,
        loopSlice,
        workload.conversation,
      )
      await meter.stop()
      // Outside the measured span, and before another arm's turn: the tokenizer counts what streamed.
      await ledger.settleUsage(signal)
      ledger.endStage(view === null ? end : view.own.length)
      if (stages !== null) stages.done(stage, ledger.records.slice(), signal.aborted || hooks.engine?.failure() != null)
    }
    measuredFeed.close()
    view?.finish(measuredFeed.entries)
    const drained = (await drain?.after(signal)) ?? null

    const tally = await ledger.tally(o.slo)
    return assembleRecord({
      options: o,
      startedAt,
      finishedAt: clock.date(),
      target,
      plan: {
        ...cellPlan(o, workload, measuredFeed.requestStreamSha256, ledger.wireDigest(), arrivals?.plan ?? null, ledger.sent),
        usageCheck: usage.plan,
      },
      requests: ledger.records,
      counts: tally,
      unsent: ledger.unsent,
      metrics: { ...tally.metrics(ledger.busyMs), openLoop: openLoopStats },
      harness: meter.health(o, tally.sendLags, arrivals === null ? (view?.concurrency ?? o.concurrency) : 0),
      manifest: null,
      cellFailure: hooks.engine?.failure() ?? drainFailure(drained, tally.cancelled),
      drain: drained,
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
