import { randomBytes } from 'node:crypto'
import type { monitorEventLoopDelay } from 'node:perf_hooks'
import { sanitizeMessage } from '../errors.ts'
import { arrivalPlanUnread } from '../load/plan.ts'
import { type CellTally, computeCellMetrics } from '../metrics/cell-metrics.ts'
import { distribution } from '../metrics/distribution.ts'
import { deriveRequestMetrics, requestMetricFields } from '../metrics/request-metrics.ts'
import { quantizeGaps } from '../schema/itl-packed.ts'
import type { Manifest } from '../schema/manifest.ts'
import type { WorkerMeasure } from '../client/worker-protocol.ts'
import { assembleRunRecord, nothingSent } from '../metrics/run-assembly.ts'
import type { ErrorInfo, HarnessHealth, HarnessLimitExceeded, RequestRecord, RunRecord, WorkerHealth } from '../schema/run.ts'
import { checkCanary, withoutMarkers } from '../workload/canary.ts'
import { ESTIMATED_TOKENS_PER_WORD, type PlannedRequest, type PreparedWorkload } from '../workload/prepare.ts'
import { centerTokens, MIN_PROMPT_TOKENS } from '../workload/lengths.ts'
import { scoreResponse } from '../workload/score.ts'
import { type RunCellOptions, type ResolvedRunCellOptions, resolveCellOptions } from './cell-options.ts'
import { cancelPlan } from '../workload/cancel-plan.ts'
import type { Slot } from './dispatch.ts'
import { type Clock, systemClock } from './environment.ts'
import { NO_USAGE, type UsageVerdict } from './usage-check.ts'

function contractInvalid(message: string): ErrorInfo {
  return { code: 'CONTRACT_INVALID', message: sanitizeMessage(message), httpStatus: null, retryAfterS: null }
}

/** The usage a server sent, as the record keeps it: a value that was not a number is null. */
function reportedUsage(obs: Slot['obs']): RequestRecord['reportedUsage'] {
  const kept = (n: number | null): number | null => (n === null || Number.isNaN(n) ? null : n)
  return { promptTokens: kept(obs.usagePromptTokens), completionTokens: kept(obs.usageCompletionTokens) }
}

/**
 * Turns one observation into its record: derived metrics, then the reply's checks. A reply whose
 * usage failed its cross-check is USAGE_INVALID, its counts then those the client saw (the
 * streamed chunks) and the server's kept as `reportedUsage`. A reply that fails its canary, or
 * (strict output control) is not exactly max_tokens long by its checked count, is
 * contract-invalid. Either is kept with its timings and reason, excluded from every distribution.
 * A request the cell's `cancel` plan aborted (`cancelled`) is recorded as cancelled, its partial
 * timings kept, neither ok nor failed.
 */
