import type { StreamObservation } from '../client/stream.ts'
import type { OpenLoopStats } from '../schema/load.ts'
import { monoMs } from '../client/clock.ts'
import { TurnSlice } from '../client/turn-slice.ts'

/** One request as dispatched: when it was ready, when it could go, when it was due, and what came back. */
export interface Slot {
  index: number
  /** When the request was ready: the cell start (closed loop) or its scheduled time (open loop). */
  readyAt: number
  /** When it could be sent: a slot freed (closed loop), or its scheduled time or the cap freeing, whichever is later (open loop). */
  slotAt: number
  /** Open loop: the scheduled send offset from the start of the phase, ms (the schedule's own value); null in the closed loop. */
  scheduledOffsetMs: number | null
  obs: StreamObservation
}

/** Sends request `index`; never throws for a request failure. */
export interface Send {
  (index: number): Promise<StreamObservation>
  /**
   * Builds request `index` now (its body taken, its bytes made) and returns its send, for a closed
   * loop's opening round; absent where there is nothing to build ahead.
   */
  prepare?: (index: number) => () => Promise<StreamObservation>
  /** Awaited once the opening round is built, before it starts: what the build set off has run (V8 compiling its path). */
  settle?: () => Promise<unknown>
}

/**
 * The ended requests' records of a slot loop (closed loop, conversations): each made in the turn
 * slices of `slice`, oldest first, so that a round of requests ending together does not hold the
 * thread while the running streams' reads wait to be stamped. `drained` resolves once every record
 * handed over is made, and rejects with the first error one threw.
 */
export class RecordHandOver {
  readonly #slice: TurnSlice
  readonly #onDone: (slot: Slot) => void
  #handing = 0
  #handed: (() => void) | null = null
  readonly #failures: unknown[] = []

  constructor(slice: TurnSlice, onDone: (slot: Slot) => void) {
    this.#slice = slice
    this.#onDone = onDone
  }

