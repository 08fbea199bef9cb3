import { holdThread, turnCounter } from '../../fixtures/event-loop.ts'
import { monoMs } from '../client/clock.ts'
import { describe, expect, test } from 'vitest'
import { emptyObservation, type StreamObservation } from '../client/stream.ts'
import { TurnSlice } from '../client/turn-slice.ts'
import { closedLoop, openLoop, type Send, type Slot } from './dispatch.ts'

/** An observation of a request that was sent at `sentAt` and ended now. */
function observed(sentAt: number): StreamObservation {
  return { ...emptyObservation(sentAt), endAt: monoMs(), finishReason: 'stop', httpStatus: 200 }
}

/** A send that records when it was called and answers after `serviceMs`. */
function slowSend(serviceMs: number) {
  const calledAt: number[] = []
  const send = (index: number): Promise<StreamObservation> => {
    const at = monoMs()
    calledAt[index] = at
    return new Promise((resolve) => setTimeout(() => resolve(observed(at)), serviceMs))
  }
  return { send, calledAt }
}

describe('openLoop', () => {
  test('sends at the scheduled times whatever the completions: all ten go out before the first answer', async () => {
    const { send, calledAt } = slowSend(400)
    const slots: Slot[] = []
    const startAt = monoMs()
    const offsetsMs = Array.from({ length: 10 }, (_, i) => i * 20)
    const stats = await openLoop({ offsetsMs, maxInFlight: null, startAt, signal: new AbortController().signal }, send, (s) =>
      slots.push(s),
    )
    expect(stats).toEqual({ inFlightMax: 10, cappedRequests: 0 })
    for (let i = 0; i < 10; i++) {
      const late = (calledAt[i] as number) - (startAt + (offsetsMs[i] as number))
      expect(late).toBeGreaterThanOrEqual(0)
      expect(late).toBeLessThan(40)
    }
    expect(slots.map((s) => s.index).sort((a, b) => a - b)).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9])
    for (const s of slots) {
      expect(s.scheduledOffsetMs).toBe(offsetsMs[s.index])
      expect(s.readyAt).toBe(startAt + (offsetsMs[s.index] as number))
      expect(s.slotAt).toBe(s.readyAt)
    }
  })

  test('with a cap, a request due at the cap waits for the first to end, and is counted', async () => {
    const { send, calledAt } = slowSend(60)
    const slots: Slot[] = []
    const startAt = monoMs()
    const stats = await openLoop(
      { offsetsMs: [0, 5, 10, 15, 200], maxInFlight: 2, startAt, signal: new AbortController().signal },
      send,
      (s) => slots.push(s),
    )
    expect(stats).toEqual({ inFlightMax: 2, cappedRequests: 2 })
    const byIndex = new Map(slots.map((s) => [s.index, s]))
    // Requests 2 and 3 were due at 10 and 15 ms but went when 0 and 1 ended, about 60 ms in.
    for (const i of [2, 3]) {
      const slot = byIndex.get(i) as Slot
      expect(slot.slotAt - slot.readyAt).toBeGreaterThan(30)
      expect(calledAt[i] as number).toBeGreaterThanOrEqual(slot.slotAt)
    }
    expect((byIndex.get(4) as Slot).slotAt).toBe(startAt + 200)
  })

  test('with a cap, the request that waited is dispatched before the ended one is handed over', async () => {
    const { send, calledAt } = slowSend(15)
    const slots: Slot[] = []
    await openLoop({ offsetsMs: [0, 0], maxInFlight: 1, startAt: monoMs(), signal: new AbortController().signal }, send, (s) => {
      slots.push(s)
      holdThread(25) // making a record that takes 25 ms
    })
    const first = slots.find((s) => s.index === 0) as Slot
    expect((calledAt[1] as number) - (first.obs.endAt as number)).toBeLessThan(10)
  })

  test('an abort ends the loop at once: nothing more is sent, not even what waited for the cap', async () => {
    const controller = new AbortController()
    const { send, calledAt } = slowSend(50)
    const startAt = monoMs()
    setTimeout(() => controller.abort(), 30)
    const ended: number[] = []
    await openLoop({ offsetsMs: [0, 0, 10_000, 20_000], maxInFlight: 1, startAt, signal: controller.signal }, send, (s) =>
      ended.push(s.index),
    )
    expect(monoMs() - startAt).toBeLessThan(2000)
    // Request 0 was in flight and ends; request 1 waited for the cap and is never sent, nor are 2 and 3.
    expect(calledAt).toHaveLength(1)
    expect(ended).toEqual([0])
  })

  test('closed loop: the next request is dispatched before the ended one is handed over, its slot freed at the end', async () => {
    const events: string[] = []
    const { send: slow, calledAt } = slowSend(15)
    const send = (index: number): Promise<StreamObservation> => {
      events.push(`send ${index}`)
      return slow(index)
    }
    const slots: Slot[] = []
    await closedLoop(3, 1, send, (s) => {
      events.push(`done ${s.index}`)
      slots.push(s)
      holdThread(25) // making a record that takes 25 ms
    })
    expect(events).toEqual(['send 0', 'send 1', 'done 0', 'send 2', 'done 1', 'done 2'])
    expect(slots[0]?.slotAt).toBe(slots[0]?.readyAt)
    for (const i of [1, 2]) {
      const previous = slots[i - 1] as Slot
      const slot = slots[i] as Slot
      // The slot freed when the previous request ended, and the next went out then, not 25 ms later.
      expect(slot.slotAt).toBeGreaterThanOrEqual(previous.obs.endAt as number)
      expect((calledAt[i] as number) - (previous.obs.endAt as number)).toBeLessThan(10)
    }
  })

  test('closed loop: a round that ends together sends its next requests at once; their records go over the next turns', async () => {
    const run = async (slice: TurnSlice): Promise<{ sentInTurn: number[]; recordInTurn: number[] }> => {
      const turns = turnCounter()
      // Round one ends at one moment; each record holds the thread for 1 ms.
      let endRound: () => void = () => {}
      const roundEnds = new Promise<void>((resolve) => (endRound = resolve))
      setTimeout(endRound, 10)
      const sentInTurn: number[] = []
      const recordInTurn: number[] = []
      const send = async (index: number): Promise<StreamObservation> => {
        const at = monoMs()
        sentInTurn[index] = turns.now()
        if (index < 4) await roundEnds
        return observed(at)
      }
      await closedLoop(
        8,
        4,
        send,
        (slot) => {
          recordInTurn[slot.index] = turns.now()
          holdThread(1)
        },
        undefined,
        slice,
      )
      turns.stop()
      return { sentInTurn: sentInTurn.slice(4), recordInTurn: recordInTurn.slice(0, 4) }
    }
    const sliced = await run(new TurnSlice(0.25))
    // Every next request went out in the turn the round ended, whatever the records cost.
    expect(new Set(sliced.sentInTurn).size).toBe(1)
    // Each record in a turn of its own (1 ms each, past the 0.25 ms slice), oldest first, after the sends.
    expect(new Set(sliced.recordInTurn).size).toBe(4)
    expect(sliced.recordInTurn).toEqual([...sliced.recordInTurn].sort((a, b) => a - b))
    expect(Math.min(...sliced.recordInTurn)).toBeGreaterThanOrEqual(sliced.sentInTurn[0] as number)
    const unsliced = await run(new TurnSlice(Infinity))
    expect(new Set(unsliced.sentInTurn).size).toBe(1)
    expect(new Set(unsliced.recordInTurn).size).toBe(1)
  })

  test('closed loop: a record that throws fails the loop, once every record was handed over', async () => {
    const { send } = slowSend(1)
    const done: number[] = []
    await expect(
      closedLoop(4, 2, send, (slot) => {
        done.push(slot.index)
        if (slot.index === 1) throw new Error('record failed')
      }),
    ).rejects.toThrow('record failed')
    expect(done.sort()).toEqual([0, 1, 2, 3])
  })

  test('closed loop: after an abort no slot takes another request', async () => {
    const controller = new AbortController()
    const { send: slow, calledAt } = slowSend(20)
    // The abort comes as request 3 goes out: it and request 2 are in flight and end; nothing after starts.
    const send = (index: number): Promise<StreamObservation> => {
      if (index === 3) controller.abort()
      return slow(index)
    }
    const ended: number[] = []
    await closedLoop(100, 2, send, (s) => ended.push(s.index), controller.signal)
    expect(calledAt).toHaveLength(4)
    expect(ended.sort((a, b) => a - b)).toEqual([0, 1, 2, 3])
  })

  test('closed loop: the opening round is built, then settled, then sent as C writes; the next requests go out as sent', async () => {
    const events: string[] = []
    const { send: slow, calledAt } = slowSend(5)
    const send: Send = (index) => {
      events.push(`send ${index}`)
      return slow(index)
    }
    send.prepare = (index) => {
      events.push(`build ${index}`)
      return () => {
        events.push(`go ${index}`)
        return slow(index)
      }
    }
    send.settle = async () => {
      events.push('settle')
      await new Promise((resolve) => setTimeout(resolve, 10))
    }
    const slots: Slot[] = []
    await closedLoop(5, 3, send, (s) => slots.push(s))
    expect(events.slice(0, 7)).toEqual(['build 0', 'build 1', 'build 2', 'settle', 'go 0', 'go 1', 'go 2'])
    expect(events.filter((e) => e.startsWith('send')).sort()).toEqual(['send 3', 'send 4'])
    // The round is ready once settled: its sends go out at once, its wait not counted.
    const readyAt = (slots[0] as Slot).readyAt
    for (const i of [0, 1, 2]) expect((calledAt[i] as number) - readyAt).toBeLessThan(5)
    expect(slots.map((s) => s.index).sort()).toEqual([0, 1, 2, 3, 4])
  })

  test('closed loop: an abort while the built round settles sends none of it', async () => {
    const controller = new AbortController()
    const { send, calledAt } = slowSend(5)
    const sendable: Send = send
    let built = 0
    sendable.prepare = (index) => {
      built++
      return () => send(index)
    }
    sendable.settle = async () => controller.abort()
    const ended: number[] = []
    await closedLoop(10, 4, sendable, (s) => ended.push(s.index), controller.signal)
    expect(built).toBe(4)
    expect(calledAt).toHaveLength(0)
    expect(ended).toEqual([])
  })
})
