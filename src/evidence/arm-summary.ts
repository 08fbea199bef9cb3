/**
 * Arm summaries of the evidence index, computed from run records alone: `servegate verify`
 * recomputes them the same way and compares.
 */
import type { ArmSummary, CellPlanSummary, FileRef, MeasuredFacts, Percentiles } from '../schema/evidence.ts'
import type { Distribution, RunRecord } from '../schema/run.ts'

function percentiles(d: Distribution): Percentiles {
  return { p50: d.p50, p95: d.p95, p99: d.p99, samples: d.samples }
}

/** The most requests in flight at once, from each request's send offset and end. */
function clientObservedMax(record: RunRecord): number {
  const events: Array<[number, number]> = []
  for (const r of record.requests) {
    if (r.startOffsetMs === null) continue
    const end = r.e2eMs === null ? null : r.startOffsetMs + r.e2eMs
    events.push([r.startOffsetMs, 1])
    if (end !== null) events.push([end, -1])
  }
  // Ends sort before starts at the same instant: a slot handed over is not two in flight.
  events.sort((a, b) => a[0] - b[0] || a[1] - b[1])
  let inFlight = 0
  let max = 0
  for (const [, delta] of events) {
    inFlight += delta
    max = Math.max(max, inFlight)
  }
  return max
}

/** Failed requests over the launches given; null when any launch's source never recorded its count. */
export function failedOf(arms: ReadonlyArray<Pick<ArmSummary, 'failed'>>): number | null {
  let sum = 0
  for (const a of arms) {
    if (a.failed === null) return null
    sum += a.failed
  }
  return sum
}

/** A failed count as the board and the page show it: the number, or "unknown" where it was never recorded. */
export function failedCountText(failed: number | null): string {
  return failed === null ? 'unknown' : String(failed)
}

/** The plan of a cell as the board shows it. */
export function planSummary(record: RunRecord): CellPlanSummary {
  const p = record.plan
  return {
    api: p.api,
    concurrency: p.concurrency,
    arrival: p.arrival?.kind ?? 'closed',
    arrivalRatePerS: p.arrival?.ratePerS ?? null,
    requests: p.requests,
    maxTokens: p.maxTokens,
    workload: p.workload.kind,
    promptTokens: p.workload.promptTokens,
    requestStreamSha256: p.workload.requestStreamSha256,
  }
}

/**
 * The arm's prefix-cache figures, where its engine reported any or its cache was reset; nothing
 * otherwise (so older indexes still verify).
 */
function prefixCacheSummary(record: RunRecord): Pick<ArmSummary, 'prefixCache'> {
  const m = record.metrics
  const reset = record.plan.prefixCacheReset?.status ?? null
  if (m.totalCachedPromptTokens === null && reset === null) return {}
  return {
    prefixCache: {
      cachedPromptShare: m.cachedPromptShare,
      totalCachedPromptTokens: m.totalCachedPromptTokens,
      unknownReason: m.cachedPromptTokensUnknownReason,
      reset,
    },
  }
}

