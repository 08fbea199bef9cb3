import type { SentDigest } from '../client/sent-digest.ts'
import { bodyBytes, bodyEntry } from '../workload/bytes.ts'
import { type PlannedRequest, type PreparedWorkload, StreamHash } from '../workload/prepare.ts'

/** Bodies a feed builds ahead of the one being sent. */
export const LOOK_AHEAD = 32
/** Bodies built per event-loop turn while filling the look-ahead, so a due send never waits long behind them. */
const PER_TURN = 4
/**
 * Bytes of bodies `prefill` builds before a phase beyond the look-ahead: a cell whose bodies fit
 * (a few thousand requests of a few kB) builds none while it measures. Building one takes tens of
 * microseconds and some 20 kB of garbage, which a round of streams ending together would otherwise
 * pay at the very moment the streams still running are stamped.
 */
const PREBUILT_BYTES = 4 * 1024 * 1024

/** One request as the dispatcher sends it: its bytes (model included) and what judging its reply needs. */
export interface FedRequest {
  bytes: Buffer
  planned: PlannedRequest
}

interface Built {
  /** The body's length and sha256 for the request-stream hash, taken when it was built (not when sent). */
  entry: readonly [number, string]
  fed: FedRequest
}

/**
 * Builds a range of a workload's bodies as they are sent, at most `lookAhead` ahead of the last
 * one taken (filled between event-loop turns), and hashes them in index order whatever order
 * they are taken in (a conversation's sessions interleave): the request-stream hash of what was
 * sent. A live conversation's body holds the model's replies, so its planned turn is hashed
 * instead. Once `signal` aborts, a body is no longer built (the request fails as aborted anyway)
 * and `requestStreamSha256` is null.
 */
export class BodyFeed {
  readonly #workload: PreparedWorkload
  readonly #model: string
  readonly #end: number
  readonly #signal: AbortSignal
  readonly #lookAhead: number
  readonly #built = new Map<number, Built>()
  readonly #hash: OrderedHash
  readonly #owned: ((index: number) => boolean) | null
  readonly #entries = new Map<number, readonly [number, string]>()
  #next: number
  #taken: number
  #complete = true
  #refill: NodeJS.Immediate | null = null
  /** Bytes of the bodies built and not yet taken. */
  #builtBytes = 0

  /**
   * @param owned a shard's requests (`servegate run --shards`): only these are built ahead, and
   *   each taken body's digest is kept (`entries`) for the merged request-stream hash; @default all
   */
  constructor(
    workload: PreparedWorkload,
    model: string,
    from: number,
    end: number,
    signal: AbortSignal,
    lookAhead = LOOK_AHEAD,
    owned: ((index: number) => boolean) | null = null,
  ) {
    this.#owned = owned
    this.#workload = workload
    this.#model = model
    this.#end = end
    this.#signal = signal
    this.#lookAhead = lookAhead
    this.#next = from
    this.#taken = from
    this.#hash = new OrderedHash(from)
  }