export function requestRecord(
  slot: Slot,
  cellStart: number,
  planned: PlannedRequest,
  workload: PreparedWorkload,
  usage: UsageVerdict = NO_USAGE,
  cancelled = false,
): RequestRecord {
  const { obs } = slot
  const usageTrusted = usage.problem === null
  const m = deriveRequestMetrics(usageTrusted ? obs : { ...obs, usagePromptTokens: null, usageCompletionTokens: null })
  let error = obs.error
  const answered = error === null
  if (answered && !usageTrusted) {
    error = { code: 'USAGE_INVALID', message: sanitizeMessage(usage.problem as string), httpStatus: null, retryAfterS: null }
  }

  const canary = planned.canaryMarker !== null && answered ? checkCanary(planned.canaryMarker, obs.content, !obs.contentTruncated) : null
  if (error === null && canary !== null && !canary.passed) error = contractInvalid(`request canary: ${canary.reason ?? 'failed'}`)

  const control = workload.spec.outputControl.mode
  const outputAdherence: RequestRecord['outputAdherence'] =
    control === 'none' || !answered || !usageTrusted
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
  // What was scored is kept, so a scorer fix can judge it again (servegate rescore); a cut reply was not scored.
  const outputText = score === null || obs.contentTruncated ? null : withoutMarkers(obs.content)

  const common = {
    index: slot.index,
    queueDelayMs: slot.slotAt - slot.readyAt,
    sendLagMs: Math.max(0, obs.sentAt - slot.slotAt),
    startOffsetMs: obs.sentAt - cellStart,
    scheduledOffsetMs: slot.scheduledOffsetMs,
    ...requestMetricFields(m),
    reasoningChunks: obs.reasoningChunks,
    contentChunks: obs.contentChunks,
    // Whole µs, as the record file packs them: the record read back equals this one, so verify re-derives its figures.
    itlMs: quantizeGaps(m.itlMs),
    itlPacked: null,
    finishReason: obs.finishReason,
    plannedPromptTokens: planned.plannedPromptTokens,
    wireSha256: obs.sent?.sha256 ?? null,
    canary,
    outputAdherence,
    score,
    outputText,
    engineTimings: obs.engineTimings,
    enginePrefillTokPerS: enginePrefillRate(obs.engineTimings),
    cachedPromptTokens: obs.cachedPromptTokens,
    sendAttempts: obs.attempts,
    session: planned.session,
    turn: planned.turn,
    group: planned.group ?? null,
    usageRule: usage.rule,
    retokenizedTokens: usage.retokenized,
    reportedUsage: usageTrusted ? null : reportedUsage(obs),
  }
  if (cancelled) return { status: 'cancelled', ...common }
  return error === null ? { status: 'ok', ...common } : { status: 'failed', error, ...common }
}

/** The engine's own prefill rate from llama-server's `timings` (prompt_n over prompt_ms), or null. */
function enginePrefillRate(timings: Record<string, number> | null): number | null {
  const tokens = timings?.['prompt_n']
  const ms = timings?.['prompt_ms']
  return tokens !== undefined && ms !== undefined && tokens > 0 && ms > 0 ? tokens / (ms / 1000) : null
}

/** The client's worker threads over a cell: how many, the cell's own thread's CPU, and each worker's figures per stage. */
export interface WorkerFigures {
  count: number
  /** CPU time of the cell's own thread, ms. */
  cellThreadCpuMs: number
  /** Per stage, each live worker's figures. */
  measures: ReadonlyArray<readonly WorkerMeasure[]>
}

/** The largest of the values given, null when none is. */
function maxOf(values: ReadonlyArray<number | null>): number | null {
  return values.reduce<number | null>((max, v) => (v === null ? max : Math.max(max ?? v, v)), null)
}

/** One worker's figures over every stage, judged against the cell's limits; its reasons go to `reasons`. */
function workerHealth(
  o: ResolvedRunCellOptions,
  worker: number,
  stages: readonly WorkerMeasure[],
  reasons: string[],
  exceeded: HarnessLimitExceeded[],
): WorkerHealth {
  const cpuMs = stages.reduce((sum, m) => sum + m.cpuMs, 0)
  const wallMs = stages.reduce((sum, m) => sum + m.wallMs, 0)
  const cpuShare = wallMs > 0 ? cpuMs / wallMs : null
  const loopP99 = maxOf(stages.map((m) => m.eventLoopDelayP99Ms))
  const handoffLagP99 = distribution(stages.flatMap((m) => m.handoffLagsMs)).p99
  const before = reasons.length
  if (cpuShare !== null && cpuShare >= o.cpuShareLimit) {
    reasons.push(`client worker ${worker} CPU share ${cpuShare.toFixed(2)} ≥ ${o.cpuShareLimit}`)
    exceeded.push({ option: 'cpuShareLimit', limit: o.cpuShareLimit, value: cpuShare, thread: worker })
  }
  if (loopP99 !== null && loopP99 > o.eventLoopDelayLimitMs) {
    reasons.push(`client worker ${worker} event-loop delay p99 ${loopP99.toFixed(2)} ms > ${o.eventLoopDelayLimitMs} ms`)
    exceeded.push({ option: 'eventLoopDelayLimitMs', limit: o.eventLoopDelayLimitMs, value: loopP99, thread: worker })
  }
  return {
    worker,
    requests: stages.reduce((sum, m) => sum + m.requests, 0),
    cpuShare,
    eventLoopDelayP99Ms: loopP99,
    eventLoopDelayMaxMs: maxOf(stages.map((m) => m.eventLoopDelayMaxMs)),
    handoffLagP99Ms: handoffLagP99,
    harnessLimited: reasons.length > before,
  }
}

