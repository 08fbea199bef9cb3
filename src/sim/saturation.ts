import { resolveSimOptions, type SimOptions } from './sim-options.ts'

/** The saturation point of the simulated engine for one request shape. */
export interface SimCapacity {
  /** Requests admitted at once: the batch limit, or what the KV budget holds, whichever is smaller. */
  seats: number
  /** One decode step with every seat busy, ms. */
  stepMs: number
  /** How long a request holds its seat at saturation: one step per output token, ms. */
  seatMs: number
  /** The highest request rate the engine sustains: seats / seatMs, requests/s. */
  ratePerS: number
  /** True when the figure is exact (see `reason`); false when it is an approximation. */
  exact: boolean
  reason: string
}

/**
 * The request rate at which the simulated engine saturates, for requests of `promptTokens`
 * (as the engine counts them, chat template included) and `outputTokens` each.
 *
 * With a finite number of seats, a saturated engine admits a waiting request at the step
 * boundary where another left; its prefill runs within that step (first token), it joins the
 * batch at the next boundary and leaves at its last token: the seat is held for exactly
 * `outputTokens` steps. So the capacity is seats / (outputTokens × stepMs). Exact when
 * `batchSlowdown` is 0 (every step has the same length) and the prefills of every seat that
 * turns over at one boundary fit in one step; otherwise the step length of a full batch is used
 * and `exact` is false. Above this rate the queue grows without bound; below it, it does not.
 * @returns null when nothing limits the seats (no `maxBatch`, no `kvBudgetTokens`)
 * @example simCapacity({ maxBatch: 4, decodeTokPerS: 100, batchSlowdown: 0 }, { promptTokens: 64, outputTokens: 8 })?.ratePerS // 50
 */
export function simCapacity(options: SimOptions, request: { promptTokens: number; outputTokens: number }): SimCapacity | null {
  const o = resolveSimOptions(options)
  const byKv = o.kvBudgetTokens === null ? Infinity : Math.floor(o.kvBudgetTokens / (request.promptTokens + request.outputTokens))
  const seats = Math.min(o.maxBatch ?? Infinity, byKv)
  if (!Number.isFinite(seats)) return null
  if (seats < 1)
    throw new RangeError(
      `simCapacity: one request of ${request.promptTokens + request.outputTokens} KV tokens does not fit the budget of ${o.kvBudgetTokens}`,
    )
  const stepMs = (1000 / o.decodeTokPerS) * (1 + o.batchSlowdown * (seats - 1))
  const seatMs = request.outputTokens * stepMs
  // A prefill timer fires no sooner than a millisecond, however short the modelled prefill.
  const prefillMs = Math.max(1, (request.promptTokens / o.prefillTokPerS) * 1000)
  const reasons: string[] = []
  if (o.batchSlowdown !== 0)
    reasons.push(`batchSlowdown ${o.batchSlowdown} makes steps with fewer streams shorter (the step of a full batch was used)`)
  if (seats * prefillMs >= stepMs)
    reasons.push(`${seats} prefills of ${prefillMs.toFixed(2)} ms do not fit in one ${stepMs.toFixed(2)} ms step`)
  if (request.outputTokens < 2) reasons.push('a one-token reply leaves at its prefill, not at a step boundary')
  return {
    seats,
    stepMs,
    seatMs,
    ratePerS: (seats / seatMs) * 1000,
    exact: reasons.length === 0,
    reason:
      reasons.length === 0 ? `${seats} seats × 1 request per ${request.outputTokens} steps of ${stepMs.toFixed(2)} ms` : reasons.join('; '),
  }
}
