import { afterEach, beforeEach, describe, expect, test, vi } from 'vitest'
import { PrefillLane } from './prefill-lane.ts'
import type { EngineJob } from './scheduler.ts'

beforeEach(() => {
  vi.useFakeTimers()
})
afterEach(() => {
  vi.useRealTimers()
})

const job = (promptTokens: number): EngineJob => ({ promptTokens, reservedTokens: promptTokens, step: () => true })

/** A lane at 1000 prompt tokens per second: a job of n tokens takes n ms. */
function lane(): { lane: PrefillLane; done: Array<[EngineJob, number]> } {
  const done: Array<[EngineJob, number]> = []
  const start = Date.now()
  return {
    lane: new PrefillLane(
      1000,
      () => Date.now(),
      (j) => done.push([j, Date.now() - start]),
    ),
    done,
  }
}

describe('PrefillLane', () => {
  test('prefills one job at a time, in order, each for its prompt tokens over the rate', () => {
    const { lane: l, done } = lane()
    const [a, b] = [job(10), job(30)]
    l.add(a)
    l.add(b)
    expect(l.prefilling).toBe(a)
    vi.advanceTimersByTime(40)
    expect(done).toEqual([
      [a, 10],
      [b, 40],
    ])
    expect(l.prefilling).toBeNull()
  })

  test('the next prompt starts when the previous one was due to end, even when its timer fired early', () => {
    let skew = 0
    const start = Date.now()
    const now = (): number => Date.now() - start + skew
    const ended: number[] = []
    const l = new PrefillLane(1000, now, () => ended.push(now()))
    l.add(job(10))
    l.add(job(10))
    // The lane's clock reads 3 ms behind the timers' when the first one fires: it fired early.
    vi.advanceTimersByTime(9)
    skew = -3
    vi.advanceTimersByTime(30)
    expect(ended).toEqual([7, 20])
  })

  test('a cancelled job never ends; cancelling the one prefilling frees the lane now for the next', () => {
    const { lane: l, done } = lane()
    const [a, b, c] = [job(100), job(10), job(10)]
    l.add(a)
    l.add(b)
    l.add(c)
    l.cancel(b)
    vi.advanceTimersByTime(50)
    l.cancel(a)
    expect(l.prefilling).toBe(c)
    vi.advanceTimersByTime(10)
    expect(done).toEqual([[c, 60]])
  })

  test('closed, it ends nothing and starts nothing', () => {
    const { lane: l, done } = lane()
    l.add(job(10))
    l.close()
    l.add(job(10))
    vi.advanceTimersByTime(100)
    expect(done).toEqual([])
    expect(l.prefilling).toBeNull()
  })
})
