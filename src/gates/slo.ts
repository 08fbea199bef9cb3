import { countGood, describeSLO } from '../metrics/goodput.ts'
import type { GateDecision } from '../schema/gate.ts'
import type { ResolvedSLO } from '../schema/load.ts'
import type { RunRecord } from '../schema/run.ts'
import { normalQuantile } from '../stats/distributions.ts'
import { wilsonInterval } from '../stats/wilson.ts'
import { sloMethod } from './method-text.ts'
import { sloRule } from './rule-text.ts'
import { failedNotGoodWarning, harnessLimitedWarning, pooledLaunchesWarning, sloInconclusiveWarning } from './warning-text.ts'
import { parseOptions, type ResolvedSLOGateOptions, SLOGateOptions } from './gate-options.ts'
import { decideHint, type DecideSetting, harnessSettings, MAX_REQUESTS_HINT, sloRequestsSetting } from './decide-hints.ts'

/** What the SLO gate reads of a run record: its requests, its wall clock and its harness health. */
export type SLORecord = Pick<RunRecord, 'requests' | 'harness'> & { metrics: Pick<RunRecord['metrics'], 'wallClockMs'> }

type Outcome = GateDecision['outcome']

/** The objectives of the options, as an SLO. */
function sloOf(o: ResolvedSLOGateOptions): ResolvedSLO {
  return { ttftMs: o.ttftMs, tpotMs: o.tpotMs, e2eMs: o.e2eMs, itlMs: o.itlMs, itlPercentile: o.itlPercentile }
}

function zOf(confidence: number): number {
  return normalQuantile(1 - (1 - confidence) / 2)
}

/** Pass when the Wilson lower bound reaches the required share, fail when the upper bound is below it. */
function judge(low: number, high: number, required: number): Outcome {
  if (low >= required) return 'pass'
  if (high < required) return 'fail'
  return 'inconclusive'
}

/**
 * Requests that would likely decide an inconclusive result if the good share stayed as it is:
 * the smallest n whose Wilson interval at that share clears the required share. Null when the
 * share sits on the threshold, or beyond `MAX_REQUESTS_HINT`.
 */
export function sloRequestsHint(good: number, samples: number, required: number, confidence: number): number | null {
  if (samples === 0) return null
  const share = good / samples
  if (share === required) return null
  const z = zOf(confidence)
  const decides = (n: number): boolean => {
    const { low, high } = wilsonInterval(Math.round(share * n), n, z)
    return judge(low as number, high as number, required) !== 'inconclusive'
  }
  let high = samples + 1
  while (!decides(high)) {
    if (high >= MAX_REQUESTS_HINT) return null
    high = Math.min(MAX_REQUESTS_HINT, high * 2)
  }
  let low = samples
  while (high - low > 1) {
    const mid = Math.floor((low + high) / 2)
    if (decides(mid)) high = mid
    else low = mid
  }
  return high
}

/**
 * An SLO gate over one cell (or its launches, pooled): is the share of good requests (ok and
 * meeting every objective; a failed request is never good) at least `percentile`%? The share's
 * Wilson score interval at `confidence` decides: pass when its lower bound reaches the required
 * share, fail when its upper bound is below it, otherwise inconclusive with the requests that
 * would likely decide it. A harness-limited record is never judged (its latencies are not the
 * engine's): the outcome is inconclusive with the reason, and its `decideHint` names the harness
 * setting that would have passed (with the requests, when the share would not decide either).
 * @example sloGate(record, { ttftMs: 500, tpotMs: 50, percentile: 95 })
 */
export function sloGate(records: SLORecord | readonly SLORecord[], options: SLOGateOptions): GateDecision {
  const o = parseOptions(typeof options?.gate === 'string' ? options.gate : 'toMeetSLO', SLOGateOptions, options)
  const launches: readonly SLORecord[] = Array.isArray(records) ? records : [records as SLORecord]
  if (launches.length === 0) throw new TypeError(`${o.gate}: needs at least one run record`)
  const slo = sloOf(o)
  let samples = 0
  let good = 0
  let failed = 0
  let wallClockMs: number | null = 0
  for (const record of launches) {
    const counted = countGood(record.requests, slo)
    samples += counted.samples
    good += counted.good
    failed += counted.missed.failed
    // One launch whose source recorded no duration leaves the pooled wall clock unknown.
    wallClockMs = wallClockMs === null || record.metrics.wallClockMs === null ? null : wallClockMs + record.metrics.wallClockMs
  }
  const required = o.percentile / 100
  const { low, high } = wilsonInterval(good, samples, zOf(o.confidence))
  const warnings: string[] = []
  if (launches.length > 1) warnings.push(pooledLaunchesWarning(launches.length))
  if (failed > 0) warnings.push(failedNotGoodWarning(failed))
  const share: Outcome = low === null || high === null ? 'inconclusive' : judge(low, high, required)
  let outcome = share
  // What the share alone needs to decide, judged or not: the same count either way.
  const requests = share === 'inconclusive' && samples > 0 ? sloRequestsHint(good, samples, required, o.confidence) : null
  // Pooled launches: each launch's `requests`, so that together they reach the count.
  const settings: DecideSetting[] =
    requests === null
      ? []
      : [sloRequestsSetting({ requests: Math.ceil(requests / launches.length), samples, good, required, confidence: o.confidence })]
  // Undecided with no count that would decide it (the share on the threshold): no hint.
  const undecidable = share === 'inconclusive' && requests === null
  let hint = undecidable ? null : decideHint(settings)
  const limited = launches.filter((r) => r.harness.harnessLimited)
  if (limited.length > 0) {
    outcome = 'inconclusive'
    warnings.push(harnessLimitedWarning(limited.map((r) => r.harness.reasons.join('; '))))
    const harness = harnessSettings(limited.map((r) => r.harness))
    hint = harness === null || undecidable ? null : decideHint([...harness, ...settings])
  } else if (outcome === 'inconclusive' && samples > 0) {
    warnings.push(sloInconclusiveWarning({ confidence: o.confidence, low: low as number, high: high as number, required }))
  }
  const goodReqPerS = wallClockMs !== null && wallClockMs > 0 ? good / (wallClockMs / 1000) : null
  return {
    gate: o.gate,
    outcome,
    kind: 'superiority',
    metric: `good fraction (${describeSLO(slo)})`,
    effect: {
      estimate: samples > 0 ? good / samples : null,
      low,
      high,
      unit: 'fraction',
      confidence: o.confidence,
      method: sloMethod({ good, samples, wallClockMs, goodReqPerS }),
    },
    samples: { baseline: 0, candidate: samples, paired: 0 },
    rule: sloRule({ slo, percentile: o.percentile, confidence: o.confidence }),
    moreRequestsHint: requests,
    decideHint: hint,
    warnings,
  }
}
