/**
 * Reads stamped as they come off their sockets, and parsed once every read of the same poll is in.
 *
 * One poll of the event loop can find many streams readable at once: after a busy turn, a
 * batching pause (`read-batching.ts`), or a round of equal streams ending together. libuv then
 * reads them one after another, each read's callback running to its end before the next read is
 * made. Had each been parsed in its callback (HTTP framing, SSE, the JSON of every event, a
 * finished request's settling and its slot's next send), the k-th read would have been stamped
 * after the parsing of the k − 1 before it: tens of microseconds each, milliseconds behind a
 * round's end at C = 256. Staged, a read costs its callback a clock read and a copy, so the reads
 * of one poll are stamped within microseconds of each other; they are parsed in order, each with
 * its own stamp, right after the poll (`afterReads`, before the next one).
 *
 * The copies go into one buffer per thread, reused from poll to poll. A read that would take it
 * past `MAX_STAGED_BYTES` first has the reads staged before it parsed; a read larger than that
 * is parsed at once.
 */

/** What parses a staged read: a request's exchange on its connection. */
export interface StagedTarget {
  /** Finished requests are not parsed (an abort, a failure, between staging and parsing). */
  readonly finished: boolean
  /** Parses one read; `bytes` is valid only during the call. */
  read(bytes: Uint8Array, at: number): void
  /** A read staged for it came after it finished: bytes nobody asked for (they are not parsed). */
  stray(): void
}

/** The most bytes staged at once; past it, the reads staged so far are parsed first. */
export const MAX_STAGED_BYTES = 1024 * 1024
const FIRST_BYTES = 64 * 1024
const FIRST_READS = 64

/** How the stage arranges its parsing after the poll: the thread's `setImmediate`, or a test's. */
export type AfterReads = (callback: () => void) => void

/** One thread's staged reads (each thread that reads streams has one, `stageRead`). */
export class StagedReads {
  readonly #afterReads: AfterReads
  #bytes = Buffer.allocUnsafe(FIRST_BYTES)
  #used = 0
  #targets: Array<StagedTarget | null> = []
  #ends = new Uint32Array(FIRST_READS)
  #ats = new Float64Array(FIRST_READS)
  #count = 0
  /** The next staged read to parse. */
  #next = 0
  #scheduled = false

  constructor(afterReads: AfterReads = setImmediate) {
    this.#afterReads = afterReads
  }

  /** Reads staged and not parsed yet. */
  get pending(): number {
    return this.#count - this.#next
  }

  /** Keeps a copy of `bytes`, read at `at`, for `target` to parse after this poll's reads. */
  add(target: StagedTarget, bytes: Uint8Array, at: number): void {
    if (this.#used + bytes.length > MAX_STAGED_BYTES) this.flush()
    if (bytes.length > MAX_STAGED_BYTES) {
      deliver(target, bytes, at)
      return
    }
    if (this.#used + bytes.length > this.#bytes.length) this.#growBytes(this.#used + bytes.length)
    if (this.#count === this.#ats.length) this.#growReads()
    this.#bytes.set(bytes, this.#used)
    this.#used += bytes.length
    this.#targets[this.#count] = target
    this.#ends[this.#count] = this.#used
    this.#ats[this.#count] = at
    this.#count++
    if (!this.#scheduled) {
      this.#scheduled = true
      this.#afterReads(this.#afterPoll)
    }
  }

  /**
   * Parses every staged read now, oldest first: after the poll, and before anything that must
   * follow the reads already made (a socket's end or close).
   */
  flush(): void {
    while (this.#next < this.#count) {
      const i = this.#next++
      const target = this.#targets[i] as StagedTarget
      this.#targets[i] = null
      const start = i === 0 ? 0 : (this.#ends[i - 1] as number)
      deliver(target, this.#bytes.subarray(start, this.#ends[i]), this.#ats[i] as number)
    }
    this.#count = 0
    this.#next = 0
    this.#used = 0
  }

  readonly #afterPoll = (): void => {
    this.#scheduled = false
    this.flush()
  }

  #growBytes(atLeast: number): void {
    const grown = Buffer.allocUnsafe(Math.min(MAX_STAGED_BYTES, Math.max(2 * this.#bytes.length, atLeast)))
    grown.set(this.#bytes.subarray(0, this.#used))
    this.#bytes = grown
  }

  #growReads(): void {
    const ends = new Uint32Array(2 * this.#ends.length)
    ends.set(this.#ends)
    this.#ends = ends
    const ats = new Float64Array(2 * this.#ats.length)
    ats.set(this.#ats)
    this.#ats = ats
  }
}

/** Hands a read to its target to parse; one that has finished only hears of it (`stray`). */
function deliver(target: StagedTarget, bytes: Uint8Array, at: number): void {
  if (target.finished) target.stray()
  else target.read(bytes, at)
}

const threadStage = new StagedReads()

/** Stages a read of a stream in this thread (see `StagedReads`). */
export function stageRead(target: StagedTarget, bytes: Uint8Array, at: number): void {
  threadStage.add(target, bytes, at)
}

/** Parses this thread's staged reads now. */
export function flushStagedReads(): void {
  threadStage.flush()
}
