import type { StreamObservation } from '../client/stream.ts'
import type { CancelPlan } from '../schema/run.ts'
import { cancelPlan, isCancelled, type ResolvedCancelSpec } from '../workload/cancel-plan.ts'

/**
 * The cancellations of one cell as it runs: which measured requests are aborted (see
 * `isCancelled`), the abort of each `afterMs` after it was handed to the client, and which aborts
 * fired before their request ended.
 * @example
 * const cancels = new Cancellations({ share: 0.5, afterMs: 100, drainWithinMs: null }, 17, 32)
 * const obs = await cancels.send(3, cellSignal, (signal) => transport.send(body, capture, signal))
 * cancels.fired(3) // true when request 3 was still streaming 100 ms after it was sent
 */
export class Cancellations {
  readonly plan: CancelPlan
  readonly #fired = new Set<number>()

  /**
   * @param seed the workload's seed
   * @param count the measured requests planned
   */
  constructor(spec: ResolvedCancelSpec, seed: number, count: number) {
    this.plan = cancelPlan(spec, seed, count)
  }

  /**
   * Sends request `index` through `send`: a chosen one with a signal that also aborts `afterMs`
   * after this call, the others with the cell's own signal.
   */
  send(index: number, signal: AbortSignal, send: (signal: AbortSignal) => Promise<StreamObservation>): Promise<StreamObservation> {
    if (!isCancelled(this.plan.seed, this.plan.share, index)) return send(signal)
    const abort = new AbortController()
    const timer = setTimeout(() => {
      this.#fired.add(index)
      abort.abort()
    }, this.plan.afterMs)
    return send(AbortSignal.any([signal, abort.signal])).finally(() => clearTimeout(timer))
  }

  /** Whether the plan's abort of request `index` fired before it ended; asked once, as it ends. */
  fired(index: number): boolean {
    return this.#fired.delete(index)
  }
}
