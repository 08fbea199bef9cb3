import { afterEach, beforeEach, describe, expect, test, vi } from 'vitest'
import { type EngineJob, SimEngine } from './scheduler.ts'

beforeEach(() => {
  vi.useFakeTimers()
})
afterEach(() => {
  vi.useRealTimers()
})

/** A job of `tokens` output tokens (its prefill's step the first) that notes when each step came, ms from `start`. */
function job(promptTokens: number, tokens: number, start: number): EngineJob & { steps: number[] } {
  const steps: number[] = []
  return {
    promptTokens,
    reservedTokens: promptTokens + tokens,
    steps,
    step() {
      steps.push(Date.now() - start)
      return steps.length < tokens
    },
  }
}

// Prefill at 1000 tokens/s (a 10-token prompt takes 10 ms); a lone decode step takes 10 ms.
const TIMING = { prefillTokPerS: 1000, decodeTokPerS: 100, batchSlowdown: 0.5, maxBatch: null, kvBudgetTokens: null }

describe('SimEngine', () => {
  test('prefills one at a time, then steps the batch together, each step slower by the slowdown per job', () => {
    const start = Date.now()
    const steps: Array<[number, number]> = []
    const prefills: number[] = []
    const engine = new SimEngine(TIMING, () => Date.now(), {
      onPrefill: (running) => prefills.push(running),
      onStep: (step, batchSize) => steps.push([step, batchSize]),
    })
    const [a, b] = [job(10, 5, start), job(10, 3, start)]
    engine.submit(a)
    engine.submit(b)
    vi.advanceTimersByTime(200)
    // a's prefill ends at 10, b's at 20: a steps alone (10 ms a step) until b joins at the next
    // boundary, 30; then both step at 15 ms a step.
    expect(a.steps).toEqual([10, 20, 30, 45, 60])
    expect(b.steps).toEqual([20, 45, 60])
    expect(prefills).toEqual([0, 1])
    expect(steps).toEqual([
      [1, 1],
      [2, 1],
      [3, 2],
      [4, 2],
    ])
    expect(engine.maxRunning()).toBe(2)
    expect(engine.running()).toBe(0)
  })

  test('with one seat the next job waits until the first leaves the batch, and is admitted at that step boundary', () => {
    const start = Date.now()
    const engine = new SimEngine({ ...TIMING, maxBatch: 1 }, () => Date.now())
    const [a, b] = [job(10, 2, start), job(10, 2, start)]
    engine.submit(a)
    engine.submit(b)
    expect([engine.queued(), engine.maxQueued(), engine.reservedTokens()]).toEqual([1, 1, 12])
    vi.advanceTimersByTime(100)
    expect(a.steps).toEqual([10, 20])
    expect(b.steps).toEqual([30, 40])
    expect([engine.queued(), engine.reservedTokens(), engine.maxRunning()]).toEqual([0, 0, 1])
  })

  test('a cancelled job is stepped no more; its seat goes to the next at the step boundary', () => {
    const start = Date.now()
    const engine = new SimEngine({ ...TIMING, maxBatch: 1 }, () => Date.now())
    const [a, b] = [job(10, 100, start), job(10, 2, start)]
    engine.submit(a)
    engine.submit(b)
    vi.advanceTimersByTime(25)
    engine.cancel(a)
    vi.advanceTimersByTime(100)
    expect(a.steps).toEqual([10, 20])
    // a left mid-step: b is admitted at that step's boundary, 30, and prefills from there.
    expect(b.steps).toEqual([40, 50])
  })

  test('closed, it steps nothing more and submits nothing', () => {
    const start = Date.now()
    const engine = new SimEngine(TIMING, () => Date.now())
    const a = job(10, 100, start)
    engine.submit(a)
    vi.advanceTimersByTime(25)
    engine.close()
    engine.submit(job(10, 1, start))
    vi.advanceTimersByTime(100)
    expect(a.steps).toEqual([10, 20])
    expect(vi.getTimerCount()).toBe(0)
  })
})
