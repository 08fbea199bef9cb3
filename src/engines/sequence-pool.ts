/**
 * A fixed set of resources (an in-process engine's context sequences) lent one request at a
 * time: `acquire` resolves at once while one is free, otherwise in arrival order as they come
 * back by `release`.
 * @example const pool = new SequencePool([a, b]); const s = await pool.acquire(); try { … } finally { pool.release(s) }
 */
export class SequencePool<T> {
  readonly #free: T[]
  readonly #waiting: Array<(item: T) => void> = []

  constructor(items: readonly T[]) {
    this.#free = [...items]
  }

  /** Requests waiting for one now. */
  get waiting(): number {
    return this.#waiting.length
  }

  /** Resolves with a free one, or with the next one released. */
  acquire(): Promise<T> {
    return new Promise((resolve) => {
      const item = this.#free.pop()
      if (item !== undefined) resolve(item)
      else this.#waiting.push(resolve)
    })
  }

  /** Gives one back: to the longest waiter, or to the free set. */
  release(item: T): void {
    const next = this.#waiting.shift()
    if (next !== undefined) next(item)
    else this.#free.push(item)
  }
}
