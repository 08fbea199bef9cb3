import { createHash, randomBytes } from 'node:crypto'
import { monitorEventLoopDelay } from 'node:perf_hooks'
import { Pool } from 'undici'
import { streamCompletion, type StreamObservation } from '../client/stream.ts'
import { probeTokenizer, type TokenizerProbe } from '../client/tokenize.ts'
import { sanitizeMessage, ServegateError } from '../errors.ts'
import { planArrivals, type ArrivalSchedule, arrivalPlanUnread } from '../load/plan.ts'
import { computeCellMetrics, countFailures } from '../metrics/cell-metrics.ts'
import { distribution } from '../metrics/distribution.ts'
import { METHODOLOGY } from '../metrics/methodology.ts'
import { deriveRequestMetrics, requestMetricFields } from '../metrics/request-metrics.ts'
import type { Manifest } from '../schema/manifest.ts'
import type { OpenLoopStats } from '../schema/load.ts'
import type { CellProgress, PhaseListener } from '../schema/progress.ts'
import { type ErrorInfo, type HarnessHealth, RUN_SCHEMA_ID, type RequestRecord, type RunRecord } from '../schema/run.ts'
import { SERVEGATE_VERSION } from '../version.ts'
import { bodyBytes, requestStreamSha256, stripModel } from '../workload/bytes.ts'
import { checkCanary, withoutMarkers } from '../workload/canary.ts'
import { ESTIMATED_TOKENS_PER_WORD, type PreparedRequest, type PreparedWorkload, preparedFor } from '../workload/prepare.ts'
import { scoreResponse } from '../workload/score.ts'
import { parseBaseUrl } from '../loopback.ts'
import { closedLoop, openLoop, type Slot } from './dispatch.ts'
import { type CellOptions, type ResolvedCellOptions, resolveCellOptions } from './cell-options.ts'
import { probeEndpoint } from './probe.ts'
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

function contractInvalid(message: string): ErrorInfo {
  return { code: 'CONTRACT_INVALID', message: sanitizeMessage(message), httpStatus: null, retryAfterS: null }
}

/**
 * Turns one observation into its record: derived metrics, then the workload's checks. A reply
 * that fails its canary, or (strict output control) is not exactly max_tokens long, is
 * contract-invalid: kept with its timings and reason, excluded from every distribution.
 */
function toRecord(slot: Slot, cellStart: number, planned: PreparedRequest, workload: PreparedWorkload): RequestRecord {
  const { obs } = slot
  const m = deriveRequestMetrics(obs)
  let error = obs.error
  const answered = error === null

  const canary = planned.canaryMarker !== null && answered ? checkCanary(planned.canaryMarker, obs.content, !obs.contentTruncated) : null
  if (canary !== null && !canary.passed) error = contractInvalid(`request canary: ${canary.reason ?? 'failed'}`)

  const control = workload.spec.outputControl.mode
  const outputAdherence: RequestRecord['outputAdherence'] =
    control === 'none' || !answered
      ? null
      : obs.usageCompletionTokens === null
        ? 'unobservable'
        : obs.usageCompletionTokens === planned.maxTokens
          ? 'exact'
          : 'inexact'
  if (control === 'strict' && error === null && outputAdherence !== 'exact') {
    error = contractInvalid(
      outputAdherence === 'unobservable'
        ? 'output control strict: the server sent no usage, so the completion length cannot be verified'
        : `output control strict: ${obs.usageCompletionTokens} completion tokens, expected exactly ${planned.maxTokens}`,
    )
  }

  const score =
    planned.row === null || !answered
      ? null
      : obs.contentTruncated
        ? { correct: false, extracted: null, reason: 'the reply exceeded the capture bound; not scored as correct' }
        : scoreResponse(planned.row, withoutMarkers(obs.content))

  const common = {
    index: slot.index,
    queueDelayMs: slot.slotAt - slot.readyAt,
    sendLagMs: Math.max(0, obs.sentAt - slot.slotAt),
    startOffsetMs: obs.sentAt - cellStart,
    scheduledOffsetMs: slot.scheduledOffsetMs,
    ...requestMetricFields(m),
    reasoningChunks: obs.reasoningChunks,
    contentChunks: obs.contentChunks,
    itlMs: m.itlMs,
    finishReason: obs.finishReason,
    plannedPromptTokens: planned.plannedPromptTokens,
    wireSha256: obs.sentChunks.length === 0 ? null : createHash('sha256').update(Buffer.concat(obs.sentChunks)).digest('hex'),
    canary,
    outputAdherence,
    score,
    engineTimings: obs.engineTimings,
    sendAttempts: obs.attempts,
  }
  return error === null ? { status: 'ok', ...common } : { status: 'failed', error, ...common }
}

