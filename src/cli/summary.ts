import { describeArrival } from '../load/arrival.ts'
import { p99IsDescriptive } from '../metrics/distribution.ts'
import { describeSLO } from '../metrics/goodput.ts'
import { estimatorText } from '../metrics/network.ts'
import { ABSENT, formatByMagnitude, formatFixed, formatFixedPercent, formatSeconds } from '../number-format.ts'
import {
  type NetworkRttSeries,
  type ReadBatching,
  P99_MIN_SAMPLES,
  REQUEST_METRIC_NAMES,
  type Distribution,
  type RunRecord,
} from '../schema/run.ts'

const LABELS: Record<string, string> = {
  ttftMs: 'ttft ms',
  timeToFirstOutputMs: 'first output ms',
  e2eMs: 'e2e ms',
  generationMs: 'generation ms',
  tpotMs: 'tpot ms',
  decodeTokPerS: 'decode tok/s',
  effectivePrefillTokPerS: 'eff. prefill tok/s',
  promptTokens: 'prompt tokens',
  completionTokens: 'completion tokens',
  itlMs: 'itl ms (all gaps)',
  queueDelayMs: 'queue delay ms',
  sendLagMs: 'send lag ms',
}

function pad(cells: string[], widths: number[]): string {
  return cells.map((c, i) => (i === 0 ? c.padEnd(widths[i] as number) : c.padStart(widths[i] as number))).join('  ')
}

/** The engine, GPU and telemetry lines of a record measured on an engine servegate launched. */
function engineLines(record: RunRecord): string[] {
  const lines: string[] = []
  const m = record.manifest
  if (m !== null) {
    const gpus =
      m.gpus.status === 'ok'
        ? m.gpus.devices.map((d) => `${d.name ?? '?'} (driver ${d.driverVersion ?? '?'})`).join(', ') +
          (m.gpus.source === undefined ? '' : ` from the ${m.gpus.source}`)
        : m.gpus.status === 'unknown'
          ? `GPUs unknown (${m.gpus.reason})`
          : `no GPU facts (${m.gpus.reason})`
    lines.push(
      '',
      `engine ${m.engine.kind} ${m.engine.version.value ?? `version unknown (${m.engine.version.reason})`} · ${m.engine.shape} · ` +
        `model ${m.model.id}${m.model.revision === null ? '' : `@${m.model.revision}`} · ${gpus}`,
    )
  }
  const t = record.telemetry
  if (t === null) return lines
  if (t.gpu.status === 'ok' && t.gpu.summary.status === 'ok') {
    const w = t.gpu.summary.worst
    lines.push(
      `GPU (worst device): active power mean ${formatFixed(w.activePowerMeanW.value)} W, ` +
        `p95 ${formatFixed(w.activePowerP95W.value)} W · temperature p95 ${formatFixed(w.temperatureP95C.value)} °C · ` +
        `peak memory ${formatFixed(w.peakMemoryUsedMiB.value, 0)} MiB · ` +
        `${formatFixed(w.idleSubtractedJPerOutputToken.value, 3)} J per output token above idle`,
    )
  }
  if (t.engine.status === 'ok') {
    const o = t.engine.occupancy
    const c = t.engine.concurrency
    const reached =
      c === null ? '' : ` · concurrency ${c.reached === true ? 'reached' : c.reached === false ? 'NOT reached' : 'unknown'} (${c.reason})`
    lines.push(`engine metrics: running max ${o.runningMax ?? ABSENT}, waiting max ${o.waitingMax ?? ABSENT}${reached}`)
  } else {
    lines.push(`engine metrics: absent (${t.engine.reason})`)
  }
  if (t.timingAgreement.status === 'ok') {
    for (const c of t.timingAgreement.comparisons) {
      lines.push(
        `engine vs client ${c.metric}: ${c.verdict} (${c.engineSource} vs ${c.clientSource}; ` +
          `median gap ${formatFixed(c.medianGapMs)} ms over ${c.samples})`,
      )
    }
  }
  return lines
}