/** One launch of one arm, summarized from its run record; `record` is where the record lies in the evidence. */
export function armSummary(record: RunRecord, arm: ArmSummary['arm'], launch: number, ref: FileRef): ArmSummary {
  const d = record.metrics.distributions
  const t = record.telemetry
  const gpu = t?.gpu.status === 'ok' && t.gpu.summary.status === 'ok' ? t.gpu.summary.worst : null
  const engine = t?.engine.status === 'ok' ? t.engine.occupancy : null
  const host = t?.hostMemory.status === 'ok' ? t.hostMemory : null
  const hostPeak = host === null ? null : (host.lifetimePeakBytes ?? host.sampledPeakBytes)
  const sequential = record.plan.sequential
  const goodput = record.metrics.goodput
  const spec = record.metrics.specDecode
  return {
    arm,
    launch,
    engine: record.manifest?.engine.kind ?? null,
    engineVersion: record.manifest?.engine.version.value ?? null,
    model: record.target.model,
    completed: record.completed,
    failed: record.failed,
    cellFailure: record.cellFailure === null ? null : `${record.cellFailure.code}: ${record.cellFailure.message.split('\n')[0]}`,
    timings: {
      ttftMs: percentiles(d.ttftMs),
      timeToFirstOutputMs: percentiles(d.timeToFirstOutputMs),
      tpotMs: percentiles(d.tpotMs),
      itlMs: percentiles(d.itlMs),
      e2eMs: percentiles(d.e2eMs),
      decodeTokPerS: percentiles(d.decodeTokPerS),
      effectivePrefillTokPerS: percentiles(d.effectivePrefillTokPerS),
    },
    outputThroughputTokPerS: record.metrics.outputThroughputTokPerS,
    itlJitterMs: d.itlMs.stddev,
    concurrency: {
      requested: record.plan.concurrency,
      clientObservedMax: clientObservedMax(record),
      engineRunningMax: engine?.runningMax ?? null,
      engineWaitingMax: engine?.waitingMax ?? null,
    },
    memory: {
      peakVramMiB: gpu?.peakMemoryUsedMiB.value ?? null,
      vramGrowthMiB: gpu?.peakProcessVramEstimateMiB.value ?? null,
      hostPeakMiB: hostPeak === null ? null : hostPeak / 2 ** 20,
    },
    gpu: {
      activePowerMeanW: gpu?.activePowerMeanW.value ?? null,
      temperatureP95C: gpu?.temperatureP95C.value ?? null,
      joulesPerToken: gpu?.idleSubtractedJPerOutputToken.value ?? null,
    },
    load: {
      goodFraction: goodput?.fraction ?? null,
      goodFractionLow: goodput?.wilson95Low ?? null,
      goodFractionHigh: goodput?.wilson95High ?? null,
      goodputReqPerS: goodput?.goodputReqPerS ?? null,
      sendLagP99Ms: record.harness.sendLagP99Ms,
      inFlightMax: record.metrics.openLoop?.inFlightMax ?? null,
    },
    harnessLimited: record.harness.harnessLimited,
    hostStealShare: record.harness.hostStealShare ?? null,
    ttftByTurn: record.metrics.byTurn?.map((t) => ({ turn: t.turn, ttftMs: percentiles(t.ttftMs) })) ?? null,
    p99DescriptiveOnly: [...record.metrics.p99DescriptiveOnly],
    sequential:
      sequential === null
        ? null
        : { stoppedAt: sequential.stoppedAt, plannedRequests: sequential.plannedRequests, reason: sequential.reason },
    record: ref,
    measured: measuredFacts(record),
    accuracy: record.metrics.accuracy === null ? null : { ...record.metrics.accuracy },
    ...prefixCacheSummary(record),
    ...networkSummary(record),
    // Left out where there is nothing to say, so indexes written before these were kept still verify.
    ...(record.cancelled > 0 ? { cancelled: record.cancelled } : {}),
    ...(spec === null
      ? {}
      : {
          specDecode: {
            source: spec.source,
            acceptanceRate: spec.acceptanceRate,
            meanAcceptanceLength: spec.meanAcceptanceLength,
            draftTokens: spec.draftTokens,
          },
        }),
  }
}

/** A remote target's round trips and adjusted TTFT and e2e; nothing for a loopback one (so older indexes still verify). */
function networkSummary(record: RunRecord): Pick<ArmSummary, 'network'> {
  const n = record.network
  if (n === undefined) return {}
  const a = n.adjusted
  const d = record.metrics.distributions
  const less = (f: NonNullable<typeof a>['ttftMs'], samples: number): Percentiles => ({ p50: f.p50, p95: f.p95, p99: f.p99, samples })
  return {
    network: {
      host: n.host,
      httpEndpoint: n.http.endpoint,
      httpRttP50Ms: n.http.before.p50Ms,
      handshakeP50Ms: n.handshake.before.p50Ms,
      estimator: a?.estimator ?? null,
      rttMs: a?.rttMs ?? null,
      adjustedTtftMs: a === null ? null : less(a.ttftMs, d.ttftMs.samples),
      adjustedE2eMs: a === null ? null : less(a.e2eMs, d.e2eMs.samples),
    },
  }
}

/** The manifest's facts the board shows; null when the record has none (an import, a failed start). */
function measuredFacts(record: RunRecord): MeasuredFacts | null {
  const m = record.manifest
  if (m === null) return null
  return {
    engineCommit: m.engine.commit.value,
    modelId: m.model.id,
    modelRevision: m.model.revision,
    modelFingerprint: m.model.fingerprint.value,
    gpus: m.gpus.status === 'ok' ? m.gpus.devices.map((d) => ({ ...d })) : [],
    gpusAbsent: m.gpus.status === 'ok' ? null : m.gpus.reason,
    host: { ...m.host },
    harness: { ...m.harness },
  }
}