/**
 * The cell's harness figures and whether the client, not the engine, limited it: the CPU share
 * of its busiest thread, its send lag, its event-loop delay, and with worker threads each
 * worker's own (the cell's send lag already includes the hand-off to a worker).
 */
export function harnessHealth(
  o: ResolvedRunCellOptions,
  cpuMs: number,
  wallMs: number,
  loopDelay: ReturnType<typeof monitorEventLoopDelay>,
  sendLags: readonly number[],
  workers: WorkerFigures = { count: 0, cellThreadCpuMs: cpuMs, measures: [] },
  hostStealShare: number | null = null,
  openingSends = 0,
): HarnessHealth {
  const loopP99 = loopDelay.count > 0 ? loopDelay.percentile(99) / 1e6 : null
  const loopMax = loopDelay.count > 0 ? loopDelay.max / 1e6 : null
  const sendLagP99 = distribution(sendLags).p99
  // A closed loop's opening round is C sends due at one instant: the last goes out when the others
  // have, however idle the client. The verdict judges the sends after it, when each is due alone.
  const opening = Math.min(openingSends, sendLags.length)
  const openingSendLagMax = opening === 0 ? null : Math.max(...sendLags.slice(0, opening))
  const judged = opening < sendLags.length ? distribution(sendLags.slice(opening)).p99 : sendLagP99
  const judgedWhat = opening > 0 && opening < sendLags.length ? 'send lag p99 after the opening round' : 'send lag p99'
  const reasons: string[] = []
  const workerReasons: string[] = []
  // One per reason, in the same order: what an undecided gate names to decide it.
  const exceeded: HarnessLimitExceeded[] = []
  const workerExceeded: HarnessLimitExceeded[] = []
  const perWorker =
    workers.count === 0
      ? []
      : Array.from({ length: workers.count }, (_, w) =>
          workerHealth(
            o,
            w,
            workers.measures.flatMap((stage) => stage.filter((m) => m.worker === w)),
            workerReasons,
            workerExceeded,
          ),
        )
  // In the cell's thread, the process's share (every thread the client runs, GC's included);
  // with workers, the busiest thread's, each of them on a core of its own.
  const cellThreadShare = wallMs > 0 ? workers.cellThreadCpuMs / wallMs : null
  const processShare = wallMs > 0 ? cpuMs / wallMs : null
  const cpuShare = workers.count === 0 ? processShare : maxOf([cellThreadShare, ...perWorker.map((w) => w.cpuShare)])
  if (workers.count === 0 && cpuShare !== null && cpuShare >= o.cpuShareLimit) {
    reasons.push(`client CPU share ${cpuShare.toFixed(2)} ≥ ${o.cpuShareLimit} (one core is 1.0)`)
    exceeded.push({ option: 'cpuShareLimit', limit: o.cpuShareLimit, value: cpuShare, thread: 'cell' })
  } else if (workers.count > 0 && cellThreadShare !== null && cellThreadShare >= o.cpuShareLimit) {
    reasons.push(`the cell's thread CPU share ${cellThreadShare.toFixed(2)} ≥ ${o.cpuShareLimit} (one core is 1.0)`)
    exceeded.push({ option: 'cpuShareLimit', limit: o.cpuShareLimit, value: cellThreadShare, thread: 'cell' })
  }
  if (judged !== null && judged > o.sendLagLimitMs) {
    reasons.push(`${judgedWhat} ${judged.toFixed(2)} ms > ${o.sendLagLimitMs} ms`)
    exceeded.push({ option: 'sendLagLimitMs', limit: o.sendLagLimitMs, value: judged, thread: 'cell' })
  }
  if (loopP99 !== null && loopP99 > o.eventLoopDelayLimitMs) {
    reasons.push(`event-loop delay p99 ${loopP99.toFixed(2)} ms > ${o.eventLoopDelayLimitMs} ms`)
    exceeded.push({ option: 'eventLoopDelayLimitMs', limit: o.eventLoopDelayLimitMs, value: loopP99, thread: 'cell' })
  }
  reasons.push(...workerReasons)
  exceeded.push(...workerExceeded)
  return {
    clientCpuMs: cpuMs,
    clientCpuShare: cpuShare,
    ...(workers.count === 0 ? {} : { clientWorkers: workers.count, workers: perWorker }),
    eventLoopDelayP99Ms: loopP99,
    eventLoopDelayMaxMs: loopMax,
    sendLagP99Ms: sendLagP99,
    openingSendLagMaxMs: openingSendLagMax,
    hostStealShare,
    harnessLimited: reasons.length > 0,
    reasons,
    exceeded,
  }
}