/** The open-loop line: the process, what the schedule offered, the in-flight peak and the cap. */
function arrivalLine(record: RunRecord): string | null {
  const a = record.plan.arrival
  if (a === null) return null
  const trace = a.trace === null ? '' : ` · ${a.trace.replayed} of ${a.trace.rows} rows of ${a.trace.path}`
  const offered =
    a.offeredRatePerS === null ? '' : ` · offered ${formatByMagnitude(a.offeredRatePerS)} req/s over ${formatSeconds(a.scheduledSpanMs, 2)}`
  const o = record.metrics.openLoop
  const cap =
    a.maxInFlight === null ? 'no in-flight cap' : `in-flight cap ${a.maxInFlight}, ${o?.cappedRequests ?? 0} request(s) waited for it`
  return (
    `open loop: ${describeArrival(a)}${trace}${offered} · in flight at most ${o?.inFlightMax ?? ABSENT} · ${cap} · ` +
    `schedule ${a.scheduleSha256.slice(0, 12)}…`
  )
}

/** The cancellations line: the plan, how many were still streaming when aborted, and whether the engine went back to idle. */
function cancelLine(record: RunRecord): string | null {
  const c = record.plan.cancel
  if (c === null) return null
  const d = record.drain
  const drain =
    d === null
      ? ''
      : d.passed === true
        ? ` · engine back to idle in ${formatFixed(d.settledMs)} ms`
        : d.passed === false
          ? ` · ENGINE NOT BACK TO IDLE: ${d.reason}`
          : ` · engine idle not checked: ${d.reason}`
  return (
    `cancel ${formatFixedPercent(c.share)} after ${c.afterMs} ms: ${c.indices.length} chosen, ` +
    `${record.cancelled} aborted while streaming (the rest ended first)${drain}`
  )
}

/** The speculative decoding line: acceptance rate and mean acceptance length, and where they come from. */
function specDecodeLine(record: RunRecord): string | null {
  const s = record.metrics.specDecode
  if (s === null) return null
  const tokens = s.draftTokens === null ? '' : ` (${s.acceptedTokens ?? '?'}/${s.draftTokens} draft tokens)`
  const length = s.meanAcceptanceLength === null ? 'unknown' : formatFixed(s.meanAcceptanceLength)
  return `speculative decoding: acceptance ${formatFixedPercent(s.acceptanceRate)}${tokens} · mean acceptance length ${length} · from ${s.source}`
}

/** The goodput line: the SLO, the good share with its interval, good requests per second, and what was missed. */
function goodputLine(record: RunRecord): string | null {
  const g = record.metrics.goodput
  if (g === null) return null
  const missed = Object.entries(g.missed)
    .filter(([, n]) => n > 0)
    .map(([what, n]) => `${what.replace(/Ms$/, '')} ${n}`)
  return (
    `goodput (${describeSLO(g.slo)}): ${g.good}/${g.samples} good = ${formatFixedPercent(g.fraction)} ` +
    `[${formatFixedPercent(g.wilson95Low)}, ${formatFixedPercent(g.wilson95High)}] (Wilson 95%) · ` +
    `${formatByMagnitude(g.goodputReqPerS)} good req/s${missed.length > 0 ? ` · missed: ${missed.join(', ')}` : ''}`
  )
}

/**
 * A remote target's TTFT and e2e rows less the network round trip, named so, beside the raw rows
 * (the figures gates judge): n, mean, p50…p99; no interval and no max (one constant moves them).
 */
function networkAdjustedRows(record: RunRecord): string[][] {
  const adjusted = record.network?.adjusted ?? null
  if (adjusted === null) return []
  return (['ttftMs', 'e2eMs'] as const).flatMap((name) => {
    const n = record.metrics.distributions[name].samples
    if (n === 0) return []
    const a = adjusted[name]
    return [
      [`${LABELS[name] ?? name} (network-adjusted)`, String(n), ...[a.mean, null, a.p50, a.p90, a.p95, a.p99, null].map(formatByMagnitude)],
    ]
  })
}

