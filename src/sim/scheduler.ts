import { Admission } from './admission.ts'
import { PrefillLane } from './prefill-lane.ts'
import type { ResolvedSimOptions } from './sim-options.ts'

/** One request as the engine sees it: a prompt to prefill, then one `step` per generated token. */
export interface EngineJob {
  /** Prompt size, tokens; sets the prefill time unless `startPrefill` says fewer are computed. */
  readonly promptTokens: number
  /** KV tokens the job reserves while admitted: its prompt plus the output it will generate. */
  readonly reservedTokens: number
  /**
   * Called as the job's prefill starts: the prompt tokens to compute (those the prefix cache does
   * not hold). Without it, the whole prompt is computed.
   */
  startPrefill?(): number
  /**
   * Called once when the job's prefill ends (its first token), then once per decode step it is
   * in the batch. Returns false to leave the batch (finished, failed or stalled).
   */
  step(): boolean
}

/** Observers of the scheduler's events (the sim's SGLang gauges refresh on them). */
export interface EngineHooks {
  /** A job finished its prefill and is about to join the batch, which now holds `running` jobs. */
  onPrefill?(running: number): void
  /** Decode step number `step` (from 1) ended; `batchSize` jobs ran in it. */
  onStep?(step: number, batchSize: number): void
}

type Timing = Pick<ResolvedSimOptions, 'prefillTokPerS' | 'decodeTokPerS' | 'batchSlowdown' | 'maxBatch' | 'kvBudgetTokens'>

/**
 * The batching scheduler of the simulated engine: one FIFO prefill lane (`promptTokens / prefillTokPerS` s per job), then
 * a global decode loop where every job in the batch gets one token per step and a step takes
 * `1000 / decodeTokPerS * (1 + batchSlowdown * (running - 1))` ms. A job that finishes prefill
 * joins at the next step boundary. Steps and prefills are scheduled against absolute target
 * times, so timer lateness does not accumulate.
 *
 * Capacity (`maxBatch`, `kvBudgetTokens`): a job holds a seat and reserves its prompt plus output
 * tokens of KV from admission until it leaves the batch. Jobs beyond the seats or the budget wait
 * in a FIFO queue (the head blocks the rest) and are admitted at step boundaries, as an
 * iteration-level scheduler (vLLM's) admits them; an idle engine admits at once. A seat is then
 * held for exactly one step per output token while the prefills of one boundary fit in a step
 * (see `simCapacity`), which makes the saturation rate computable.
 * @example
 * const engine = new SimEngine(opts)
 * engine.submit({ promptTokens: 32, reservedTokens: 40, step: () => stream.step() })
 */
export class SimEngine {
  readonly #timing: Timing
  readonly #now: () => number
  readonly #hooks: EngineHooks
  readonly #admission: Admission
  readonly #lane: PrefillLane
  readonly #batch = new Set<EngineJob>()
  readonly #joining = new Set<EngineJob>()
  // Admitted jobs not yet gone (prefilling, joining or decoding), and those an abort leaked.
  readonly #admitted = new Set<EngineJob>()
  readonly #leaked = new Set<EngineJob>()
  #stepTimer: NodeJS.Timeout | null = null
  #steps = 0
  #stepEndsAt = 0
  #maxRunning = 0
  #closed = false

  /**
   * @param now the clock the prefills and steps are timed on, ms
   * @param hooks observers of its prefills and steps
   */
  constructor(timing: Timing, now: () => number = () => performance.now(), hooks: EngineHooks = {}) {
    this.#timing = timing
    this.#now = now
    this.#hooks = hooks
    this.#admission = new Admission(timing)
    this.#lane = new PrefillLane(timing.prefillTokPerS, now, (job) => this.#prefilled(job))
  }

