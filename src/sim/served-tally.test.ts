import { describe, expect, test } from 'vitest'
import { type EndedCompletion, preemptedAt, ServedTally } from './served-tally.ts'

const engine = { maxRunning: () => 3, queued: () => 1, maxQueued: () => 2 }

const ended = (over: Partial<EndedCompletion> = {}): EndedCompletion => ({
  emittedTokens: 4,
  complete: true,
  faulted: false,
  promptTokens: 100,
  cachedTokens: 0,
  openedAt: 1000,
  firstTokenAt: 1200,
  endedAt: 1600,
  ...over,
})

describe('ServedTally', () => {
  test('counts connections, tokenize calls, accepted requests by arrival index and their faults', () => {
    const tally = new ServedTally(1000)
    tally.connected()
    tally.connected()
    tally.tokenized()
    expect([tally.accepted(null), tally.accepted('drop'), tally.accepted('drop'), tally.accepted('http500')]).toEqual([0, 1, 2, 3])
    expect(tally.requests).toBe(4)
    const stats = tally.stats(2, engine)
    expect(stats).toMatchObject({
      requests: 4,
      tokenizeRequests: 1,
      connectionsAccepted: 2,
      active: 2,
      maxRunning: 3,
      queued: 1,
      maxQueued: 2,
    })
    expect(stats.faultsInjected).toMatchObject({ drop: 2, http500: 1, stall: 0 })
    // A copy: the caller cannot change the tally's counts.
    stats.faultsInjected.drop = 99
    expect(tally.stats(0, engine).faultsInjected.drop).toBe(2)
  })

  test('the most streams open at once, and the prompt tokens of those opened', () => {
    const tally = new ServedTally(1000)
    tally.opened(10, 1)
    tally.opened(20, 2)
    tally.opened(30, 1)
    tally.preempted()
    expect(tally.stats(0, engine).maxActive).toBe(2)
    expect(tally.counters({ running: 1, waiting: 0, kvUsage: 0.5 }, { queriedTokens: 60, hitTokens: 15 })).toEqual({
      running: 1,
      waiting: 0,
      kvUsage: 0.5,
      promptTokens: 60,
      generationTokens: 0,
      requestsFinished: 0,
      preemptions: 1,
      prefixCacheQueries: 60,
      prefixCacheHits: 15,
      prefixCacheHitRate: 0.25,
    })
  })

  test('an ended stream counts its tokens; only a complete one without a fault is clean; timing sums only with output', () => {
    const tally = new ServedTally(1000)
    tally.ended(ended())
    tally.ended(ended({ faulted: true }))
    tally.ended(ended({ complete: false }))
    tally.ended(ended({ emittedTokens: 0, firstTokenAt: null, complete: false }))
    expect(tally.stats(0, engine).cleanCompletions).toBe(1)
    const noCache = { queriedTokens: 0, hitTokens: 0 }
    expect(tally.counters({ running: 0, waiting: 0, kvUsage: 0 }, noCache)).toMatchObject({
      generationTokens: 12,
      requestsFinished: 4,
      prefixCacheHitRate: 0,
    })
    // Three with output: 0.2 s to the first token, 0.1 s modelled prefill (100 tokens at 1000/s), 0.4 s decode, each.
    expect(tally.timings.count).toBe(3)
    expect(tally.timings.ttftSecondsSum).toBeCloseTo(0.6, 12)
    expect(tally.timings.prefillSecondsSum).toBeCloseTo(0.3, 12)
    expect(tally.timings.decodeSecondsSum).toBeCloseTo(1.2, 12)
  })

  test('the modelled prefill time counts only the prompt tokens the prefix cache did not hold', () => {
    const tally = new ServedTally(1000)
    tally.ended(ended({ cachedTokens: 80 }))
    expect(tally.timings.prefillSecondsSum).toBeCloseTo(0.02, 12)
  })
})

describe('preemptedAt', () => {
  test('spreads the preempted share evenly over arrival indices', () => {
    const preempted = (share: number, n: number): number[] => [...Array(n).keys()].filter((i) => preemptedAt(i, share))
    expect(preempted(0.05, 60)).toEqual([19, 39, 59])
    expect(preempted(0.5, 8)).toEqual([1, 3, 5, 7])
    expect(preempted(0, 100)).toEqual([])
    expect(preempted(1, 3)).toEqual([0, 1, 2])
  })
})
