import type { NoiseFloor, NoiseProfile } from '../schema/noise.ts'
import { normalQuantile, studentTQuantile } from '../stats/distributions.ts'
import type { GateRecord } from './arms.ts'
import { DEFAULT_CONFIDENCE } from './gate-options.ts'
import { requestSpread } from './launch-figures.ts'
import { resolveNoiseFloor } from './noise-floor.ts'

/** Power the sample sizes are planned at: a real change of the planned size is claimed 80% of the time. */
export const PLANNED_POWER = 0.8

/** The most launches per arm a plan names before it says no practical design detects the change. */
const MAX_PLANNED_LAUNCHES = 64

/** The most requests per arm a plan names. */
const MAX_PLANNED_REQUESTS = 1_000_000

/** What a gate on one metric can detect with the launch noise measured, and what it needs for a target change. */
export interface DetectableChange {
  /** One request's sd of the paired log ratio (the request part). */
  requestSd: number
  /** The launch-noise floor the gate uses, a relative sd per launch. */
  launchNoise: number
  /** Paired requests per arm of the current cell. */
  requests: number
  /** The smallest relative change one launch per arm at `requests` detects with PLANNED_POWER (0.062: 6.2%). */
  detectable: number
  /** The target change the rest is planned for (0.05: 5%). */
  target: number
  /** Paired requests per arm that detect `target` with one launch per arm; null when the launch-noise floor alone is too wide. */
  requestsForTarget: number | null
  /** Launches per arm, each of `requests`, that detect `target` with the launch-level test; null past MAX_PLANNED_LAUNCHES. */
  launchesForTarget: number | null
}

/**
 * Sample sizes of a gate at its default level, one-sided 1 − α with α = (1 − DEFAULT_CONFIDENCE)/2
 * (99%), and power 1 − β (80%), in the gate's own variance model: the log effect of one launch
 * per arm has variance V(n) = s²/n + 2·u², s the request part (`requestSd`), u the launch-noise
 * floor. Then:
 * - detectable change at n: exp((z₁₋α + z₁₋β)·√V(n)) − 1;
 * - requests per arm for a target change d: n = s² / ((ln(1 + d)/(z₁₋α + z₁₋β))² − 2·u²), none
 *   when the floor alone is as wide;
 * - launches per arm r (each of n requests, the launch-level t-test on 2r − 2 degrees of freedom):
 *   the smallest r ≥ 2 with (t₁₋α + t₁₋β)·√((2·u² + s²/n)/r) ≤ ln(1 + d).
 * @example detectableChange({ requestSd: 0.1, launchNoise: 0.02, requests: 64, target: 0.05 }).detectable // ≈ 0.112
 */
export function detectableChange(p: { requestSd: number; launchNoise: number; requests: number; target: number }): DetectableChange {
  const alpha = (1 - DEFAULT_CONFIDENCE) / 2
  const beta = 1 - PLANNED_POWER
  const z = normalQuantile(1 - alpha) + normalQuantile(1 - beta)
  const s2 = p.requestSd ** 2
  const floor2 = 2 * p.launchNoise ** 2
  const detectable = Math.exp(z * Math.sqrt(s2 / p.requests + floor2)) - 1
  const goal = Math.log1p(p.target)
  const room = (goal / z) ** 2 - floor2
  const requestsForTarget = room > 0 ? Math.min(MAX_PLANNED_REQUESTS, Math.max(2, Math.ceil(s2 / room))) : null
  let launchesForTarget: number | null = null
  for (let r = 2; r <= MAX_PLANNED_LAUNCHES; r++) {
    const df = 2 * r - 2
    const t = studentTQuantile(1 - alpha, df) + studentTQuantile(1 - beta, df)
    if (t * Math.sqrt((floor2 + s2 / p.requests) / r) <= goal) {
      launchesForTarget = r
      break
    }
  }
  return { ...p, detectable, requestsForTarget, launchesForTarget }
}

/** What one metric of a profile means for the gates on this testbed. */
export interface ProfileReading {
  metric: string
  /** The profile's launch-to-launch sd and its upper bound. */
  sd: number
  upper: number
  /** The floor a gate on this testbed resolves from the profile (the bound, or the assumed floor when larger). */
  floor: NoiseFloor
  /** What a single-launch gate detects and needs; null for a cell-level figure (no request part). */
  change: DetectableChange | null
}

/**
 * Reads a profile in the user's terms: each metric's spread, the floor a gate resolves from it,
 * and (for per-request metrics) the change a gate at the calibrated cell size detects and what
 * `target` needs, the request part taken from the calibration's own launches (`requestSpread`).
 */
export function readProfile(profile: NoiseProfile, records: readonly GateRecord[], target: number): ProfileReading[] {
  return Object.entries(profile.metrics).map(([metric, spread]) => {
    const floor = resolveNoiseFloor({ metric, testbed: profile.testbed, profile: { path: 'this profile', profile } })
    const request = requestSpread(records, metric)
    const change =
      request === null ? null : detectableChange({ requestSd: request.sd, launchNoise: floor.value, requests: request.requests, target })
    return { metric, sd: spread.sd, upper: spread.upper, floor, change }
  })
}