/**
 * The plan part of a record; `workload` is null when the cell failed before it was prepared.
 * `sent` is how many of the planned requests went out (fewer when a sequential pair stopped
 * early); `plannedSha` is the request-stream hash of those (null when not every one was built),
 * so the wire hash is compared with what was due.
 */
export function cellPlan(
  o: ResolvedRunCellOptions,
  workload: PreparedWorkload | null,
  plannedSha: string | null,
  wireStreamSha256: string | null,
  arrival: RunRecord['plan']['arrival'],
  sent = o.requests,
): RunRecord['plan'] {
  const spec = workload?.spec ?? o.workload
  const calibration = workload?.calibration ?? null
  const conversation = workload?.conversation?.plan ?? null
  const groups = spec.kind === 'shared-prefix' && spec.groups !== undefined
  const sharedTokens =
    calibration?.sharedPrefixTokens ??
    (spec.prefixCache.mode === 'shared' ? spec.prefixCache.tokens : groups ? (spec.systemTokens ?? null) : null)
  return {
    api: o.api,
    model: o.model,
    concurrency: o.concurrency,
    requests: o.requests,
    warmupRequests: o.warmupRequests,
    // Drawn per request: each request's own is in workload.lengths.maxTokens.
    maxTokens: typeof o.maxTokens === 'number' ? o.maxTokens : null,
    requestTimeoutMs: o.requestTimeoutMs,
    workload: {
      kind: spec.kind,
      promptTokens: plannedPromptTokens(spec, workload),
      seed: spec.seed,
      prefixCache:
        spec.prefixCache.mode === 'shared' || spec.kind === 'shared-prefix' || spec.kind === 'conversation'
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
              : spec.kind === 'conversation' && calibration.warning !== null
                ? calibration.warning
                : `estimated at ${ESTIMATED_TOKENS_PER_WORD} tokens per word (uncalibrated); usage.prompt_tokens is recorded per request`,
      requestStreamSha256: plannedSha,
      wireStreamSha256,
      // A live conversation sends the model's own replies back: its wire is not the plan by design.
      wireMatchesPlan:
        plannedSha === null || wireStreamSha256 === null || conversation?.history === 'live' ? null : wireStreamSha256 === plannedSha,
      requestsPerSlotFloor: spec.requestsPerSlotFloor,
      // Requests per concurrency slot is a closed-loop notion; an open-loop cell has no slots.
      floorMet: o.arrival === null ? sent >= spec.requestsPerSlotFloor * o.concurrency : null,
      conversation,
      lengths: workload?.lengths ?? null,
      prefixGroups: workload?.prefixGroups ?? null,
    },
    arrival,
    sequential: null,
    usageCheck: null,
    cancel: o.cancel === null ? null : cancelPlan(o.cancel, spec.seed, o.requests),
    prefixCacheReset: null,
  }
}