function harnessHealth(
  o: ResolvedCellOptions,
  cpuMs: number,
  wallMs: number,
  loopDelay: ReturnType<typeof monitorEventLoopDelay>,
  records: readonly RequestRecord[],
): HarnessHealth {
  const cpuShare = wallMs > 0 ? cpuMs / wallMs : null
  const loopP99 = loopDelay.count > 0 ? loopDelay.percentile(99) / 1e6 : null
  const loopMax = loopDelay.count > 0 ? loopDelay.max / 1e6 : null
  const sendLags = records.flatMap((r) => (r.sendLagMs === null ? [] : [r.sendLagMs]))
  const sendLagP99 = distribution(sendLags).p99
  const reasons: string[] = []
  if (cpuShare !== null && cpuShare >= o.cpuShareLimit) {
    reasons.push(`client CPU share ${cpuShare.toFixed(2)} ≥ ${o.cpuShareLimit} (one core is 1.0)`)
  }
  if (sendLagP99 !== null && sendLagP99 > o.sendLagLimitMs) {
    reasons.push(`send lag p99 ${sendLagP99.toFixed(2)} ms > ${o.sendLagLimitMs} ms`)
  }
  if (loopP99 !== null && loopP99 > o.eventLoopDelayLimitMs) {
    reasons.push(`event-loop delay p99 ${loopP99.toFixed(2)} ms > ${o.eventLoopDelayLimitMs} ms`)
  }
  return {
    clientCpuMs: cpuMs,
    clientCpuShare: cpuShare,
    eventLoopDelayP99Ms: loopP99,
    eventLoopDelayMaxMs: loopMax,
    sendLagP99Ms: sendLagP99,
    harnessLimited: reasons.length > 0,
    reasons,
  }
}

/** From the first send to the last end of some requests: the time the engine was busy with them. */
function busySpanMs(slots: readonly Slot[]): number {
  let firstSend = Infinity
  let lastEnd = -Infinity
  for (const { obs } of slots) {
    firstSend = Math.min(firstSend, obs.sentAt)
    lastEnd = Math.max(lastEnd, obs.endAt ?? obs.sentAt)
  }
  return Math.max(0, lastEnd - firstSend)
}

/**
 * The plan part of a record; `workload` is null when the cell failed before it was prepared.
 * `sent` is how many of the planned requests went out (fewer when a sequential pair stopped
 * early): the planned hash then covers those, so the wire hash is compared with what was due.
 */
