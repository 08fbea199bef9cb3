import { describe, expect, test } from 'vitest'
import { ownRequests, shardConcurrency, shardRequests, ShardView } from './shard-split.ts'

describe('splitting a cell over shards', () => {
  test('an open loop: shard i sends the requests whose index is i mod N, every request once', () => {
    const shards = [0, 1, 2, 3].map((index) => ownRequests({ index, count: 4 }, 10, null))
    expect(shards).toEqual([
      [0, 4, 8],
      [1, 5, 9],
      [2, 6],
      [3, 7],
    ])
  })

  test('a closed loop: the concurrency split as evenly as it goes, the requests dealt in proportion', () => {
    expect([0, 1, 2, 3].map((i) => shardConcurrency(10, 4, i))).toEqual([3, 3, 2, 2])
    const shards = [0, 1, 2].map((index) => ownRequests({ index, count: 3 }, 12, 4))
    // Slots 2, 1, 1: shard 0 sends half the requests, the others a quarter each, interleaved through the plan.
    expect(shards.map((s) => s.length)).toEqual([6, 3, 3])
    expect(shards.flat().sort((a, b) => a - b)).toEqual(Array.from({ length: 12 }, (_, i) => i))
    expect(shards).toEqual([
      [0, 3, 4, 7, 8, 11],
      [1, 5, 9],
      [2, 6, 10],
    ])
  })

  test('equal weights deal round robin; a zero weight gets nothing', () => {
    expect(shardRequests(6, [1, 1], 1)).toEqual([1, 3, 5])
    expect(shardRequests(6, [1, 0, 1], 1)).toEqual([])
  })

  test('a closed loop with fewer slots than shards is refused, naming both flags', () => {
    expect(() => ownRequests({ index: 0, count: 4 }, 10, 2)).toThrow(/--shards 4: a closed loop at concurrency 2 .*--concurrency 4/)
  })

  test("a shard's view maps its loop numbers to the plan's and keeps what it sent", () => {
    const handed: unknown[] = []
    const view = new ShardView({ index: 1, count: 3, barrier: async () => 0, onStreams: (s) => handed.push(s) }, 7, null)
    expect(view.own).toEqual([1, 4])
    expect(view.offsets([0, 10, 20, 30, 40, 50, 60])).toEqual([10, 40])
    expect([view.warmupCount(5), view.warmupCount(1)]).toEqual([2, 0])
    expect(view.warmupIndex(1)).toBe(4)
    const sent: number[] = []
    const done: number[] = []
    const d = view.dispatch(
      async (i) => {
        sent.push(i)
        return {} as never
      },
      (slot) => done.push(slot.index),
    )
    void d.send(1)
    d.onDone({ index: 0, readyAt: 0, slotAt: 0, scheduledOffsetMs: 10, obs: {} as never })
    expect([sent, done]).toEqual([[4], [1]])
    view.wrote(4, { bodyBytes: 3, bodySha256: 'ab' })
    view.wrote(1, null)
    view.finish(new Map([[1, [5, 'cd'] as const]]))
    expect(handed).toEqual([
      {
        request: [[1, 5, 'cd']],
        wire: [
          [4, 3, 'ab'],
          [1, null],
        ],
      },
    ])
  })
})
