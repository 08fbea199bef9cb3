import { createHash } from 'node:crypto'
import { createRandom, exponentialVariate, gammaVariate, mixSeed } from '../random.ts'
import type { ArrivalPlan } from '../schema/load.ts'
import type { RateArrivalSpec, ResolvedArrivalSpec } from './arrival-spec.ts'

/** Salt of the arrival draws, so an arrival seed and a workload seed of the same value give unrelated streams. */
const ARRIVAL_STREAM = 0x0a77

/** `count − 1` gaps with mean 1 (in units of expected arrivals): the process before its rate is applied. */
function unitGaps(spec: RateArrivalSpec, count: number): number[] {
  if (spec.kind === 'constant') return new Array<number>(Math.max(0, count - 1)).fill(1)
  const random = createRandom(mixSeed(spec.seed, ARRIVAL_STREAM))
  const draw = spec.kind === 'poisson' ? () => exponentialVariate(random) : () => gammaVariate(random, spec.burstiness) / spec.burstiness
  return Array.from({ length: Math.max(0, count - 1) }, draw)
}

/**
 * The wall time, s, by which `u` arrivals are expected: the inverse of Λ(t) = ∫₀ᵗ λ(s) ds for a
 * rate rising linearly from r₀ to r over the ramp's T seconds, then constant at r.
 */
export function wallTimeOf(u: number, ratePerS: number, rampUp: RateArrivalSpec['rampUp']): number {
  if (rampUp === null) return u / ratePerS
  if (u === 0) return 0
  const { durationS: T, fromRatePerS: r0 } = rampUp
  const duringRamp = (T * (r0 + ratePerS)) / 2
  if (u > duringRamp) return T + (u - duringRamp) / ratePerS
  const slope = (ratePerS - r0) / T
  // (slope/2)·t² + r0·t − u = 0, in the form that stays exact as the slope goes to 0.
  return slope === 0 ? u / r0 : (2 * u) / (r0 + Math.sqrt(r0 * r0 + 2 * slope * u))
}

/**
 * The send offsets (ms from the start of the measured phase) of `count` open-loop requests,
 * drawn before the cell starts: the first at 0, then gaps of the chosen process. A ramp-up
 * time-warps the same draws, so the process keeps its shape while its rate rises.
 * @example arrivalSchedule({ kind: 'constant', ratePerS: 4, rampUp: null, maxInFlight: null }, 3) // [0, 250, 500]
 */
export function arrivalSchedule(spec: RateArrivalSpec, count: number): number[] {
  const offsets: number[] = []
  let u = 0
  const gaps = unitGaps(spec, count)
  for (let i = 0; i < count; i++) {
    offsets.push(wallTimeOf(u, spec.ratePerS, spec.rampUp) * 1000)
    u += gaps[i] ?? 0
  }
  return offsets
}

/** sha256 of the offsets in whole microseconds, one decimal per line: equal schedules, equal hashes. */
export function scheduleSha256(offsetsMs: readonly number[]): string {
  const hash = createHash('sha256')
  for (const ms of offsetsMs) hash.update(`${Math.round(ms * 1000)}\n`)
  return hash.digest('hex')
}

/** What a replayed trace contributes to the plan. */
export interface TraceFacts {
  path: string
  sha256: string
  rows: number
  replayed: number
  timeScale: number
  blockTokens: number
}

/**
 * The arrival block of a run record's plan: the spec as resolved, and the schedule it produced.
 * @param reuseShare a replayed trace's own reuse share (`traceReuseShare`); null otherwise
 */
export function arrivalPlan(
  spec: ResolvedArrivalSpec,
  offsetsMs: readonly number[],
  trace: TraceFacts | null,
  reuseShare: number | null = null,
): ArrivalPlan {
  const span = offsetsMs.length === 0 ? 0 : (offsetsMs[offsetsMs.length - 1] as number)
  const rated = spec.kind === 'trace' ? null : spec
  return {
    kind: spec.kind,
    ratePerS: rated?.ratePerS ?? null,
    burstiness: spec.kind === 'gamma' ? spec.burstiness : null,
    seed: spec.kind === 'poisson' || spec.kind === 'gamma' ? spec.seed : null,
    rampUp: rated?.rampUp ?? null,
    maxInFlight: spec.maxInFlight,
    trace,
    reuseShare,
    scheduleSha256: scheduleSha256(offsetsMs),
    scheduledSpanMs: span,
    offeredRatePerS: offsetsMs.length > 1 && span > 0 ? (offsetsMs.length - 1) / (span / 1000) : null,
  }
}

/** A short description for ids and summaries: `poisson 8.0 req/s`, `trace (×0.5)`. */
export function describeArrival(plan: ArrivalPlan): string {
  if (plan.kind === 'trace') {
    const time = plan.trace !== null && plan.trace.timeScale !== 1 ? ` (time ×${plan.trace.timeScale})` : ''
    const blocks = plan.trace?.blockTokens == null ? '' : ` (${plan.trace.blockTokens}-token blocks)`
    const reuse = plan.reuseShare === null ? '' : `, reuse share ${(plan.reuseShare * 100).toFixed(1)}%${blocks}`
    return `trace replay${time}${reuse}`
  }
  const shape = plan.kind === 'gamma' ? ` burstiness ${plan.burstiness}` : ''
  const ramp = plan.rampUp === null ? '' : `, ramp-up ${plan.rampUp.durationS} s from ${plan.rampUp.fromRatePerS} req/s`
  return `${plan.kind}${shape} ${plan.ratePerS} req/s${plan.seed === null ? '' : ` (seed ${plan.seed})`}${ramp}`
}