  /** Makes the slot's record now while the turn's slice lasts, else in a later turn. */
  add(slot: Slot): void {
    this.#handing++
    void this.#slice
      .submit(() => this.#onDone(slot))
      .catch((err: unknown) => this.#failures.push(err))
      .finally(() => {
        if (--this.#handing === 0) this.#handed?.()
      })
  }

  /** Every record handed over is made. @throws the first error making one threw */
  async drained(): Promise<void> {
    if (this.#handing > 0) await new Promise<void>((resolve) => (this.#handed = resolve))
    if (this.#failures.length > 0) throw this.#failures[0]
  }
}

/**
 * Runs `count` requests over `concurrency` slots: when one ends the next starts on its slot.
 * Once `signal` aborts no more are sent (those in flight end as they end); the rest are unsent.
 * Every slot is free at the start (no queue delay for the first round: a wait behind the other
 * slots' sends is the client's send lag) and then the moment its request ends.
 *
 * A slot's next request goes out at once, in the turn its last one ended: its body was built
 * ahead and its send is one socket write, so even a round of equal streams ending together costs
 * the thread tens of microseconds a slot. The opening round, C requests due at one instant, is
 * built before it starts where `send.prepare` can (each body taken and its bytes made), so that the
 * round is C socket writes and the set-up of their reading. The ended requests' records (`onDone`)
 * are what can wait: they are made in slices of the later event-loop turns (`slice`), oldest first,
 * so the chunks of the streams still running are read, and stamped, in between. Resolves once every
 * record is made; rejects with the first error `onDone` threw.
 * @param slice the turn slices the ended requests' records are made in; @default a new `TurnSlice` (0.25 ms a turn)
 */
export async function closedLoop(
  count: number,
  concurrency: number,
  send: Send,
  onDone: (slot: Slot) => void,
  signal?: AbortSignal,
  slice: TurnSlice = new TurnSlice(),
): Promise<void> {
  // An abort while the built round waits for what its build set off leaves it unsent, as any request after an abort.
  const { prepare } = send
  let opening: Array<() => Promise<StreamObservation>> = []
  if (prepare !== undefined && signal?.aborted !== true) {
    opening = Array.from({ length: Math.min(concurrency, count) }, (_, i) => prepare(i))
    await send.settle?.()
  }
  const readyAt = monoMs()
  let next = 0
  const records = new RecordHandOver(slice, onDone)
  const worker = async (): Promise<void> => {
    let slotAt = readyAt
    let ended: Slot | null = null
    while (next < count && signal?.aborted !== true) {
      const index = next++
      // The next request out first, then the ended one handed over.
      const sending = index < opening.length ? (opening[index] as () => Promise<StreamObservation>)() : send(index)
      if (ended !== null) records.add(ended)
      const obs = await sending
      ended = { index, readyAt, slotAt, scheduledOffsetMs: null, obs }
      slotAt = monoMs()
    }
    if (ended !== null) records.add(ended)
  }
  await Promise.all(Array.from({ length: Math.min(concurrency, count) }, worker))
  await records.drained()
}

/**
 * Within this many ms of a due time the dispatcher stops sleeping on a timer (libuv timers have
 * 1 ms granularity and fire up to a millisecond late) and polls once per event-loop turn
 * (setImmediate), which lets network I/O through between polls. The polling takes the timer's
 * lateness out of the send lag for a fraction of a core (docs/load-shapes.md, "Measured here").
 */
const POLL_WINDOW_MS = 1

export interface OpenLoopOptions {
  /** Send offsets, ms from `startAt`, in index order (non-decreasing). */
  offsetsMs: readonly number[]
  /** The most requests in flight; null for none. */
  maxInFlight: number | null
  /** The monotonic time the offsets count from. */
  startAt: number
  /** On abort, no more requests are sent, even those waiting for the cap: they stay unsent, and the loop ends with those in flight. */
  signal: AbortSignal
  /**
   * A trace's sessions: per request, the earlier request it waits for and the delay after that
   * one ends; such a request has no offset of its own (its entry in `offsetsMs` is not read).
   * @default none
   */
  chain?: ReadonlyArray<{ after: number; delayMs: number } | null> | null
}

/**
 * The open-loop dispatcher: each request is sent at its scheduled time whatever the engine is
 * doing, by a timer, never by a completion. With a cap, a request due while `maxInFlight` are in
 * flight waits for the first to end (its `slotAt` is then that moment). Resolves when every
 * request sent has ended and none is left to send (or the signal aborted).
 */
export function openLoop(o: OpenLoopOptions, send: Send, onDone: (slot: Slot) => void): Promise<OpenLoopStats> {
  const count = o.offsetsMs.length
  const chain = o.chain ?? null
  // The requests sent at their own offsets, in order; the others follow their session's previous turn.
  const timed = chain === null ? null : Array.from({ length: count }, (_, i) => i).filter((i) => chain[i] === null)
  const timedCount = timed === null ? count : timed.length
  const timedAt = (k: number): number => (timed === null ? k : (timed[k] as number))
  const successors = new Map<number, number[]>()
  chain?.forEach((c, i) => {
    if (c !== null) successors.set(c.after, [...(successors.get(c.after) ?? []), i])
  })
  // When each chained request came due (its predecessor's end plus the delay), monotonic ms.
  const releasedAt = new Float64Array(count).fill(Number.NaN)
  let unreleased = count - timedCount
  const delays = new Set<NodeJS.Timeout>()
  const due: Array<{ index: number; slotAt: number }> = []
  let next = 0
  let inFlight = 0
  let inFlightMax = 0
  let cappedRequests = 0
  let timer: { kind: 'timeout'; handle: NodeJS.Timeout } | { kind: 'immediate'; handle: NodeJS.Immediate } | null = null

  return new Promise((resolve) => {
    const settleIfDone = (): void => {
      if (inFlight > 0 || (!o.signal.aborted && (due.length > 0 || next < timedCount || unreleased > 0))) return
      o.signal.removeEventListener('abort', onAbort)
      resolve({ inFlightMax, cappedRequests })
    }
    if (count === 0) return resolve({ inFlightMax, cappedRequests })
    const scheduledAt = (index: number): number =>
      Number.isNaN(releasedAt[index] as number) ? o.startAt + (o.offsetsMs[index] as number) : (releasedAt[index] as number)
    // A session's next turns come due the delay after this one ended, whether it failed or not (the trace's prompts stand alone).
    const release = (ended: number, endedAt: number): void => {
      for (const index of successors.get(ended) ?? []) {
        const { delayMs } = (chain as NonNullable<typeof chain>)[index] as { delayMs: number }
        const at = endedAt + delayMs
        const go = (): void => {
          releasedAt[index] = at
          unreleased--
          due.push({ index, slotAt: at })
          drain(null)
          settleIfDone()
        }
        if (delayMs <= 0) {
          go()
          continue
        }
        const timer = setTimeout(() => {
          delays.delete(timer)
          go()
        }, delayMs)
        delays.add(timer)
      }
    }

    const launch = (index: number, slotAt: number): void => {
      inFlight++
      inFlightMax = Math.max(inFlightMax, inFlight)
      void send(index).then((obs) => {
        inFlight--
        const endedAt = monoMs()
        // A request that waited for the cap goes out before this one's record is made.
        drain(endedAt)
        const released = releasedAt[index] as number
        const scheduledOffsetMs = Number.isNaN(released) ? (o.offsetsMs[index] as number) : released - o.startAt
        onDone({ index, readyAt: scheduledAt(index), slotAt, scheduledOffsetMs, obs })
        if (!o.signal.aborted) release(index, endedAt)
        settleIfDone()
      })
    }

    // Sends what is due while the cap allows; a request that waited for the cap could go at `freedAt`.
    const drain = (freedAt: number | null): void => {
      while (!o.signal.aborted && due.length > 0 && (o.maxInFlight === null || inFlight < o.maxInFlight)) {
        const { index, slotAt } = due.shift() as { index: number; slotAt: number }
        launch(index, freedAt === null ? slotAt : Math.max(slotAt, freedAt))
      }
    }

    const tick = (): void => {
      timer = null
      const now = monoMs()
      while (next < timedCount && scheduledAt(timedAt(next)) <= now) {
        if (o.maxInFlight !== null && inFlight + due.length >= o.maxInFlight) cappedRequests++
        due.push({ index: timedAt(next), slotAt: scheduledAt(timedAt(next)) })
        next++
      }
      drain(null)
      if (next < timedCount) arm()
    }

    const arm = (): void => {
      const wait = scheduledAt(timedAt(next)) - monoMs()
      timer =
        wait > POLL_WINDOW_MS
          ? { kind: 'timeout', handle: setTimeout(tick, wait - POLL_WINDOW_MS) }
          : { kind: 'immediate', handle: setImmediate(tick) }
    }

    function onAbort(): void {
      for (const delay of delays) clearTimeout(delay)
      delays.clear()
      if (timer !== null) {
        if (timer.kind === 'timeout') clearTimeout(timer.handle)
        else clearImmediate(timer.handle)
        timer = null
      }
      settleIfDone()
    }
    if (o.signal.aborted) return resolve({ inFlightMax, cappedRequests })
    o.signal.addEventListener('abort', onAbort, { once: true })
    tick()
  })
}
