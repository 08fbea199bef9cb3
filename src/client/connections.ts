import { Client, Dispatcher } from 'undici'
import { ServegateError } from '../errors.ts'
import { TurnSlice } from './turn-slice.ts'

/** A request not yet handed to a connection. */
interface Queued {
  opts: Dispatcher.DispatchOptions
  handler: Dispatcher.DispatchHandler
}

/** Fails a request that never reached a connection: it has no controller yet, as undici's own queued requests have none. */
function refuse(q: Queued, err: Error): void {
  q.handler.onResponseError?.(null as unknown as Dispatcher.DispatchController, err)
}

/**
 * The keep-alive connections a cell streams over: up to `connections` undici `Client`s, each
 * carrying one request at a time. A request takes the connection released last (the one its
 * slot's previous request just finished on, in a closed loop), opens a new one while fewer than
 * `connections` are open, or else waits, first come first served, for the next to be released.
 *
 * Why not undici's `Pool`: with one request per connection, a `Pool` holds a connection back for
 * an event-loop turn after its response ends (a `setImmediate` in undici's client) before it
 * takes another request, so a closed loop's next request, sent as the last one ends, finds every
 * connection busy and waits in the pool's queue; then undici's idle-socket check (bytes or a FIN
 * the server sent unasked are read before a reused socket is written again) takes a turn more.
 * Here the request goes onto the connection just released and waits for that check alone. Under
 * hundreds of streams a turn lasts milliseconds, so the turns a `Pool` adds show in every
 * request's send lag (slot free to bytes written); docs/client-benchmark.md has the figures.
 * On a thread past its capacity sending sooner does not by itself keep the ITL tail precise; the
 * slices below do.
 *
 * Requests go out in slices of about `SLICE_MS` per event-loop turn (a `TurnSlice`, which the
 * cell's closed loop shares: its next requests start in the same budget). A closed loop's equal
 * streams end together, and handing each next request to the socket at once would hold one thread
 * for tens of milliseconds at C = 256: every chunk that arrives meanwhile is stamped that late, a
 * first chunk too (the TTFT of a request whose first token comes back within the storm). Sliced,
 * the reads that arrive between slices are stamped within a turn; the requests behind go out
 * that much later, which their send lag records (docs/client-benchmark.md). Below a slice's
 * worth a turn, a request goes out at once. Each handed request's bytes are written in the next
 * check phase (undici's idle-socket check), so a turn then holds the thread for a few times the
 * slice with the writes.
 *
 * A connection is released once undici has finished with its response (`onResponseEnd` or
 * `onResponseError`, then one microtask, so undici's own bookkeeping is done first), never when
 * the caller's stream settles on `[DONE]`.
 */
export class StreamConnections extends Dispatcher {
  readonly #origin: string
  readonly #max: number
  readonly #options: Client.Options
  readonly #open: Client[] = []
  /** Released connections, the last released on top. */
  readonly #idle: Client[] = []
  /** Requests for which no connection was free: each goes out on the next one released. */
  readonly #waiting: Queued[] = []
  /** Requests past this turn's slice, oldest first: they go out in the next turns. */
  readonly #ready: Queued[] = []
  readonly #slice: TurnSlice
  #accepting = true
  #destroyed = false
  /** Called when the last waiting or queued request has gone out, while closing. */
  #drained: (() => void) | null = null

  /**
   * @param connections the most open at once; null for no bound (an open loop without an in-flight cap)
   * @param options.slice the turn slices requests are handed on in, shared with the thread's other
   *   work that can wait (a closed loop's); @default a `TurnSlice` of its own, of `SLICE_MS` a turn
   *   (pass `new TurnSlice(Infinity)` to hand every request on at once)
   */
  constructor(origin: string, connections: number | null, options: { keepAliveTimeout?: number; slice?: TurnSlice } = {}) {
    super()
    if (connections !== null && !(Number.isInteger(connections) && connections >= 1)) {
      throw new ServegateError('INTERNAL', `connections: a whole number ≥ 1 or null, got ${connections}`)
    }
    this.#origin = origin
    this.#max = connections ?? Infinity
    this.#options = { pipelining: 1, keepAliveTimeout: options.keepAliveTimeout ?? 60_000 }
    this.#slice = options.slice ?? new TurnSlice()
  }

  /** Connections opened so far (each stays open, idle or busy, until close or destroy). */
  get opened(): number {
    return this.#open.length
  }

  /** Requests waiting for a connection. */
  get waiting(): number {
    return this.#waiting.length
  }

  /** Requests past their turn's slice, not yet handed to a connection. */
  get queued(): number {
    return this.#ready.length
  }