  /** Queues a job for the prefill lane (under a capacity limit, for admission first). */
  submit(job: EngineJob): void {
    if (this.#closed) return
    this.#admitted.add(job)
    if (!this.#admission.limited) {
      this.#lane.add(job)
      return
    }
    this.#admission.enqueue(job)
    // An idle engine has no step boundary to wait for.
    if (this.#stepTimer === null) this.#admitWaiting()
    this.#admission.countQueued()
  }

  /**
   * Removes a job wherever it is (queued, in prefill, in the batch); a no-op when gone. With `leak`,
   * an admitted job is never stepped again but keeps its seat and KV and counts as running forever,
   * as an engine that does not free an aborted request (a job still queued has nothing to leak).
   */
  cancel(job: EngineJob, leak = false): void {
    const queued = this.#admission.withdraw(job)
    this.#batch.delete(job)
    this.#joining.delete(job)
    this.#lane.cancel(job)
    if (leak && !queued && this.#admitted.delete(job)) {
      this.#leaked.add(job)
      return
    }
    this.#release(job)
  }

  /** Jobs in the decode batch now. */
  running(): number {
    return this.#batch.size
  }

  /** Jobs an abort leaked (see `cancel`): they hold their seat and KV and count as running. */
  leaked(): number {
    return this.#leaked.size
  }

  /** The most jobs that were in the decode batch at once. */
  maxRunning(): number {
    return this.#maxRunning
  }

  /** Jobs waiting for admission (a seat in the batch or KV room); 0 without a capacity limit. */
  queued(): number {
    return this.#admission.queued
  }

  /** The most jobs that waited for admission at once. */
  maxQueued(): number {
    return this.#admission.maxQueued
  }

  /** KV tokens reserved by admitted jobs now. */
  reservedTokens(): number {
    return this.#admission.reservedTokens
  }

  /** Cancels every timer; no job is stepped afterwards. */
  close(): void {
    this.#closed = true
    this.#lane.close()
    if (this.#stepTimer) clearTimeout(this.#stepTimer)
    this.#stepTimer = null
    this.#batch.clear()
    this.#joining.clear()
    this.#admitted.clear()
    this.#leaked.clear()
    this.#admission.clear()
  }

  /** Admits waiting jobs, head first, while a seat and KV room are free; they queue for prefill. */
  #admitWaiting(): void {
    let job: EngineJob | null
    while (!this.#closed && (job = this.#admission.next()) !== null) this.#lane.add(job)
  }

  /** Frees a job's seat and KV; an idle engine admits the next at once, a stepping one at its next boundary. */
  #release(job: EngineJob): void {
    this.#admitted.delete(job)
    if (this.#admission.release(job) && this.#stepTimer === null) this.#admitWaiting()
  }

  /** A job's prefill ended: its first step is its first token; it joins the batch unless it left. */
  #prefilled(job: EngineJob): void {
    this.#hooks.onPrefill?.(this.#batch.size)
    if (job.step()) this.#join(job)
    else this.#release(job)
  }

  /** A job joins the batch at the next step boundary; an idle batch starts stepping now. */
  #join(job: EngineJob): void {
    this.#joining.add(job)
    if (this.#stepTimer) return
    this.#seatJoining()
    this.#scheduleStep(this.#now())
  }

  #seatJoining(): void {
    for (const job of this.#joining) this.#batch.add(job)
    this.#joining.clear()
    this.#maxRunning = Math.max(this.#maxRunning, this.#batch.size)
  }

  #scheduleStep(startsAt: number): void {
    const stepMs = (1000 / this.#timing.decodeTokPerS) * (1 + this.#timing.batchSlowdown * (this.#batch.size - 1))
    this.#stepEndsAt = startsAt + stepMs
    this.#stepTimer = setTimeout(() => this.#endStep(), Math.max(0, this.#stepEndsAt - this.#now()))
  }

  #endStep(): void {
    this.#stepTimer = null
    this.#steps++
    this.#hooks.onStep?.(this.#steps, this.#batch.size)
    for (const job of this.#batch) {
      if (this.#closed) return
      if (!job.step()) {
        this.#batch.delete(job)
        this.#release(job)
      }
    }
    this.#seatJoining()
    // The step boundary: seats freed by this step go to waiting jobs now.
    if (this.#admission.limited) this.#admitWaiting()
    if (this.#batch.size > 0 && !this.#closed) this.#scheduleStep(this.#stepEndsAt)
  }
}