function cellPlan(
  o: ResolvedCellOptions,
  workload: PreparedWorkload | null,
  wireStreamSha256: string | null,
  arrival: RunRecord['plan']['arrival'],
  sent = o.requests,
): RunRecord['plan'] {
  const spec = workload?.spec ?? o.workload
  const calibration = workload?.calibration ?? null
  const sharedTokens = calibration?.sharedPrefixTokens ?? (spec.prefixCache.mode === 'shared' ? spec.prefixCache.tokens : null)
  const plannedSha =
    workload === null
      ? null
      : sent >= workload.measured.length
        ? workload.requestStreamSha256
        : requestStreamSha256(workload.measured.slice(0, sent).map((r) => r.body))
  return {
    api: o.api,
    model: o.model,
    concurrency: o.concurrency,
    requests: o.requests,
    warmupRequests: o.warmupRequests,
    maxTokens: o.maxTokens,
    requestTimeoutMs: o.requestTimeoutMs,
    workload: {
      kind: spec.kind,
      promptTokens: spec.promptTokens,
      seed: spec.seed,
      prefixCache:
        spec.prefixCache.mode === 'shared' || spec.kind === 'shared-prefix'
          ? { mode: 'shared', tokens: sharedTokens }
          : { mode: 'unique', tokens: null },
      canaries: spec.canaries,
      outputControl: { mode: spec.outputControl.mode, knob: spec.outputControl.mode === 'none' ? null : spec.outputControl.knob },
      sampling: workload?.extras.sampling ?? null,
      dataset: workload?.dataset ?? null,
      calibration,
      promptTokensEstimator:
        calibration === null
          ? 'not prepared: the cell failed before its workload was built'
          : calibration.method === 'engine-tokenizer'
            ? `calibrated with the engine's tokenizer (${calibration.tokenizer}) to ±${calibration.toleranceTokens} tokens`
            : calibration.method === 'none'
              ? 'dataset prompts as written'
              : `estimated at ${ESTIMATED_TOKENS_PER_WORD} tokens per word (uncalibrated); usage.prompt_tokens is recorded per request`,
      requestStreamSha256: plannedSha,
      wireStreamSha256,
      wireMatchesPlan: plannedSha === null || wireStreamSha256 === null ? null : wireStreamSha256 === plannedSha,
      requestsPerSlotFloor: spec.requestsPerSlotFloor,
      // Requests per concurrency slot is a closed-loop notion; an open-loop cell has no slots.
      floorMet: o.arrival === null ? sent >= spec.requestsPerSlotFloor * o.concurrency : null,
    },
    arrival,
    sequential: null,
  }
}

/**
 * The record of a cell that failed before any request was sent (its engine did not start):
 * the plan, no requests, the reason.
 */
export function failedCellRecord(input: CellOptions, cellFailure: ErrorInfo, manifest: Manifest | null = null): RunRecord {
  const o = resolveCellOptions(input)
  const now = new Date()
  return {
    schema: RUN_SCHEMA_ID,
    runId: runId(now),
    servegateVersion: SERVEGATE_VERSION,
    startedAt: now.toISOString(),
    finishedAt: now.toISOString(),
    target: { baseUrl: null, model: o.model },
    plan: cellPlan(o, null, null, o.arrival === null ? null : arrivalPlanUnread(o.arrival, o.requests)),
    completed: 0,
    failed: 0,
    failures: {},
    requests: [],
    metrics: computeCellMetrics([], 0),
    harness: {
      clientCpuMs: null,
      clientCpuShare: null,
      eventLoopDelayP99Ms: null,
      eventLoopDelayMaxMs: null,
      sendLagP99Ms: null,
      harnessLimited: false,
      reasons: [],
    },
    methodology: { ...METHODOLOGY },
    manifest,
    telemetry: null,
    cellFailure,
    importedFrom: null,
  }
}

function runId(startedAt: Date): string {
  return `run-${startedAt
    .toISOString()
    .replace(/[-:]/g, '')
    .replace(/\.\d+Z$/, 'Z')}-${randomBytes(3).toString('hex')}`
}

/**
 * How a cell reaches its engine: over HTTP (an undici pool) or in-process. Either way each
 * request yields the same observation, so one methodology measures both shapes.
 */
export interface CellTransport {
  /** Sends one request body (model name included); never throws for a request failure. */
  send(body: Buffer, captureChars: number, signal: AbortSignal): Promise<StreamObservation>
  /** The engine's tokenizer for calibration, or null (sizes are then estimated). */
  tokenizer(): Promise<TokenizerProbe | null>
  /**
   * Opens `connections` keep-alive connections before the measured phase (each with a
   * side-effect-free `GET /v1/models`), so its first requests do not pay for connecting (a
   * connection to an engine in another process can take milliseconds on a busy host, and would
   * count as send lag); a transport without connections leaves it out.
   */
  warm?(connections: number): Promise<void>
  close(): Promise<void>
}

/**
 * Connections an open-loop cell without an in-flight cap opens before it starts (more open as the load
 * needs them, their cost counted as send lag).
 */
const OPEN_LOOP_WARM_CONNECTIONS = 4

