/**
 * What an undecided gate says would decide it: more paired requests, or more launches, sized from
 * the interval it has; and the launch-level verdict of a superiority gate, shared by the win gates.
 */
import type { GateDecision } from '../schema/gate.ts'
import { normalQuantile } from '../stats/distributions.ts'
import { launchLevelInterval } from './interval.ts'
import { launchesHintWarning } from './warning-text.ts'

/** The largest `moreRequestsHint` a gate gives. */
export const MAX_REQUESTS_HINT = 10_000

/**
 * Paired requests per arm at which the interval's half-width z·√(s²/n + v) would fall below the
 * gap |log estimate − log threshold|: n = s² / ((gap/z)² − v). Null when the gap is 0 or the
 * launch-noise floor v alone is wider; capped at MAX_REQUESTS_HINT; always more than now.
 */
export function requestsHint(gap: number, sd: number, confidence: number, launchVariance: number, current: number): number | null {
  if (gap === 0 || !Number.isFinite(gap)) return null
  const z = normalQuantile(1 - (1 - confidence) / 2)
  const room = (gap / z) ** 2 - launchVariance
  if (!(room > 0)) return null
  const needed = Math.ceil((sd * sd) / room)
  return Math.min(MAX_REQUESTS_HINT, Math.max(current + 1, needed))
}

/**
 * A superiority claim over launches: the launch-level t-interval of candidate − baseline (log
 * statistics per launch) against ln(threshold). Pass above, fail below, else inconclusive with a
 * hint of the launches per arm at which the half-width (normal quantile, a floor) would fall
 * below the gap to the threshold.
 */
export function launchLevelVerdict(
  candidate: readonly number[],
  baseline: readonly number[],
  confidence: number,
  threshold: number,
): { interval: ReturnType<typeof launchLevelInterval>; outcome: GateDecision['outcome']; hint: string | null } {
  const interval = launchLevelInterval(candidate, baseline, confidence)
  const logThreshold = Math.log(threshold)
  const outcome = interval.low > logThreshold ? 'pass' : interval.high < logThreshold ? 'fail' : 'inconclusive'
  const gap = Math.abs(interval.estimate - logThreshold)
  if (outcome !== 'inconclusive' || !(gap > 0 && interval.sd > 0)) return { interval, outcome, hint: null }
  const z = normalQuantile(1 - (1 - confidence) / 2)
  const launches = Math.ceil(2 * ((z * interval.sd) / gap) ** 2)
  const floor = Math.max(candidate.length, baseline.length) + 1
  return { interval, outcome, hint: launchesHintWarning({ launches: Math.max(launches, floor), sd: interval.sd }) }
}