  /** Hands the request on now, within this turn's slice, or queues it behind the others for the next turns. */
  override dispatch(opts: Dispatcher.DispatchOptions, handler: Dispatcher.DispatchHandler): boolean {
    if (!this.#accepting) throw new ServegateError('INTERNAL', 'the connections are closed; no request can be sent on them')
    if (this.#slice.open) return this.#slice.run(() => this.#handOn(opts, handler))
    this.#ready.push({ opts, handler })
    void this.#slice.later(this.#handOnOldest)
    return true
  }

  /**
   * Opens connections until `count` are open (never past the bound), each answering a `GET path`
   * of its own, and keeps them idle for the requests to come, so that a measured phase connects
   * nothing. Each GET goes on a connection of its own at once, outside the slices (nothing is
   * measured yet): through `dispatch`, a GET answered quickly would free its connection for the
   * next and fewer would open. Best effort: a connection the server refuses joins the idle ones
   * all the same, and undici connects it again when a request takes it.
   */
  async warm(count: number, get: { path: string; headers?: Record<string, string>; timeoutMs: number }): Promise<void> {
    const fresh: Client[] = []
    while (this.#accepting && this.#open.length < Math.min(count, this.#max)) fresh.push(this.#connect())
    await Promise.allSettled(
      fresh.map(async (client) => {
        const res = await client.request({
          method: 'GET',
          path: get.path,
          headers: get.headers,
          signal: AbortSignal.timeout(get.timeoutMs),
        })
        await res.body.dump()
      }),
    )
    if (this.#destroyed) return
    for (const client of fresh) this.#release(client)
  }

  /** Stops taking requests; those waiting still go out as connections free; resolves when every connection has closed. */
  override close(): Promise<void>
  override close(callback: () => void): void
  override close(callback?: () => void): Promise<void> | void {
    const done = this.#closeGracefully()
    if (callback === undefined) return done
    void done.then(callback)
  }

  /** Fails the requests still waiting and ends every connection at once, in flight or not. */
  override destroy(): Promise<void>
  override destroy(err: Error | null): Promise<void>
  override destroy(callback: () => void): void
  override destroy(err: Error | null, callback: () => void): void
  override destroy(errOrCallback?: Error | null | (() => void), callback?: () => void): Promise<void> | void {
    const err = typeof errOrCallback === 'function' ? null : (errOrCallback ?? null)
    const cb = typeof errOrCallback === 'function' ? errOrCallback : callback
    const done = this.#destroyNow(err)
    if (cb === undefined) return done
    void done.then(cb)
  }

  async #closeGracefully(): Promise<void> {
    this.#accepting = false
    while (this.#waiting.length > 0 || this.#ready.length > 0) await new Promise<void>((resolve) => (this.#drained = resolve))
    await Promise.all(this.#open.splice(0).map((client) => client.close()))
  }

  async #destroyNow(err: Error | null): Promise<void> {
    this.#accepting = false
    this.#destroyed = true
    const reason = err ?? new ServegateError('REQUEST_ABORTED', 'the connections were destroyed before this request could be sent')
    for (const q of [...this.#ready.splice(0), ...this.#waiting.splice(0)]) refuse(q, reason)
    this.#idle.length = 0
    await Promise.all(this.#open.splice(0).map((client) => client.destroy(err)))
  }

  /** Hands a request to a free connection, or to the waiting line. */
  #handOn(opts: Dispatcher.DispatchOptions, handler: Dispatcher.DispatchHandler): boolean {
    const client = this.#idle.pop() ?? (this.#open.length < this.#max ? this.#connect() : null)
    if (client === null) {
      this.#waiting.push({ opts, handler })
      return false
    }
    this.#send(client, opts, handler)
    return true
  }

  /** In a later turn's slice: hands on the oldest request queued past its own turn's (none left once destroyed). */
  readonly #handOnOldest = (): void => {
    const next = this.#ready.shift()
    if (next !== undefined) {
      try {
        this.#handOn(next.opts, next.handler)
      } catch (err) {
        // Refused as it left the queue: its caller is no longer on the stack, so it hears it here.
        refuse(next, err as Error)
      }
    }
    this.#checkDrained()
  }

  #checkDrained(): void {
    if (this.#waiting.length === 0 && this.#ready.length === 0 && this.#drained !== null) {
      this.#drained()
      this.#drained = null
    }
  }

  #connect(): Client {
    const client = new Client(this.#origin, this.#options)
    this.#open.push(client)
    return client
  }

  /** Hands the connection to the first waiting request, or keeps it idle. */
  #release(client: Client): void {
    if (this.#destroyed) return
    const next = this.#waiting.shift()
    if (next === undefined) this.#idle.push(client)
    else {
      try {
        this.#send(client, next.opts, next.handler)
      } catch (err) {
        // Refused as it left the queue: its caller is no longer on the stack, so it hears it here.
        refuse(next, err as Error)
      }
    }
    this.#checkDrained()
  }

  #send(client: Client, opts: Dispatcher.DispatchOptions, handler: Dispatcher.DispatchHandler): void {
    let released = false
    const release = (): void => {
      if (released) return
      released = true
      queueMicrotask(() => this.#release(client))
    }
    const wrapped: Dispatcher.DispatchHandler = {
      onRequestStart: (controller, context) => handler.onRequestStart?.(controller, context),
      onRequestUpgrade: (controller, statusCode, headers, socket) => handler.onRequestUpgrade?.(controller, statusCode, headers, socket),
      onResponseStart: (controller, statusCode, headers, statusMessage) =>
        handler.onResponseStart?.(controller, statusCode, headers, statusMessage),
      onResponseData: (controller, chunk) => handler.onResponseData?.(controller, chunk),
      onResponseEnd: (controller, trailers) => {
        release()
        handler.onResponseEnd?.(controller, trailers)
      },
      onResponseError: (controller, err) => {
        release()
        handler.onResponseError?.(controller, err)
      },
      onResponseStarted: () => handler.onResponseStarted?.(),
      onBodySent: (chunk) => handler.onBodySent?.(chunk),
      onRequestSent: () => handler.onRequestSent?.(),
    }
    try {
      client.dispatch(opts, wrapped)
    } catch (err) {
      // Refused before it started (bad options): the connection carries nothing.
      release()
      throw err
    }
  }
}
