import { z } from 'zod'
import { createRandom, mixSeed } from '../random.ts'
import type { CancelPlan } from '../schema/run.ts'

/**
 * A cell's cancellations as declared: a seeded share of the measured requests is aborted `afterMs`
 * after each was sent (a user who gives up, a client timeout, an agent that moves on), recorded as
 * `cancelled`, neither ok nor failed. Warm-up requests are never cancelled.
 * @example { share: 0.25, afterMs: 200 }
 */
export const CancelSpec = z.strictObject({
  /** The share of requests aborted, 0 < share ≤ 1 (each request is chosen by its own seeded draw). */
  share: z.number().gt(0, 'must be above 0 (a share of the requests); remove cancel to cancel none').max(1),
  /** Time from a chosen request's send to its abort, ms (0 aborts it as it goes out). */
  afterMs: z.number().min(0),
  /**
   * How long the engine may take to go back to idle after the cell (running and waiting requests
   * at 0, KV usage at its pre-cell level), ms; null for the default: 10000, or 35000 on SGLang,
   * whose gauges refresh only every 30 s when idle. @default null
   */
  drainWithinMs: z.number().positive().nullable().default(null),
})
export type CancelSpec = z.input<typeof CancelSpec>
export type ResolvedCancelSpec = z.infer<typeof CancelSpec>

/** Keeps the cancellation draws apart from every other draw made from the same workload seed. */
const CANCEL_SALT = 0x63616e63

/**
 * Whether request `index` is one the plan cancels: its own seeded draw falls below `share`. A
 * function of the seed and the index only, so both arms of a pair cancel the same requests. Pure.
 */
export function isCancelled(seed: number, share: number, index: number): boolean {
  return createRandom(mixSeed(mixSeed(seed, CANCEL_SALT), index))() < share
}

/** The cancellations a cell plans over its `count` measured requests, as its record states them. Pure. */
export function cancelPlan(spec: ResolvedCancelSpec, seed: number, count: number): CancelPlan {
  const indices: number[] = []
  for (let i = 0; i < count; i++) if (isCancelled(seed, spec.share, i)) indices.push(i)
  return { share: spec.share, afterMs: spec.afterMs, seed, indices }
}
