import { setTimeout as sleep } from 'node:timers/promises'
import { describe, expect, test } from 'vitest'
import { monoMs } from '../client/clock.ts'
import { emptyObservation, type StreamObservation } from '../client/observation.ts'
import { type ConversationSchedule, conversationLoop } from './conversation-loop.ts'
import type { Slot } from './dispatch.ts'

const schedule = (sessions: number, turns: number, o: Partial<ConversationSchedule> = {}): ConversationSchedule => ({
  sessions,
  turns,
  thinkTimeMs: 0,
  live: false,
  indexOf: (s, t) => s * turns + t - 1,
  ...o,
})

/** A send that answers after `ms` with the reply `r<index>`, failing the indices in `failing`; it records what it was sent. */
function fakeEngine(ms: number, failing: readonly number[] = []) {
  const sent: Array<{ index: number; replies: readonly string[] | null; at: number }> = []
  const ended = new Map<number, number>()
  let inFlight = 0
  let maxInFlight = 0
  const send = async (index: number, replies: readonly string[] | null): Promise<StreamObservation> => {
    sent.push({ index, replies: replies === null ? null : [...replies], at: monoMs() })
    inFlight++
    maxInFlight = Math.max(maxInFlight, inFlight)
    await sleep(ms)
    inFlight--
    const obs = emptyObservation(monoMs())
    obs.content = `r${index}`
    if (failing.includes(index)) obs.error = { code: 'HTTP_STATUS', message: 'HTTP 500', httpStatus: 500, retryAfterS: null }
    ended.set(index, monoMs())
    return obs
  }
  return { send, sent, ended, maxInFlight: () => maxInFlight }
}

describe('conversationLoop', () => {
  test('every turn once; a session sends turn k + 1 only after turn k ended; never more in flight than the concurrency', async () => {
    const engine = fakeEngine(5)
    const slots: Slot[] = []
    await conversationLoop(schedule(6, 3), 2, engine.send, (s) => slots.push(s))
    expect(slots.map((s) => s.index).sort((a, b) => a - b)).toEqual([...Array(18).keys()])
    expect(engine.maxInFlight()).toBe(2)
    for (const { index, at } of engine.sent) {
      if (index % 3 === 0) continue
      expect(at).toBeGreaterThanOrEqual(engine.ended.get(index - 1) as number)
    }
    // Without think time a slot carries its session to the end before opening the next.
    expect(engine.sent.slice(0, 6).map((s) => s.index)).toEqual([0, 3, 1, 4, 2, 5])
    // A later turn is ready when its predecessor ended; the first turns at the cell start.
    const second = slots.find((s) => s.index === 1) as Slot
    expect(second.readyAt).toBeCloseTo(engine.ended.get(0) as number, 0)
  })

  test('think time: the next turn waits for it, and other sessions fill the slot meanwhile', async () => {
    const engine = fakeEngine(2)
    await conversationLoop(schedule(3, 2, { thinkTimeMs: 40 }), 1, engine.send, () => {})
    const order = engine.sent.map((s) => s.index)
    // One slot: the three first turns go while session 0 thinks.
    expect(order.slice(0, 3)).toEqual([0, 2, 4])
    const at = new Map(engine.sent.map((s) => [s.index, s.at]))
    for (const index of [1, 3, 5]) expect((at.get(index) as number) - (engine.ended.get(index - 1) as number)).toBeGreaterThanOrEqual(39)
  })

  test('live history: each turn gets its session replies so far; a failed turn ends its session, its later turns unsent', async () => {
    const engine = fakeEngine(1, [4])
    const slots: Slot[] = []
    await conversationLoop(schedule(2, 3, { live: true }), 2, engine.send, (s) => slots.push(s))
    const by = new Map(engine.sent.map((s) => [s.index, s.replies]))
    expect(by.get(0)).toEqual([])
    expect(by.get(2)).toEqual(['r0', 'r1'])
    expect(by.get(3)).toEqual([])
    // Session 1 failed at its turn 2 (index 4): its turn 3 never went.
    expect(by.has(5)).toBe(false)
    expect(slots).toHaveLength(5)
  })

  test('replayed history goes on after a failure: both arms send the same requests', async () => {
    const engine = fakeEngine(1, [4])
    await conversationLoop(schedule(2, 3), 2, engine.send, () => {})
    expect(engine.sent.map((s) => s.index).sort()).toEqual([0, 1, 2, 3, 4, 5])
    expect(engine.sent.every((s) => s.replies === null)).toBe(true)
  })

  test('an abort sends nothing more, even a session thinking; the loop ends with what was in flight', async () => {
    const engine = fakeEngine(5)
    const stop = new AbortController()
    const done = conversationLoop(schedule(4, 4, { thinkTimeMs: 1_000 }), 2, engine.send, () => {}, stop.signal)
    await sleep(20)
    stop.abort()
    await done
    expect(engine.sent.length).toBeLessThan(16)
    expect(engine.sent.map((s) => s.index % 4)).not.toContain(1)
  })
})
