import type { EngineJob } from './scheduler.ts'

/** The capacity an admission queue holds jobs to: seats in the batch and KV tokens, each unlimited when null. */
export interface AdmissionLimits {
  maxBatch: number | null
  kvBudgetTokens: number | null
}

/**
 * The engine's admission under a capacity limit: a job holds a seat and reserves its KV tokens
 * from admission until it leaves the batch; jobs beyond the seats or the budget wait in a FIFO
 * queue whose head blocks the rest. When to admit (at once, or at a step boundary) is the
 * engine's call.
 * @example
 * const admission = new Admission({ maxBatch: 1, kvBudgetTokens: null })
 * admission.enqueue(a); admission.enqueue(b)
 * admission.next() // a, seated
 * admission.next() // null: b waits for a's seat
 */
export class Admission {
  readonly #limits: AdmissionLimits
  readonly #waiting: EngineJob[] = []
  readonly #seated = new Set<EngineJob>()
  #reserved = 0
  #maxQueued = 0

  constructor(limits: AdmissionLimits) {
    this.#limits = limits
  }

  /** Whether a capacity limit applies; without one every job goes straight to prefill. */
  get limited(): boolean {
    return this.#limits.maxBatch !== null || this.#limits.kvBudgetTokens !== null
  }

  /** Jobs waiting now. */
  get queued(): number {
    return this.#waiting.length
  }

  /** The most jobs that waited at once, as counted by `countQueued`. */
  get maxQueued(): number {
    return this.#maxQueued
  }

  /** KV tokens the seated jobs reserve now. */
  get reservedTokens(): number {
    return this.#reserved
  }

  /** A job joins the back of the queue. */
  enqueue(job: EngineJob): void {
    this.#waiting.push(job)
  }

  /** Notes the queue's length toward `maxQueued`. */
  countQueued(): void {
    this.#maxQueued = Math.max(this.#maxQueued, this.#waiting.length)
  }

  /** Seats the head of the queue when a seat and its KV room are free, and returns it; null otherwise. */
  next(): EngineJob | null {
    const job = this.#waiting[0]
    if (job === undefined) return null
    if (this.#limits.maxBatch !== null && this.#seated.size >= this.#limits.maxBatch) return null
    if (this.#limits.kvBudgetTokens !== null && this.#reserved + job.reservedTokens > this.#limits.kvBudgetTokens) return null
    this.#waiting.shift()
    this.#seated.add(job)
    this.#reserved += job.reservedTokens
    return job
  }

  /** Takes a job out of the queue when it waits there; false when it did not. */
  withdraw(job: EngineJob): boolean {
    const at = this.#waiting.indexOf(job)
    if (at >= 0) this.#waiting.splice(at, 1)
    return at >= 0
  }

  /** Frees a seated job's seat and KV; false when it held none. */
  release(job: EngineJob): boolean {
    if (!this.#seated.delete(job)) return false
    this.#reserved -= job.reservedTokens
    return true
  }

  /** Drops every job, waiting or seated. */
  clear(): void {
    this.#waiting.length = 0
    this.#seated.clear()
    this.#reserved = 0
  }
}