/**
 * The record's planned prompt size: the mean of the measured requests' drawn sizes, a group's
 * system prompt and question together, else the declared size (a distribution's center when the
 * cell failed before drawing).
 */
function plannedPromptTokens(spec: PreparedWorkload['spec'], workload: PreparedWorkload | null): number {
  const drawn = workload?.lengths?.promptTokens
  if (drawn != null) return Math.round(drawn.meanTokens)
  if (spec.kind === 'shared-prefix' && spec.groups !== undefined) return (spec.systemTokens ?? 0) + (spec.questionTokens ?? 0)
  return centerTokens(spec.promptTokens, MIN_PROMPT_TOKENS)
}

/** What a run record is made of, besides what every record carries (schema, version, methodology). */
export interface RecordParts {
  options: ResolvedRunCellOptions
  startedAt: Date
  finishedAt: Date
  /** Where the requests went (a display URL, `in-process`), or null when none was sent. */
  target: string | null
  plan: RunRecord['plan']
  /** The measured requests, in plan order; empty when they were spilled to disk (`counts` still counts them). */
  requests: RequestRecord[]
  /** Ok, failed and cancelled requests, and the failures by code, over every measured request. */
  counts: Pick<CellTally, 'completed' | 'failed' | 'failures' | 'cancelled'>
  /** Planned requests never sent, the cell cut short; counted, not recorded one by one. */
  unsent: number
  metrics: RunRecord['metrics']
  harness: HarnessHealth
  manifest: Manifest | null
  cellFailure: ErrorInfo | null
  /** A cell that cancelled requests: whether the engine went back to idle after it. @default null */
  drain?: RunRecord['drain']
}

/**
 * A measured cell's record, put together by the one assembler importers use too
 * ({@link assembleRunRecord}): scrubbed of the registered secrets before it leaves the worker.
 */
export function assembleRecord(parts: RecordParts): RunRecord {
  return assembleRunRecord({
    runId: runId(parts.startedAt),
    startedAt: parts.startedAt.toISOString(),
    finishedAt: parts.finishedAt.toISOString(),
    target: { baseUrl: parts.target, model: parts.options.model },
    plan: parts.plan,
    completed: parts.counts.completed,
    failed: parts.counts.failed,
    failures: { ...parts.counts.failures },
    cancelled: parts.counts.cancelled,
    unsent: parts.unsent,
    requests: parts.requests,
    metrics: parts.metrics,
    harness: parts.harness,
    manifest: parts.manifest,
    cellFailure: parts.cellFailure,
    drain: parts.drain ?? null,
    importedFrom: null,
  })
}

/**
 * The record of a cell that failed before any request was sent (its engine did not start):
 * the plan, no requests, the reason.
 */
export function failedCellRecord(
  input: RunCellOptions | ResolvedRunCellOptions,
  cellFailure: ErrorInfo,
  manifest: Manifest | null = null,
  clock: Clock = systemClock,
): RunRecord {
  const o = resolveCellOptions(input)
  const now = clock.date()
  return assembleRecord({
    options: o,
    startedAt: now,
    finishedAt: now,
    target: null,
    plan: cellPlan(o, null, null, null, o.arrival === null ? null : arrivalPlanUnread(o.arrival, o.requests)),
    requests: [],
    counts: { completed: 0, failed: 0, failures: {}, cancelled: 0 },
    unsent: 0,
    metrics: computeCellMetrics([], 0),
    harness: nothingSent(),
    manifest,
    cellFailure,
  })
}

function runId(startedAt: Date): string {
  return `run-${startedAt
    .toISOString()
    .replace(/[-:]/g, '')
    .replace(/\.\d+Z$/, 'Z')}-${randomBytes(3).toString('hex')}`
}
