import { ServegateError } from '../errors.ts'
import { monoMs } from './clock.ts'

/**
 * Of one event-loop turn, the ms a streaming thread spends on work that can wait (the ended
 * requests' records) before it lets the turn end and the reads that came meanwhile be stamped.
 */
const SLICE_MS = 0.25

/** Work waiting for a later turn, with how to settle its caller's promise. */
interface Job {
  work: () => unknown
  resolve: (value: unknown) => void
  reject: (err: unknown) => void
}

/**
 * Work that can wait, done at most about `sliceMs` of it per event-loop turn. A chunk is stamped
 * when the thread gets to its read, so every millisecond the thread spends elsewhere while chunks
 * arrive is added to their stamps. A closed loop's equal streams end together, and making every
 * ended request's record at once would keep one thread busy for milliseconds at C = 256 (its
 * next requests go out at once: a send is one socket write). Sliced, the reads that arrive
 * between slices are stamped within a turn, and the records behind wait for the turns after,
 * oldest first (`RecordHandOver`).
 *
 * `run` does work now and counts its time against this turn's slice. While the slice is spent or
 * work already waits (`open` is false), `later` queues work for the next turns: each turn runs the
 * oldest while its slice lasts, at least one however long it takes. Work started within running
 * work goes with it and counts once.
 * @example
 * const slice = new TurnSlice()
 * const results = jobs.map((job) => slice.submit(job))
 */
export class TurnSlice {
  readonly #sliceMs: number
  /** Ms of this turn's slice spent; reset when a new turn starts. */
  #usedMs = 0
  #turnScheduled = false
  /** Runs in progress: work started within one is counted with it. */
  #depth = 0
  readonly #queue: Job[] = []

  /** @param sliceMs ms a turn; Infinity: never sliced (everything runs at once) */
  constructor(sliceMs: number = SLICE_MS) {
    if (!(sliceMs > 0)) throw new ServegateError('INTERNAL', `sliceMs: a number of ms above 0 (Infinity: no slices), got ${sliceMs}`)
    this.#sliceMs = sliceMs
  }

  /**
   * True when work may run now: none waits for a later turn and this turn's slice has time left,
   * or it would be part of work running in the slice now (which counts it with its own).
   */
  get open(): boolean {
    return this.#depth > 0 || (this.#queue.length === 0 && this.#usedMs < this.#sliceMs)
  }

  /** Work queued for a later turn. */
  get waiting(): number {
    return this.#queue.length
  }

  /** Runs `work` now and counts its time against this turn's slice (once, when run within other work of the slice). */
  run<T>(work: () => T): T {
    if (this.#depth > 0) return work()
    this.#scheduleTurn()
    const startedAt = monoMs()
    this.#depth++
    try {
      return work()
    } finally {
      this.#depth--
      this.#usedMs += monoMs() - startedAt
    }
  }

  /**
   * Runs `work` now while the slice is open, else in a later turn behind the work queued before
   * it; resolves with what it returns, rejects with what it throws.
   */
  async submit<T>(work: () => T): Promise<Awaited<T>> {
    return this.open ? await this.run(work) : await this.later(work)
  }

  /** Runs `work` in a later turn, after the work queued before it; resolves with what it returns, rejects with what it throws. */
  later<T>(work: () => T): Promise<Awaited<T>> {
    return new Promise((resolve, reject) => {
      this.#queue.push({ work, resolve: resolve as (value: unknown) => void, reject })
      this.#scheduleTurn()
    })
  }

  /** Once per turn in which something ran or waits: the next turn's slice starts afresh. */
  #scheduleTurn(): void {
    if (this.#turnScheduled) return
    this.#turnScheduled = true
    setImmediate(this.#newTurn)
  }

  readonly #newTurn = (): void => {
    this.#turnScheduled = false
    this.#usedMs = 0
    while (this.#queue.length > 0) {
      const job = this.#queue.shift() as Job
      try {
        job.resolve(this.run(job.work))
      } catch (err) {
        job.reject(err)
      }
      if (this.#usedMs >= this.#sliceMs) break
    }
    if (this.#queue.length > 0) this.#scheduleTurn()
  }
}
