/**
 * Preemption beside the verdict: how many requests each arm's engine sent back to its queue for
 * lack of KV cache (vLLM preemptions, SGLang retractions) while the gate's records were measured.
 * A preempted request recomputes its KV and comes back slow, so arms that preempted very
 * differently may differ by memory pressure rather than by the change under test.
 */
import { formatFixedPercent } from '../number-format.ts'
import type { ArmPreemptions, GateDecision, PreemptionFacts } from '../schema/gate.ts'
import type { GateRecord } from './arms.ts'

/** An arm preempting in more than this share of its requests can be uneven with the other. */
const UNEVEN_PREEMPTION_SHARE = 0.05
/** …when its count is more than this many times the other's… */
const UNEVEN_PREEMPTION_RATIO = 2
/** …and exceeds it by at least this many. */
const UNEVEN_PREEMPTION_MIN_DIFFERENCE = 5

/** One launch's preemptions: its engine's count, or null with the reason. */
function launchPreemptions(launch: GateRecord): { count: number | null; reason: string | null } {
  const telemetry = launch.telemetry
  if (telemetry === undefined || telemetry === null) return { count: null, reason: 'the record has no telemetry' }
  const engine = telemetry.engine
  if (engine.status === 'absent') return { count: null, reason: `no engine metrics: ${engine.reason}` }
  const { preemptions, reasons } = engine.occupancy
  if (preemptions === null) {
    return { count: null, reason: reasons.preemptions ?? 'the record was written before servegate read preemptions' }
  }
  return { count: preemptions, reason: null }
}

/**
 * An arm's preemptions summed over its launches, with the requests they sent; null with the first
 * launch's reason when any launch has no count (a partial sum would understate it). Pure.
 * @example armPreemptions([record]) // { count: 12, requests: 256, perRequest: 0.046875, reason: null }
 */
export function armPreemptions(launches: readonly GateRecord[]): ArmPreemptions {
  const requests = launches.reduce((n, launch) => n + launch.requests.length, 0)
  let count = 0
  for (const launch of launches) {
    const got = launchPreemptions(launch)
    if (got.count === null) return { count: null, requests, perRequest: null, reason: got.reason }
    count += got.count
  }
  return { count, requests, perRequest: requests === 0 ? null : count / requests, reason: null }
}

/**
 * Whether the arms preempted very differently: the arm with more preemptions had them in more than
 * {@link UNEVEN_PREEMPTION_SHARE} of its requests, more than {@link UNEVEN_PREEMPTION_RATIO}× the
 * other's count and at least {@link UNEVEN_PREEMPTION_MIN_DIFFERENCE} more. False when either count
 * is unknown. Pure.
 * @example unevenPreemptions({ count: 3, … }, { count: 40, requests: 256, … }) // true
 */
export function unevenPreemptions(baseline: ArmPreemptions, candidate: ArmPreemptions): boolean {
  if (baseline.count === null || candidate.count === null) return false
  const [more, fewer] = candidate.count >= baseline.count ? [candidate, baseline] : [baseline, candidate]
  const moreCount = more.count as number
  const fewerCount = fewer.count as number
  return (
    more.perRequest !== null &&
    more.perRequest > UNEVEN_PREEMPTION_SHARE &&
    moreCount > UNEVEN_PREEMPTION_RATIO * fewerCount &&
    moreCount - fewerCount >= UNEVEN_PREEMPTION_MIN_DIFFERENCE
  )
}

/** Each arm's preemptions over the launches a gate read, and whether they were uneven. Pure. */
export function pairPreemptions(baseline: readonly GateRecord[], candidate: readonly GateRecord[]): PreemptionFacts {
  const b = armPreemptions(baseline)
  const c = armPreemptions(candidate)
  return { baseline: b, candidate: c, uneven: unevenPreemptions(b, c) }
}

/** One arm as renderers show it: `3 in 256 requests (1.2%)`, or `not reported` (the reason is in the evidence). */
function armText(arm: ArmPreemptions): string {
  if (arm.count === null) return 'not reported'
  const share = arm.perRequest === null ? '' : ` (${formatFixedPercent(arm.perRequest, 1)})`
  return `${arm.count} in ${arm.requests} requests${share}`
}

/**
 * The preemptions line every renderer shows beside a verdict; null when neither arm's engine
 * reported a count (nothing to show beside it).
 * @example preemptionText(facts) // 'baseline 3 in 256 requests (1.2%), candidate 40 in 256 requests (15.6%)'
 */
export function preemptionText(facts: PreemptionFacts | undefined): string | null {
  if (facts === undefined || (facts.baseline.count === null && facts.candidate.count === null)) return null
  return `baseline ${armText(facts.baseline)}, candidate ${armText(facts.candidate)}`
}

/** The warning of arms that preempted very differently, with both counts. */
function unevenPreemptionWarning(facts: PreemptionFacts): string {
  const more = (facts.candidate.count ?? 0) >= (facts.baseline.count ?? 0) ? 'candidate' : 'baseline'
  return (
    `the arms preempted very differently (${preemptionText(facts) ?? ''}): the ${more}'s engine ran short of KV cache ` +
    'and recomputed preempted requests, so memory pressure, not only the change, may explain the effect; ' +
    'check the KV memory setting (vLLM --gpu-memory-utilization, SGLang --mem-fraction-static) and the batch limit on both arms'
  )
}

/**
 * A win or hold decision with each arm's preemptions beside it, and a warning when the arms
 * preempted very differently (see {@link unevenPreemptions}). The outcome is unchanged. Pure.
 */
export function withPreemptions(decision: GateDecision, baseline: readonly GateRecord[], candidate: readonly GateRecord[]): GateDecision {
  const preemptions = pairPreemptions(baseline, candidate)
  const warnings = preemptions.uneven ? [...decision.warnings, unevenPreemptionWarning(preemptions)] : decision.warnings
  return { ...decision, warnings, preemptions }
}

/**
 * A gate table's preemptions cell: `baseline / candidate` counts, `uneven` when the arms preempted
 * very differently; `—` when neither arm's engine reported them.
 * @example preemptionCell(facts) // '1 / 12 (uneven)'
 */
export function preemptionCell(facts: PreemptionFacts | undefined, absent: string): string {
  if (facts === undefined || (facts.baseline.count === null && facts.candidate.count === null)) return absent
  const count = (arm: ArmPreemptions): string => (arm.count === null ? absent : String(arm.count))
  return `${count(facts.baseline)} / ${count(facts.candidate)}${facts.uneven ? ' (uneven)' : ''}`
}

/** The heading of a gate table's preemptions column. */
export const PREEMPTION_HEAD = 'preemptions (baseline / candidate)'

/** Whether any of the decisions has a preemption count to show (a gate table then gains the column). */
export function reportsPreemptions(decisions: readonly GateDecision[]): boolean {
  return decisions.some((d) => preemptionText(d.preemptions) !== null)
}
