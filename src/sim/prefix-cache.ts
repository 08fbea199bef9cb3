import { tokenIds } from './tokens.ts'

/**
 * The key of one block of prompt tokens, chained to the key of the blocks before it (53 bits, a
 * safe integer): equal keys mean equal tokens from the prompt's start through this block, as
 * vLLM's block hashes (each hashes its parent's hash with its own tokens).
 */
function blockKey(parent: number, ids: readonly number[], from: number, to: number): number {
  let h1 = 0xdeadbeef ^ (parent >>> 0)
  let h2 = 0x41c6ce57 ^ Math.floor(parent / 0x1_0000_0000)
  for (let i = from; i < to; i++) {
    const id = ids[i] as number
    h1 = Math.imul(h1 ^ id, 2654435761)
    h2 = Math.imul(h2 ^ id, 1597334677)
  }
  h1 = Math.imul(h1 ^ (h1 >>> 16), 2246822507) ^ Math.imul(h2 ^ (h2 >>> 13), 3266489909)
  h2 = Math.imul(h2 ^ (h2 >>> 16), 2246822507) ^ Math.imul(h1 ^ (h1 >>> 13), 3266489909)
  return 0x1_0000_0000 * (0x1f_ffff & h2) + (h1 >>> 0)
}

/**
 * The chained keys of a prompt's whole blocks of `blockTokens` tokens, in order (a last partial
 * block has none: only whole blocks are cached).
 * @example blockKeys([1, 2, 3, 4, 5], 2).length // 2
 */
export function blockKeys(ids: readonly number[], blockTokens: number): number[] {
  const keys: number[] = []
  let parent = 0
  for (let end = blockTokens; end <= ids.length; end += blockTokens) {
    parent = blockKey(parent, ids, end - blockTokens, end)
    keys.push(parent)
  }
  return keys
}

/** What the prefix cache has served: tokens looked up and tokens found, as vLLM's counters count them. */
export interface PrefixCacheCounters {
  /** Prompt tokens of every lookup (`vllm:prefix_cache_queries`). */
  queriedTokens: number
  /** Prompt tokens found cached (`vllm:prefix_cache_hits`). */
  hitTokens: number
}

/**
 * The simulated engine's prefix cache: an LRU over blocks of `blockTokens` prompt tokens holding
 * at most `capacityTokens / blockTokens` blocks. A lookup finds the leading run of a prompt's
 * blocks that are cached (a block counts only when every block before it does, which the chained
 * keys make so), but at most the prompt less one token: as vLLM, the last token is always
 * computed, so a prompt held whole still prefills one block. Hits become the most recently used
 * (head last, see `insert`); a prompt's prefilled blocks are added after its prefill, and the
 * least recently used ones leave when it is full. With a capacity of 0 it holds nothing and finds nothing.
 * @example
 * const cache = new PrefixCache(1024, 16)
 * const keys = blockKeys(ids, 16)
 * cache.lookup(keys, ids.length) // 0 the first time
 * cache.insert(keys)
 * cache.lookup(keys, ids.length) // the whole blocks, less the last when the prompt is all blocks
 */
export class PrefixCache {
  readonly blockTokens: number
  readonly #capacityBlocks: number
  /** Keys in LRU order: the first is the least recently used (a Map keeps insertion order). */
  readonly #blocks = new Map<number, true>()
  #queriedTokens = 0
  #hitTokens = 0

  constructor(capacityTokens: number, blockTokens: number) {
    this.blockTokens = blockTokens
    this.#capacityBlocks = Math.floor(capacityTokens / blockTokens)
  }

  /** Whether it can hold anything. */
  get enabled(): boolean {
    return this.#capacityBlocks > 0
  }

  /** Blocks held now. */
  get blocks(): number {
    return this.#blocks.size
  }

  /** The counters so far; a reset leaves them (they count what was served). */
  counters(): PrefixCacheCounters {
    return { queriedTokens: this.#queriedTokens, hitTokens: this.#hitTokens }
  }

  /**
   * Prompt tokens of `promptTokens` whose blocks (`keys`, from `blockKeys`) are cached, counted in
   * the counters; the blocks found become the most recently used.
   */
  lookup(keys: readonly number[], promptTokens: number): number {
    if (!this.enabled) return 0
    const usable = Math.min(keys.length, Math.floor(Math.max(0, promptTokens - 1) / this.blockTokens))
    let hit = 0
    while (hit < usable && this.#blocks.has(keys[hit] as number)) hit++
    for (let i = hit - 1; i >= 0; i--) this.#touch(keys[i] as number)
    this.#queriedTokens += promptTokens
    this.#hitTokens += hit * this.blockTokens
    return hit * this.blockTokens
  }

  /**
   * Adds a prefilled prompt's blocks as the most recently used, evicting the least recently used
   * beyond capacity. Its blocks are touched last to first, as vLLM frees a request's blocks, so
   * that a prompt's tail leaves the cache before its head (a lookup needs the leading blocks).
   */
  insert(keys: readonly number[]): void {
    if (!this.enabled) return
    for (let i = keys.length - 1; i >= 0; i--) this.#touch(keys[i] as number)
    for (const key of this.#blocks.keys()) {
      if (this.#blocks.size <= this.#capacityBlocks) break
      this.#blocks.delete(key)
    }
  }

  /** Drops every block (`POST /reset_prefix_cache`); returns how many it held. */
  reset(): number {
    const held = this.#blocks.size
    this.#blocks.clear()
    return held
  }

  #touch(key: number): void {
    this.#blocks.delete(key)
    this.#blocks.set(key, true)
  }
}

/**
 * One request's prompt against the prefix cache: looked up once, as its prefill starts, and added
 * once, as its prefill ends; its reply is added after it once streamed whole, as an engine caches
 * the blocks it generated (a live conversation's next turn then finds it). Its keys are computed
 * on the first lookup.
 * @example const prompt = new CachedPrompt(cache, () => promptTokenIds(request)); prompt.lookup(); prompt.prefilled()
 */
export class CachedPrompt {
  readonly #cache: PrefixCache
  readonly #ids: () => readonly number[]
  #keys: number[] | null = null
  #promptIds: readonly number[] | null = null
  #cachedTokens: number | null = null

  constructor(cache: PrefixCache, ids: () => readonly number[]) {
    this.#cache = cache
    this.#ids = ids
  }

  /** Prompt tokens found cached when its prefill started; null before. */
  get cachedTokens(): number | null {
    return this.#cachedTokens
  }

  /** Looks its blocks up (once) and returns the tokens found cached. */
  lookup(): number {
    if (this.#cachedTokens !== null) return this.#cachedTokens
    const ids = this.#ids()
    this.#promptIds = ids
    this.#keys = blockKeys(ids, this.#cache.blockTokens)
    this.#cachedTokens = this.#cache.lookup(this.#keys, ids.length)
    return this.#cachedTokens
  }

  /** Its prefill ended: its blocks are cached now. */
  prefilled(): void {
    if (this.#keys !== null) this.#cache.insert(this.#keys)
  }

  /** Its reply streamed whole: the blocks of its prompt followed by the reply's tokens (as the sim tokenizes the text) are cached. */
  generated(reply: string): void {
    if (this.#promptIds === null || reply === '') return
    this.#cache.insert(blockKeys([...this.#promptIds, ...tokenIds(reply)], this.#cache.blockTokens))
  }
}
