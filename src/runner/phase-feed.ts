import { sanitizeMessage } from '../errors.ts'
import { type CellPhase, FINAL_PHASES, type ProgressEvent } from '../schema/progress.ts'
import type { RunRecord } from '../schema/run.ts'
import type { SendProgress } from './environment.ts'

/** Longest failure shown on a progress line; the whole message is in the record and the test's error. */
const FAILURE_CHARS = 240

/** What failed, without the evidence (the log tail) that follows it in an engine's error message. */
function failureLine(message: string): string {
  const line = message.split(/\n|; log tail:/)[0] ?? ''
  return line.length > FAILURE_CHARS ? `${line.slice(0, FAILURE_CHARS - 1)}…` : line
}

/** The `done` phase of a measurement: its counts, or why it failed. */
export function donePhase(record: RunRecord): CellPhase {
  const failure = record.cellFailure === null ? null : `${record.cellFailure.code}: ${failureLine(record.cellFailure.message)}`
  return { phase: 'done', completed: record.completed, failed: record.failed, failure }
}

/** Who a feed speaks for: the event without its phase and time. */
export type FeedContext = Omit<ProgressEvent, 'phase' | 'atMs'>

/**
 * The phases of one cell (one arm, one launch or probe) on their way to the reporter: a new
 * phase goes at once, a phase that only moved on (another request, another second of waiting)
 * at most every `minIntervalMs`, its latest figures sent when that time is up. Measuring
 * therefore pays for a few small writes a second, however many requests end.
 */
export class PhaseFeed {
  /** A feed that sends nothing (no reporter listens). */
  static readonly silent = new PhaseFeed({ cell: null, arm: null, engine: '', step: null }, null)

  private readonly context: FeedContext
  private readonly send: SendProgress | null
  private readonly minIntervalMs: number
  private readonly clock: () => number
  private last: { phase: CellPhase['phase']; atMs: number } | null = null
  private pending: { phase: CellPhase; atMs: number } | null = null
  private timer: ReturnType<typeof setTimeout> | null = null

  /** @param clock the time of each phase, ms since the epoch (the reporter compares it with its own) */
  constructor(context: FeedContext, send: SendProgress | null, minIntervalMs = 500, clock: () => number = Date.now) {
    this.context = context
    this.send = send
    this.minIntervalMs = minIntervalMs
    this.clock = clock
  }

  /** Reports a phase; bound, so it can be handed on as a `PhaseListener`. */
  readonly phase = (phase: CellPhase): void => {
    if (this.send === null) return
    const now = this.clock()
    if (
      this.last === null ||
      this.last.phase !== phase.phase ||
      FINAL_PHASES.has(phase.phase) ||
      now - this.last.atMs >= this.minIntervalMs
    ) {
      this.emit(phase, now)
      return
    }
    this.pending = { phase, atMs: now }
    if (this.timer === null) {
      this.timer = setTimeout(() => this.flush(), this.minIntervalMs - (now - this.last.atMs))
      this.timer.unref()
    }
  }

  /** Runs a measurement and reports how it ended: the record's counts, or why it threw before it had one. */
  async measuring(work: () => Promise<RunRecord>): Promise<RunRecord> {
    try {
      const record = await work()
      this.phase(donePhase(record))
      return record
    } catch (error) {
      const message = failureLine(sanitizeMessage(error instanceof Error ? error.message : String(error)))
      this.phase({ phase: 'done', completed: 0, failed: 0, failure: message })
      throw error
    }
  }

  /** The same cell at another step (the next launch, the next probe), on the same channel. */
  at(step: FeedContext['step']): PhaseFeed {
    return new PhaseFeed({ ...this.context, step }, this.send, this.minIntervalMs, this.clock)
  }

  private flush(): void {
    this.timer = null
    const pending = this.pending
    if (pending === null) return
    this.emit(pending.phase, pending.atMs)
    // The interval runs from when it was sent.
    if (this.last !== null) this.last.atMs = this.clock()
  }

  private emit(phase: CellPhase, atMs: number): void {
    if (this.timer !== null) clearTimeout(this.timer)
    this.timer = null
    this.pending = null
    this.last = { phase: phase.phase, atMs }
    this.send?.({ ...this.context, phase, atMs })
  }
}
