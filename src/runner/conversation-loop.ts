import { monoMs } from '../client/clock.ts'
import type { StreamObservation } from '../client/stream.ts'
import { TurnSlice } from '../client/turn-slice.ts'
import { RecordHandOver, type Slot } from './dispatch.ts'

/** What the loop needs of a conversation plan: its shape, its think time, and where each turn sits in the plan. */
export interface ConversationSchedule {
  sessions: number
  turns: number
  /** The wait after a turn ends before its session's next turn is ready, ms. */
  thinkTimeMs: number
  /** Live history: each session's replies are kept while it is open and handed to `send`. */
  live: boolean
  /** The plan index of turn `turn` (1-based) of `session`. */
  indexOf(session: number, turn: number): number
}

/** Sends request `index`; `replies` is its session's live history so far (null when the history is replayed). */
export type ConversationSend = (index: number, replies: readonly string[] | null) => Promise<StreamObservation>

/** A turn ready to go: its session, its turn, and when it became ready (monotonic ms). */
interface ReadyTurn {
  session: number
  turn: number
  readyAt: number
}

/**
 * Runs a conversation cell closed loop: `concurrency` requests in flight at most, each session
 * sending its turn k + 1 only after its turn k ended and the think time passed, with the whole
 * history. A free slot takes the turn that has been ready longest, else opens the next session,
 * so without think time each slot carries one session to its end, and with it other sessions
 * fill the slots their thinking leaves. A live session whose turn failed ends there (its history
 * has no reply to send on; its later turns stay unsent); a replayed one goes on, so both arms
 * send the same requests. Once `signal` aborts nothing more is sent. A live session's replies
 * are kept only while it is open.
 *
 * `readyAt` of a first turn is the cell start (as in the closed loop), of a later one its
 * predecessor's end plus the think time; `slotAt` is when a slot could take it. As in the closed
 * loop, a slot's next turn goes out at once and the ended turns' records are made in the turn
 * slices of `slice` (`RecordHandOver`).
 * @example await conversationLoop(schedule, 8, (i, replies) => send(i, replies), (slot) => ledger.end(slot), signal)
 */
export async function conversationLoop(
  c: ConversationSchedule,
  concurrency: number,
  send: ConversationSend,
  onDone: (slot: Slot) => void,
  signal?: AbortSignal,
  slice: TurnSlice = new TurnSlice(),
): Promise<void> {
  const start = monoMs()
  const ready: ReadyTurn[] = []
  const replies = new Map<number, string[]>()
  const timers = new Set<NodeJS.Timeout>()
  const waiters: Array<() => void> = []
  let nextSession = 0
  // Sessions opened and not yet ended: a turn in flight, thinking, or ready.
  let open = 0

  const wakeAll = (): void => {
    for (const wake of waiters.splice(0)) wake()
  }
  const finished = (): boolean => signal?.aborted === true || (nextSession >= c.sessions && open === 0)
  const enqueue = (turn: ReadyTurn): void => {
    let at = ready.length
    while (at > 0 && (ready[at - 1] as ReadyTurn).readyAt > turn.readyAt) at--
    ready.splice(at, 0, turn)
    wakeAll()
  }
  const take = (): ReadyTurn | null => {
    const first = ready.shift()
    if (first !== undefined) return first
    if (nextSession >= c.sessions) return null
    open++
    if (c.live) replies.set(nextSession, [])
    return { session: nextSession++, turn: 1, readyAt: start }
  }
  const turnEnded = (t: ReadyTurn, obs: StreamObservation): void => {
    const goesOn = t.turn < c.turns && signal?.aborted !== true && (!c.live || obs.error === null)
    if (!goesOn) {
      replies.delete(t.session)
      open--
      wakeAll()
      return
    }
    replies.get(t.session)?.push(obs.content)
    const next = { session: t.session, turn: t.turn + 1, readyAt: monoMs() + c.thinkTimeMs }
    if (c.thinkTimeMs <= 0) return enqueue(next)
    const timer = setTimeout(() => {
      timers.delete(timer)
      enqueue(next)
    }, c.thinkTimeMs)
    timers.add(timer)
  }
  const onAbort = (): void => {
    for (const timer of timers) clearTimeout(timer)
    timers.clear()
    wakeAll()
  }
  signal?.addEventListener('abort', onAbort, { once: true })

  const records = new RecordHandOver(slice, onDone)
  const worker = async (): Promise<void> => {
    let freeAt = start
    let ended: Slot | null = null
    for (;;) {
      const t = signal?.aborted === true ? null : take()
      if (t !== null) {
        // The next ready turn out first, then the ended one handed over.
        const index = c.indexOf(t.session, t.turn)
        const slotAt = Math.max(freeAt, t.readyAt)
        const sending = send(index, c.live ? (replies.get(t.session) ?? []) : null)
        if (ended !== null) records.add(ended)
        const obs = await sending
        ended = { index, readyAt: t.readyAt, slotAt, scheduledOffsetMs: null, obs }
        freeAt = monoMs()
        turnEnded(t, obs)
        continue
      }
      if (ended !== null) records.add(ended)
      ended = null
      if (finished()) break
      await new Promise<void>((wake) => waiters.push(wake))
    }
  }
  try {
    await Promise.all(Array.from({ length: Math.min(concurrency, c.sessions) }, worker))
    await records.drained()
  } finally {
    signal?.removeEventListener('abort', onAbort)
    for (const timer of timers) clearTimeout(timer)
  }
}
