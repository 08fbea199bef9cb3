import type { ReadBatching } from '../schema/run.ts'
import { monoMs } from './clock.ts'

/**
 * Batched reads when the thread that reads the streams is busy.
 *
 * A server that flushes every token as it makes it, to a client that keeps up, is a ping-pong:
 * each write wakes the client, which polls, reads one or two events, and polls again. Both sides
 * then pay a poll, a read and a wake-up a token. Measured on the 2-core VM against the zero-delay
 * server at one event a write: 2–3 tokens a read at C = 256, the client's core 98% busy and the
 * server's 92%, most of it spent on polls, reads and wake-ups. A slower client batches by itself
 * (the kernel gathers the chunks while it is busy elsewhere: vLLM's Python client reads 450 tokens
 * a `recv` there); a fast one has to choose to.
 *
 * So the reading thread watches its own event loop (libuv's idle time: the time a poll actually
 * waited). Once a window of `WINDOW_MS` was at least `ENTER_UTILIZATION` busy, each turn that
 * read a stream lasts at least `PAUSE_MS`: what the turn's work left of it, the thread sleeps
 * before it polls again, so that the next poll finds many streams with many chunks each. It stops
 * once the thread's own work fills less than `EXIT_UTILIZATION` of a window, its pauses counted
 * as time to spare: a pause takes the place of the poll's wait, so with the pauses left out of
 * the window instead, a thread that had gone back to 20–40% work (the paced C = 256 cell after a
 * round's end) still read as busy and batched on for good, each of its chunks stamped up to a
 * pause late. Against a server flushing tokens as fast as it can, a batching thread's own work
 * fills 40–60% of most windows and it batches on.
 *
 * What it costs the measurement: a chunk that arrives during a pause is stamped when the pause
 * ends, at most the pause late (`longestPauseMs` in the record). A thread that is mostly idle
 * never pauses: C = 1 and C = 64 at 10 ms a chunk read with the client 2–25% busy. The pauses are
 * counted (`ReadBatchingMeter`) and kept in the record (`harness.readBatching`).
 */

/** The window utilization is judged over, ms. */
const WINDOW_MS = 10
/** A window this busy starts batching. */
export const ENTER_UTILIZATION = 0.75
/** Batching stops when the thread's own work fills less than this share of a window (its pauses are not work). */
export const EXIT_UTILIZATION = 0.4
/**
 * While batching, a turn that read a stream and its pause together last this long, ms: the pause
 * is what the turn's own work left of it (the kernel's timer slack may add some microseconds).
 */
export const PAUSE_MS = 0.2

/**
 * Counts this thread's pauses from its creation until `stop()`: a phase's figures, whatever other
 * phase counts at the same time.
 * @example const meter = new ReadBatchingMeter(); …; meter.stop(); meter.pauses
 */
export class ReadBatchingMeter {
  /** Pauses taken. */
  pauses = 0
  /** Their time summed, ms. */
  pausedMs = 0
  /** The longest, ms: the most a chunk's stamp was delayed by one. */
  longestPauseMs = 0

  constructor() {
    meters.add(this)
  }

  /** Counts no more. */
  stop(): void {
    meters.delete(this)
  }

  add(pausedMs: number): void {
    this.pauses++
    this.pausedMs += pausedMs
    if (pausedMs > this.longestPauseMs) this.longestPauseMs = pausedMs
  }
}

/**
 * Whether a window of the reading thread's event loop starts, keeps or stops batching: its time
 * active (pauses included) and idle (polls that waited), and the pauses within the active time.
 */
export function batchingAfter(batching: boolean, window: { activeMs: number; idleMs: number; pausedMs: number }): boolean {
  const wall = window.activeMs + window.idleMs
  if (!(wall > 0)) return false
  const working = Math.max(0, window.activeMs - window.pausedMs)
  return batching ? working / wall >= EXIT_UTILIZATION : window.activeMs / wall >= ENTER_UTILIZATION
}

const meters = new Set<ReadBatchingMeter>()

/** What a `ReadBatcher` reads and does: its thread's, or a test's. */
export interface ReadBatcherHost {
  /** The monotonic clock, ms. */
  now(): number
  /** The event loop's idle time so far (polls that waited), ms. */
  loopIdleMs(): number
  /** Blocks the thread for `ms`. */
  sleep(ms: number): void
  /** Runs `callback` after this turn's reads (`setImmediate`). */
  afterReads(callback: () => void): void
}

const sleeper = new Int32Array(new SharedArrayBuffer(4))

const threadHost: ReadBatcherHost = {
  now: monoMs,
  loopIdleMs: () => performance.eventLoopUtilization().idle,
  sleep: (ms) => Atomics.wait(sleeper, 0, 0, ms),
  afterReads: (callback) => setImmediate(callback),
}

/**
 * One thread's batching: fed every read, it judges each window and pauses after a turn while
 * batching. Each thread that reads streams has one (`noteStreamRead`).
 */
export class ReadBatcher {
  readonly #host: ReadBatcherHost
  #armed = false
  /** The stamp of the turn's first read. */
  #turnStart = 0
  #batching = false
  #windowStart: number | null = null
  #windowIdleAtStart = 0
  #windowPausedMs = 0

  constructor(host: ReadBatcherHost = threadHost) {
    this.#host = host
  }

  /** Whether turns are paused now. */
  get batching(): boolean {
    return this.#batching
  }

  /** A read of a stream, stamped `at`: at most once a turn (its first read), the check after the turn's reads is arranged. */
  noteRead(at: number): void {
    if (this.#armed) return
    this.#armed = true
    this.#turnStart = at
    this.#host.afterReads(this.#afterReads)
  }

  readonly #afterReads = (): void => {
    this.#armed = false
    const host = this.#host
    const now = host.now()
    if (this.#windowStart === null || now - this.#windowStart >= WINDOW_MS) this.#judgeWindow(now)
    // A turn that took a pause's time already found its chunks gathered: no wait is needed after it.
    const left = PAUSE_MS - (now - this.#turnStart)
    if (!this.#batching || left <= 0) return
    host.sleep(left)
    const paused = host.now() - now
    this.#windowPausedMs += paused
    for (const meter of meters) meter.add(paused)
  }

  /** Ends the window that started at `#windowStart`: batching starts or stops on its utilization. */
  #judgeWindow(now: number): void {
    const idleMs = this.#host.loopIdleMs()
    if (this.#windowStart !== null) {
      const idle = idleMs - this.#windowIdleAtStart
      const active = Math.max(0, now - this.#windowStart - idle)
      this.#batching = batchingAfter(this.#batching, { activeMs: active, idleMs: idle, pausedMs: this.#windowPausedMs })
    }
    this.#windowStart = now
    this.#windowIdleAtStart = idleMs
    this.#windowPausedMs = 0
  }
}

const threadBatcher = new ReadBatcher()

/** Called by every read of a stream in this thread, with the read's stamp. */
export function noteStreamRead(at: number): void {
  threadBatcher.noteRead(at)
}

/** Two counts of pauses as one: summed, the longer of the longest. */
export function addPauses(a: ReadBatching, b: ReadBatching): ReadBatching {
  return { pauses: a.pauses + b.pauses, pausedMs: a.pausedMs + b.pausedMs, longestPauseMs: Math.max(a.longestPauseMs, b.longestPauseMs) }
}
