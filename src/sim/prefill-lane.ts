import type { EngineJob } from './scheduler.ts'

/**
 * The engine's prefill lane: one job at a time, FIFO, each taking the tokens it computes (its
 * `startPrefill()`, else its `promptTokens`) over `prefillTokPerS` seconds. The next prompt
 * starts when the previous one was due to end, not when its timer fired, so timer lateness does
 * not accumulate.
 * @example const lane = new PrefillLane(50_000, () => performance.now(), (job) => join(job)); lane.add(job)
 */
export class PrefillLane {
  readonly #prefillTokPerS: number
  readonly #now: () => number
  readonly #onPrefilled: (job: EngineJob) => void
  readonly #queue: EngineJob[] = []
  #prefilling: EngineJob | null = null
  #timer: NodeJS.Timeout | null = null
  #endsAt = 0
  #freeAt = 0
  #closed = false

  /** @param onPrefilled called as a job's prefill ends; the lane takes its next job after it returns */
  constructor(prefillTokPerS: number, now: () => number, onPrefilled: (job: EngineJob) => void) {
    this.#prefillTokPerS = prefillTokPerS
    this.#now = now
    this.#onPrefilled = onPrefilled
  }

  /** The job prefilling now; null when the lane is idle. */
  get prefilling(): EngineJob | null {
    return this.#prefilling
  }

  /** Queues a job; an idle lane starts it at once. */
  add(job: EngineJob): void {
    this.#queue.push(job)
    this.#start()
  }

  /** Removes a job, queued or prefilling (the lane is then free now and takes its next). */
  cancel(job: EngineJob): void {
    const queued = this.#queue.indexOf(job)
    if (queued >= 0) this.#queue.splice(queued, 1)
    if (this.#prefilling !== job) return
    if (this.#timer) clearTimeout(this.#timer)
    this.#prefilling = null
    this.#timer = null
    this.#freeAt = this.#now()
    this.#start()
  }

  /** Cancels the timer and drops every job; nothing starts afterwards. */
  close(): void {
    this.#closed = true
    if (this.#timer) clearTimeout(this.#timer)
    this.#timer = null
    this.#prefilling = null
    this.#queue.length = 0
  }

  #start(): void {
    if (this.#closed || this.#prefilling) return
    const job = this.#queue.shift()
    if (!job) return
    this.#prefilling = job
    const startsAt = Math.max(this.#freeAt, this.#now())
    const computed = job.startPrefill?.() ?? job.promptTokens
    this.#endsAt = startsAt + (computed / this.#prefillTokPerS) * 1000
    this.#timer = setTimeout(() => this.#end(), Math.max(0, this.#endsAt - this.#now()))
  }

  #end(): void {
    const job = this.#prefilling
    this.#prefilling = null
    this.#timer = null
    this.#freeAt = this.#endsAt
    if (job) this.#onPrefilled(job)
    this.#start()
  }
}