/** The round trips to a remote target: HTTP and TCP handshake p50 before and during the cell, and what the adjusted rows subtract. */
function networkLine(record: RunRecord): string | null {
  const n = record.network
  if (n === undefined) return null
  const series = (s: NetworkRttSeries): string =>
    s.p50Ms === null
      ? `none answered (${s.failed} failed)`
      : `p50 ${formatFixed(s.p50Ms, 2)} ms (${s.samples}${s.failed > 0 ? `, ${s.failed} failed` : ''})`
  const http =
    n.http.endpoint === null
      ? `HTTP not probed: ${n.http.reason ?? 'no endpoint answered'}`
      : `HTTP RTT (GET ${n.http.endpoint}) before ${series(n.http.before)}, during ${series(n.http.during)}`
  const adjusted =
    n.adjusted === null
      ? 'no adjustment (no probe answered)'
      : `network-adjusted rows subtract ${formatFixed(n.adjusted.rttMs, 2)} ms, the ${estimatorText(n.adjusted.estimator)}; gates judge the raw rows`
  return `network to ${n.host}: ${http} · TCP handshake before ${series(n.handshake.before)}, during ${series(n.handshake.during)} · ${adjusted}`
}

/** "N failed", or "failed unknown" for an import whose source records no failed count. */
export function failedText(record: RunRecord): string {
  return record.failed === null ? 'failed unknown' : `${record.failed} failed`
}