  /**
   * The request at `index` (absolute in the workload), built now if the look-ahead has not yet.
   * @param replies a live conversation's replies so far in the request's session; null otherwise
   */
  take(index: number, replies: readonly string[] | null = null): FedRequest {
    this.#taken = Math.max(this.#taken, index + 1)
    if (this.#signal.aborted) {
      this.#complete = false
      this.#built.delete(index)
      return { bytes: Buffer.alloc(0), planned: this.#workload.planned(index) }
    }
    const conversation = this.#workload.conversation
    if (replies !== null && conversation !== null) {
      const body = conversation.body(index, replies)
      this.#hash.add(index, bodyEntry(conversation.plannedTurn(index)))
      return { bytes: bodyBytes(this.#model, body), planned: this.#workload.planned(index) }
    }
    const ahead = this.#built.get(index)
    const built = ahead ?? this.#build(index)
    if (ahead !== undefined) {
      this.#built.delete(index)
      this.#builtBytes -= ahead.fed.bytes.length
    }
    this.#hash.add(index, built.entry)
    if (this.#owned !== null) this.#entries.set(index, built.entry)
    this.#schedule()
    return built.fed
  }

  /** sha256 over the taken bodies in index order (`requestStreamSha256`); null unless each was built, none missing before the last. */
  get requestStreamSha256(): string | null {
    return this.#complete && this.#hash.gapless ? this.#hash.digest() : null
  }

  /** A shard's taken bodies by index, as the request-stream hash takes them (length, sha256); empty unless built with `owned`. */
  get entries(): ReadonlyMap<number, readonly [number, string]> {
    return this.#entries
  }

  /**
   * Builds the look-ahead now, before the requests start (the first round of a closed loop at
   * concurrency C, a look-ahead of at least C, then sends without building a body), and the bodies
   * after it while those built hold at most `budgetBytes`: a phase whose bodies all fit builds
   * none while it runs. A feed without a look-ahead (a conversation's) builds none ahead.
   */
  prefill(budgetBytes = PREBUILT_BYTES): void {
    if (this.#signal.aborted || this.#lookAhead === 0) return
    this.#fill(Infinity)
    while (this.#next < this.#end && this.#builtBytes < budgetBytes) this.#buildNext()
  }

  /** Bodies built ahead and not yet taken. */
  get ready(): number {
    return this.#built.size
  }

  /** Builds up to `most` bodies of the look-ahead not built yet; true when some are left to build. */
  #fill(most: number): boolean {
    const until = Math.min(this.#end, this.#taken + this.#lookAhead)
    this.#next = Math.max(this.#next, this.#taken)
    for (let n = 0; n < most && this.#next < until; n++) this.#buildNext()
    return this.#next < until
  }

  /** Builds the next body ahead (unless built, or another shard's), and moves past it. */
  #buildNext(): void {
    const index = this.#next++
    if ((this.#owned !== null && !this.#owned(index)) || this.#built.has(index)) return
    const built = this.#build(index)
    this.#built.set(index, built)
    this.#builtBytes += built.fed.bytes.length
  }

  /** Stops filling the look-ahead. */
  close(): void {
    if (this.#refill !== null) clearImmediate(this.#refill)
    this.#refill = null
    this.#built.clear()
    this.#builtBytes = 0
  }

  #build(index: number): Built {
    const r = this.#workload.request(index)
    const { body, ...planned } = r
    return { entry: bodyEntry(body), fed: { bytes: bodyBytes(this.#model, body), planned } }
  }

  #schedule(): void {
    if (this.#refill !== null) return
    this.#refill = setImmediate(() => {
      this.#refill = null
      if (this.#signal.aborted) return
      if (this.#fill(PER_TURN)) this.#schedule()
    })
  }
}

/** Bodies hashed in index order as they come in any order: each waits (as its length and digest) until those before it came. */
class OrderedHash {
  readonly #waiting = new Map<number, readonly [number, string]>()
  readonly #hash = new StreamHash()
  #next: number

  constructor(from: number) {
    this.#next = from
  }

  /** @param entry the body's length and sha256 (`bodyEntry`) */
  add(index: number, entry: readonly [number, string]): void {
    this.#waiting.set(index, entry)
    while (this.#waiting.has(this.#next)) {
      const [bytes, sha256] = this.#waiting.get(this.#next) as readonly [number, string]
      this.#hash.updateDigest(bytes, sha256)
      this.#waiting.delete(this.#next++)
    }
  }

  /** No body came after one still missing. */
  get gapless(): boolean {
    return this.#waiting.size === 0
  }

  digest(): string {
    return this.#hash.digest()
  }
}

/**
 * The wire-stream hash: what was written for each request, model removed, hashed in plan order
 * as requests end in any order. Only each body's length and digest wait here (never its bytes),
 * until those before it have ended.
 */
export class WireHash {
  readonly #waiting = new Map<number, SentDigest | null>()
  readonly #hash = new StreamHash()
  #next: number

  constructor(from = 0) {
    this.#next = from
  }

  /** Request `index` ended having written what `sent` digests (null: nothing was written). */
  add(index: number, sent: SentDigest | null): void {
    this.#waiting.set(index, sent)
    while (this.#waiting.has(this.#next)) {
      const entry = this.#waiting.get(this.#next) ?? null
      if (entry === null) this.#hash.update('')
      else this.#hash.updateDigest(entry.bodyBytes, entry.bodySha256)
      this.#waiting.delete(this.#next++)
    }
  }

  /** The hash over every request from the first up to the first one still missing. */
  digest(): string {
    return this.#hash.digest()
  }
}