/** The connections the measured phase will use from its first request: the concurrency, or the in-flight cap. */
function connectionsToWarm(o: ResolvedCellOptions): number {
  return Math.min(o.requests, o.arrival === null ? o.concurrency : (o.arrival.maxInFlight ?? OPEN_LOOP_WARM_CONNECTIONS))
}

/** The HTTP transport: a pool of C keep-alive connections to a loopback origin. */
function httpTransport(o: ResolvedCellOptions, origin: string): CellTransport {
  const headers = o.apiKey === undefined ? undefined : { authorization: `Bearer ${o.apiKey}` }
  // Open loop: as many connections as requests in flight (the cap, or unbounded), so none waits in the pool.
  const connections = o.arrival === null ? o.concurrency : o.arrival.maxInFlight
  const pool = new Pool(origin, { connections, pipelining: 1, keepAliveTimeout: 60_000 })
  const send: CellTransport['send'] = (body, captureChars, signal) =>
    streamCompletion(pool, origin, { api: o.api, body, headers, deadlineMs: o.requestTimeoutMs, signal, captureChars })
  // The template cost of a chat prompt, where the tokenizer cannot apply the template itself:
  // one single-token request whose usage.prompt_tokens is compared with the text's count.
  const measureChatOverhead = async (countText: (text: string) => Promise<number>): Promise<number | null> => {
    const content = 'Hello there, tokenizer.'
    const body = Buffer.from(
      JSON.stringify({
        model: o.model,
        messages: [{ role: 'user', content }],
        max_tokens: 1,
        stream: true,
        stream_options: { include_usage: true },
      }),
    )
    const obs = await send(body, 0, AbortSignal.timeout(o.requestTimeoutMs))
    return obs.usagePromptTokens === null ? null : obs.usagePromptTokens - (await countText(content))
  }
  const warmOne = async (): Promise<void> => {
    const res = await pool.request({ method: 'GET', path: '/v1/models', headers, signal: AbortSignal.timeout(o.requestTimeoutMs) })
    await res.body.dump()
  }
  return {
    send,
    tokenizer: () => probeTokenizer(origin, o.model, o.api === 'chat' ? measureChatOverhead : async () => null),
    warm: async (connections) => {
      // Best effort: an engine that refuses the extra connections is measured as it is.
      await Promise.allSettled(Array.from({ length: connections }, warmOne))
    },
    close: () => pool.destroy(),
  }
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

    const startedAt = new Date()
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
          .map((s) => toRecord(s, cellStart, workload.measured[s.index] as PreparedRequest, workload))
          .sort((a, b) => a.index - b.index)
        stages.done(stage, records, signal.aborted || hooks.engine?.failure() != null)
      }
    }

    slots.sort((a, b) => a.index - b.index)
    const records = slots.map((s) => toRecord(s, cellStart, workload.measured[s.index] as PreparedRequest, workload))
    const wireBodies = slots.map((s) => {
      const written = Buffer.concat(s.obs.sentChunks)
      return stripModel(o.model, written) ?? written
    })
    const wireStreamSha256 = requestStreamSha256(wireBodies)
    const completed = records.filter((r) => r.status === 'ok').length

    return {
      schema: RUN_SCHEMA_ID,
      runId: runId(startedAt),
      servegateVersion: SERVEGATE_VERSION,
      startedAt: startedAt.toISOString(),
      finishedAt: new Date().toISOString(),
      target: { baseUrl: target, model: o.model },
      plan: cellPlan(o, workload, wireStreamSha256, arrivals?.plan ?? null, sent),
      completed,
      failed: records.length - completed,
      failures: countFailures(records),
      requests: records,
      metrics: { ...computeCellMetrics(records, wallClockMs, o.slo), openLoop: openLoopStats },
      harness: harnessHealth(o, cpuMs, activeMs, loopDelay, records),
      methodology: { ...METHODOLOGY },
      manifest: null,
      telemetry: null,
      cellFailure: hooks.engine?.failure() ?? null,
      importedFrom: null,
    }
  } catch (err) {
    stages?.abandon()
    if (err instanceof ServegateError) throw err
    throw new ServegateError('INTERNAL', `cell failed unexpectedly: ${sanitizeMessage((err as Error).message)}`, { cause: err })
  } finally {
    await transport.close()
  }
}