/** Renders the readable summary of a run record: headline, a metric table, failures, harness health. */
export function renderSummary(record: RunRecord, recordPath?: string): string {
  const { plan, metrics, harness } = record
  const lines: string[] = []
  const api = plan.api ?? 'api unknown'
  const load = plan.arrival === null ? `concurrency ${plan.concurrency}` : 'open loop'
  lines.push(`${record.runId} · ${plan.model} @ ${record.target.baseUrl ?? 'imported'} · ${api} · ${load}`)
  lines.push(
    `${plan.requests} requests: ${record.completed} ok, ${failedText(record)}` +
      `${record.cancelled > 0 ? `, ${record.cancelled} cancelled` : ''}` +
      `${record.unsent > 0 ? `, ${record.unsent} never sent (cut short)` : ''} · wall clock ${metrics.wallClockMs === null ? 'unknown' : formatSeconds(metrics.wallClockMs, 2)}` +
      ` · output ${formatByMagnitude(metrics.outputThroughputTokPerS)} tok/s · ${formatByMagnitude(metrics.requestRateReqPerS)} req/s`,
  )
  const w = plan.workload
  const hash =
    w.requestStreamSha256 === null
      ? ''
      : ` · request stream ${w.requestStreamSha256.slice(0, 12)}…` +
        (w.wireMatchesPlan === true ? ' (wire bytes match)' : w.wireMatchesPlan === false ? ' (WIRE BYTES DIFFER FROM PLAN)' : '')
  const sizing =
    w.calibration === null
      ? ''
      : w.calibration.method === 'engine-tokenizer'
        ? ` (engine tokenizer, ±${w.calibration.toleranceTokens})`
        : w.calibration.method === 'estimate'
          ? ' (estimated)'
          : ''
  const prefix = w.prefixCache.mode === 'shared' ? `shared prefix ${w.prefixCache.tokens ?? '?'} tokens` : `prefix ${w.prefixCache.mode}`
  lines.push(`workload ${w.kind} · prompt ${w.promptTokens} tokens planned${sizing} · ${prefix} · seed ${w.seed ?? 'unknown'}${hash}`)
  const checks: string[] = []
  if (metrics.canaries !== null) checks.push(`canaries ${metrics.canaries.passed}/${metrics.canaries.samples} passed`)
  if (metrics.outputControl !== null) {
    const oc = metrics.outputControl
    checks.push(
      `output control ${w.outputControl.mode} (${w.outputControl.knob}): ${oc.exact}/${oc.samples} exact` +
        (oc.unobservable > 0 ? `, ${oc.unobservable} without usage` : ''),
    )
  }
  if (metrics.accuracy !== null) {
    const a = metrics.accuracy
    checks.push(
      `accuracy ${a.correct}/${a.samples} = ${formatFixedPercent(a.rate)} ` +
        `[${formatFixedPercent(a.wilson95Low)}, ${formatFixedPercent(a.wilson95High)}] (Wilson 95%)`,
    )
  }
  if (checks.length > 0) lines.push(checks.join(' · '))
  for (const line of [arrivalLine(record), goodputLine(record), cancelLine(record), specDecodeLine(record)])
    if (line !== null) lines.push(line)
  if (w.calibration?.warning) lines.push(`warning: ${w.calibration.warning}`)
  if (w.floorMet === false) {
    lines.push(
      `warning: ${plan.requests} requests at concurrency ${plan.concurrency} is below the floor of ${w.requestsPerSlotFloor} per slot; ` +
        'ramp-up and drain dominate this cell',
    )
  }
  const sources = Object.entries(metrics.completionTokenSources).filter(([, n]) => n > 0)
  if (sources.length > 0) lines.push(`completion tokens from ${sources.map(([s, n]) => `${s} (${n})`).join(', ')}`)
  lines.push('')

  const names = [...REQUEST_METRIC_NAMES, 'itlMs', 'queueDelayMs', 'sendLagMs'] as const
  let descriptive = false
  const header = ['metric', 'n', 'mean', '±95%', 'p50', 'p90', 'p95', 'p99', 'max']
  const rows = names.flatMap((name) => {
    const d: Distribution = metrics.distributions[name]
    if (d.samples === 0) return []
    const half = d.ci95High !== null && d.mean !== null ? d.ci95High - d.mean : null
    const mark = p99IsDescriptive(d) ? '*' : ''
    descriptive ||= mark !== ''
    return [
      [
        LABELS[name] ?? name,
        String(d.samples),
        ...[d.mean, half, d.p50, d.p90, d.p95].map(formatByMagnitude),
        formatByMagnitude(d.p99) + mark,
        formatByMagnitude(d.max),
      ],
    ]
  })
  rows.push(...networkAdjustedRows(record))
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] as string).length)))
  lines.push(pad(header, widths))
  for (const row of rows) lines.push(pad(row, widths))
  if (descriptive) lines.push(`* p99 is descriptive only below ${P99_MIN_SAMPLES} samples (nearest-rank percentiles).`)

  const failures = Object.entries(record.failures)
  if (failures.length > 0) {
    lines.push('')
    lines.push(`failed requests (excluded from every distribution): ${failures.map(([code, n]) => `${code} ×${n}`).join(', ')}`)
    for (const r of record.requests) {
      if (r.status === 'failed') lines.push(`  #${r.index} ${r.error.code}: ${r.error.message}`)
      if (lines.length > 60) break
    }
  }
  const network = networkLine(record)
  if (network !== null) lines.push('', network)
  lines.push(...engineLines(record))
  if (harness.clientCpuShare !== null) {
    lines.push('')
    const figures =
      `client CPU ${harness.clientCpuShare.toFixed(2)} core · send lag p99 ${formatByMagnitude(harness.sendLagP99Ms)} ms · ` +
      `event-loop delay p99 ${formatByMagnitude(harness.eventLoopDelayP99Ms)} ms` +
      (harness.hostStealShare == null ? '' : ` · host steal ${formatFixedPercent(harness.hostStealShare)}`) +
      batchedReads(harness.readBatching)
    lines.push(
      harness.harnessLimited
        ? `HARNESS-LIMITED (${harness.reasons.join('; ')}): the client was the bottleneck, ` +
            `these latencies are not the engine's · ${figures}`
        : `harness ok · ${figures}`,
    )
  }
  if (recordPath !== undefined) lines.push(`run record: ${recordPath}`)
  return lines.join('\n')
}

/** The harness line's note of batched reads, when the reading thread paused at all. */
function batchedReads(batching: ReadBatching | undefined): string {
  if (batching === undefined || batching.pauses === 0) return ''
  return ` · reads batched: ${batching.pauses} pauses, ${formatByMagnitude(batching.pausedMs)} ms, longest ${formatByMagnitude(batching.longestPauseMs)} ms`
}
