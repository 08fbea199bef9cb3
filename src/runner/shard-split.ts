import { monoMs } from '../client/clock.ts'
import { ServegateError } from '../errors.ts'
import type { Send, Slot } from './dispatch.ts'

/**
 * One shard of a cell that several processes measure together (`servegate run --shards N`): which
 * of the plan's requests this process sends, and when the shards start. Every shard prepares the
 * same plan (the same seeds, so the same bodies and the same open-loop schedule) and sends its
 * own share of it, so together they send what one process would.
 */
export interface CellShard {
  /** This shard, 0-based. */
  index: number
  /** Shards in all. */
  count: number
  /**
   * The start barrier: resolves once every shard is ready (prepared and warmed up), with the
   * shared start as this process's monotonic ms (`monoMs`), a moment still ahead.
   */
  barrier(): Promise<number>
  /** Handed, after the cell, what this shard sent: each request's body digest, for the merged stream hashes. */
  onStreams?(streams: ShardStreams): void
}

/** A body as the stream hashes take it: its length in bytes and its sha256 (hex); null when nothing was written. */
export type StreamEntry = readonly [bytes: number, sha256: string]

/** What one shard sent, by request index: the planned body (request stream) and what went on the wire (model removed). */
export interface ShardStreams {
  request: ReadonlyArray<readonly [index: number, bytes: number, sha256: string]>
  wire: ReadonlyArray<readonly [index: number, bytes: number, sha256: string] | readonly [index: number, null]>
}

/**
 * A closed loop's concurrency split over the shards as evenly as it goes: the first `C mod N`
 * shards take one slot more.
 * @example shardConcurrency(10, 4, 0) // 3 (then 3, 2, 2)
 */
export function shardConcurrency(concurrency: number, count: number, index: number): number {
  return Math.floor(concurrency / count) + (index < concurrency % count ? 1 : 0)
}

/**
 * The plan's requests a shard sends, in index order: dealt out one at a time in proportion to
 * the shards' weights (smooth weighted round robin, ties to the lower shard), so each shard's
 * share matches its weight and the shards' requests interleave through the plan. With equal
 * weights (an open loop; a closed loop whose concurrency divides evenly) shard i sends the
 * requests whose index is i mod N.
 * @example shardRequests(6, [1, 1], 1) // [1, 3, 5]
 */
export function shardRequests(requests: number, weights: readonly number[], index: number): number[] {
  const total = weights.reduce((a, b) => a + b, 0)
  const current = weights.map(() => 0)
  const own: number[] = []
  for (let r = 0; r < requests; r++) {
    let pick = 0
    for (let s = 0; s < weights.length; s++) {
      current[s] = (current[s] as number) + (weights[s] as number)
      if ((current[s] as number) > (current[pick] as number)) pick = s
    }
    current[pick] = (current[pick] as number) - total
    if (pick === index) own.push(r)
  }
  return own
}

/**
 * The requests shard `index` of `count` sends: an open loop's by index mod N (its share of the
 * one schedule), a closed loop's in proportion to its share of the concurrency.
 * @throws ServegateError CONFIG_INVALID when a closed loop has fewer slots than shards
 */
export function ownRequests(shard: Pick<CellShard, 'index' | 'count'>, requests: number, concurrency: number | null): number[] {
  if (concurrency === null) return shardRequests(requests, new Array<number>(shard.count).fill(1), shard.index)
  if (concurrency < shard.count) {
    throw new ServegateError(
      'CONFIG_INVALID',
      `--shards ${shard.count}: a closed loop at concurrency ${concurrency} leaves a shard without a slot; ` +
        `pass --concurrency ${shard.count} or more, or fewer shards`,
    )
  }
  const weights = Array.from({ length: shard.count }, (_, s) => shardConcurrency(concurrency, shard.count, s))
  return shardRequests(requests, weights, shard.index)
}

/**
 * Resolves at monotonic ms `at`: a timer to within a millisecond, then one check per event-loop
 * turn, as the open-loop dispatcher waits for a due send.
 */
export function sleepUntil(at: number): Promise<void> {
  return new Promise((resolve) => {
    const check = (): void => {
      const wait = at - monoMs()
      if (wait <= 0) resolve()
      else if (wait > 1) setTimeout(check, wait - 1)
      else setImmediate(check)
    }
    check()
  })
}

/** A request's dispatch as the loops see it: sent by its number in the loop, handed back with it. */
interface Dispatch {
  send: Send
  onDone: (slot: Slot) => void
}

/**
 * A shard's view of its cell: its own requests (numbered 0… in the loops, mapped back to the
 * plan's indices on the way out), its slots of a closed loop, its part of an open loop's
 * schedule and of the warm-up, and what it sent, for the merge.
 */
export class ShardView {
  readonly shard: CellShard
  /** The plan's indices this shard sends, ascending. */
  readonly own: readonly number[]
  /** A closed loop's slots of this shard (an open loop's warm-up runs at 1). */
  readonly concurrency: number
  readonly #owned: Set<number>
  readonly #request = new Map<number, StreamEntry>()
  readonly #wire: Array<readonly [number, number, string] | readonly [number, null]> = []

  /**
   * @param concurrency the cell's; null for an open loop
   * @throws ServegateError CONFIG_INVALID when a closed loop has fewer slots than shards
   */
  constructor(shard: CellShard, requests: number, concurrency: number | null) {
    this.shard = shard
    this.own = ownRequests(shard, requests, concurrency)
    this.concurrency = concurrency === null ? 1 : shardConcurrency(concurrency, shard.count, shard.index)
    this.#owned = new Set(this.own)
  }

  /** Whether request `index` of the plan is this shard's. */
  readonly owns = (index: number): boolean => this.#owned.has(index)

  /** This shard's send offsets: the one schedule's at its own indices. */
  offsets(offsetsMs: readonly number[]): number[] {
    return this.own.map((i) => offsetsMs[i] as number)
  }

  /** Warm-up requests of `total` this shard sends: those numbered i mod N. */
  warmupCount(total: number): number {
    return Math.max(0, Math.ceil((total - this.shard.index) / this.shard.count))
  }

  /** The warm-up's k-th request of this shard is warm-up request `index + k × N` of the plan. */
  warmupIndex(k: number): number {
    return this.shard.index + k * this.shard.count
  }

  /** The loops' dispatch of this shard's requests: its k-th is the plan's `own[k]`. */
  dispatch(send: Send, onDone: (slot: Slot) => void): Dispatch {
    return {
      send: (k) => send(this.own[k] as number),
      onDone: (slot) => onDone({ ...slot, index: this.own[slot.index] as number }),
    }
  }

  /** Keeps what request `index` wrote (model removed), for the merged wire hash. */
  wrote(index: number, sent: { bodyBytes: number; bodySha256: string } | null): void {
    this.#wire.push(sent === null ? [index, null] : [index, sent.bodyBytes, sent.bodySha256])
  }

  /** Hands the shard's streams over: the planned bodies it took (from its feed) and what it wrote. */
  finish(taken: ReadonlyMap<number, StreamEntry>): void {
    for (const [index, entry] of taken) this.#request.set(index, entry)
    const request = [...this.#request].map(([index, [bytes, sha256]]) => [index, bytes, sha256] as const)
    this.shard.onStreams?.({ request, wire: this.#wire })
  }
}
