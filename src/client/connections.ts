import { isIP, connect as netConnect, type Socket } from 'node:net'
import type { SecureContext } from 'node:tls'
import { ServegateError } from '../errors.ts'
import { nodeTls, tlsTrust } from '../http-request.ts'
import { monoMs } from './clock.ts'
import { noteStreamRead } from './read-batching.ts'
import { flushStagedReads, stageRead } from './staged-reads.ts'
import { type Http1Headers, Http1ResponseParser } from '../http1.ts'

/** One HTTP/1.1 request, its bytes ready: what `send` writes to a socket in one go. */
export interface WireRequest {
  method: 'GET' | 'POST'
  path: string
  /** Header names lower-case; `host` and `content-length` are added. */
  headers: Readonly<Record<string, string>>
  body: Buffer | null
}

/** A plain-TCP read's most bytes: libuv's own read size. */
const READ_BUFFER_BYTES = 64 * 1024

/**
 * What happens to a request on its connection, each with the monotonic time (`monoMs`) of the
 * read or write it came from. Exactly one of `onEnd` and `onError` ends it.
 */
export interface WireHandler {
  /** The request's bytes were handed to the socket (the body, for the wire digest). */
  onSent(body: Buffer | null, at: number): void
  onHead(status: number, headers: Http1Headers, at: number): void
  /** A piece of the body (de-chunked), a view valid only during the call; `at` is when its read arrived. */
  onBody(bytes: Uint8Array, at: number): void
  onEnd(at: number): void
  onError(err: Error, at: number): void
}

/**
 * A request's bytes built ahead of its send (`StreamConnections.prepare`), so that sending it is a
 * socket write: the head and body in one buffer, or why it cannot be sent.
 */
export interface PreparedRequest {
  /** Head and body, one write; empty when it cannot be sent. */
  bytes: Buffer
  /** The body alone, for the wire digest. */
  body: Buffer | null
  /** Why it cannot be sent (a header with a line break), reported as the request's failure when it goes; null when it can. */
  error: ServegateError | null
}

/** A request handed to `send`: abort it to drop its connection. */
export interface WireExchange {
  abort(reason: Error): void
}

/** A request not yet on a connection. */
interface Queued {
  request: PreparedRequest
  exchange: Exchange
}

/** A connection's socket, and the exchange it carries (null while idle). */
interface Conn {
  socket: Socket
  exchange: Exchange | null
  /** Closed or failed: never used again. */
  dead: boolean
  /** Called once when its exchange ends (closing waits for it). */
  onFree: (() => void) | null
}

/** A connection's failure as a socket gives one: a message and a stable `code` (the interpreter names it). */
class ConnectionError extends Error {
  readonly code: string
  constructor(code: string, message: string) {
    super(message)
    this.code = code
  }
}

/** One request's life: queued, written, read; finished once. */
class Exchange implements WireExchange {
  readonly handler: WireHandler
  conn: Conn | null = null
  finished = false
  readonly #release: (conn: Conn, reusable: boolean) => void
  readonly #parser: Http1ResponseParser
  /** The arrival time of the read being parsed. */
  #readAt = 0
  /** The parser saw the response's end; it completes once the whole read is parsed. */
  #ended = false

  readonly #drop: (conn: Conn) => void

  /**
   * @param release hands the connection on once this exchange ends on it (reusable or not)
   * @param drop closes a connection for good, whoever it carries now
   */
  constructor(handler: WireHandler, release: (conn: Conn, reusable: boolean) => void, drop: (conn: Conn) => void) {
    this.handler = handler
    this.#release = release
    this.#drop = drop
    this.#parser = new Http1ResponseParser({
      onHead: (status, headers) => handler.onHead(status, headers, this.#readAt),
      onBody: (bytes) => handler.onBody(bytes, this.#readAt),
      onEnd: () => (this.#ended = true),
    })
  }

  /** A read of the connection, stamped `at` before a byte of it was parsed. */
  read(bytes: Uint8Array, at: number): void {
    this.#readAt = at
    try {
      this.#parser.push(bytes)
    } catch (err) {
      this.fail(err as Error, at)
      return
    }
    // After the whole read: bytes past the response's end make the connection unfit for reuse.
    if (this.#ended) this.#complete()
  }

  /**
   * A read staged for this exchange arrived after it finished (`StagedTarget.stray`): bytes past
   * its response in the same poll, which nobody asked for, so the connection is not trusted again,
   * even if a request already went out on it (that one fails as closed, and is sent once more).
   */
  stray(): void {
    if (this.conn !== null) this.#drop(this.conn)
  }

  /** The connection ended or closed: a close-delimited body ends here; anything else unfinished is cut. */
  closed(at: number, err: Error | null): void {
    if (this.finished) return
    this.#readAt = at
    if (err === null && this.#parser.close()) {
      this.#complete()
      return
    }
    this.fail(err ?? new ConnectionError('SOCKET_CLOSED', 'other side closed'), at)
  }

  fail(err: Error, at: number): void {
    if (this.finished) return
    this.finished = true
    if (this.conn !== null) this.#release(this.conn, false)
    this.handler.onError(err, at)
  }

  abort(reason: Error): void {
    this.fail(reason, monoMs())
  }

  #complete(): void {
    if (this.finished) return
    this.finished = true
    if (this.conn !== null) this.#release(this.conn, this.#parser.keepAlive)
    this.handler.onEnd(this.#readAt)
  }
}

/**
 * The keep-alive connections a cell streams over: up to `connections` sockets of its own, each
 * carrying one request at a time. A request takes the connection released last (the one its
 * slot's previous request just finished on, in a closed loop), opens a new one while fewer than
 * `connections` are open, or else waits, first come first served, for the next to be released.
 *
 * Why sockets of its own and not undici: the time from a read's arrival to its stamp is what
 * every ITL and TTFT figure holds, and on the measured path undici adds its own work before a
 * handler sees a byte (its wasm parser, a `setImmediate` before a connection takes the next
 * request, a turn's idle-socket check before it writes), about 60 µs a request more than writing
 * a prepared buffer (docs/client-benchmark.md has the figures). Here each read is stamped in the
 * socket's read callback and staged (`staged-reads.ts`): the reads of one poll are all stamped
 * before any of them is parsed (`http1.ts`), each with its own stamp. A request is one write of
 * bytes prepared beforehand on a connection whose close the socket already reported. What is off
 * the measured path (probes, scrapes, tokenizers) goes through `http-request.ts`.
 *
 * A request goes out at once, in the caller's turn: preparing its bytes is the caller's work, done
 * ahead (`BodyFeed`), so a send costs the thread one write.
 *
 * An idle connection that the server closes, or that receives bytes unasked, is dropped at once;
 * a request never goes out on it.
 */
export class StreamConnections {
  readonly #host: string
  readonly #port: number
  readonly #tls: boolean
  /** What an HTTPS origin's certificate is verified against (`tlsTrust`); null for plain HTTP. */
  readonly #trust: SecureContext | null
  readonly #hostHeader: string
  readonly #max: number
  readonly #open: Conn[] = []
  /** Released connections, the last released on top. */
  readonly #idle: Conn[] = []
  /** Where every plain-TCP read lands; one read is handled whole before the next. */
  readonly #readBuffer = Buffer.allocUnsafe(READ_BUFFER_BYTES)
  /** Requests for which no connection was free: each goes out on the next one released. */
  readonly #waiting: Queued[] = []
  #accepting = true
  #destroyed = false
  /** Called when the last waiting or queued request has gone out, while closing. */
  #drained: (() => void) | null = null

  /**
   * @param origin `http://host:port` or `https://host:port`
   * @param connections the most open at once; null for no bound (an open loop without an in-flight cap)
   */
  constructor(origin: string, connections: number | null) {
    if (connections !== null && !(Number.isInteger(connections) && connections >= 1)) {
      throw new ServegateError('INTERNAL', `connections: a whole number ≥ 1 or null, got ${connections}`)
    }
    const url = new URL(origin)
    if (url.protocol !== 'http:' && url.protocol !== 'https:') {
      throw new ServegateError('INTERNAL', `origin: an http:// or https:// URL, got ${origin}`)
    }
    this.#tls = url.protocol === 'https:'
    this.#trust = this.#tls ? tlsTrust(origin) : null
    this.#host = url.hostname.replace(/^\[(.*)\]$/, '$1')
    this.#port = url.port === '' ? (this.#tls ? 443 : 80) : Number(url.port)
    this.#hostHeader = url.host
    this.#max = connections ?? Infinity
  }

  /** Connections open now (idle or busy). */
  get opened(): number {
    return this.#open.length
  }

  /** Requests waiting for a connection. */
  get waiting(): number {
    return this.#waiting.length
  }

  /**
   * Sends a request now on a free connection (a new one while fewer than the bound are open), or
   * queues it for the next connection released.
   * @throws ServegateError INTERNAL once closed or destroyed
   */
  send(request: WireRequest | PreparedRequest, handler: WireHandler): WireExchange {
    if (!this.#accepting) throw new ServegateError('INTERNAL', 'the connections are closed; no request can be sent on them')
    const exchange = new Exchange(handler, this.#releaseConn, this.#dropConn)
    this.#handOn({ request: 'bytes' in request ? request : this.prepare(request), exchange })
    return exchange
  }

  /**
   * The request's bytes as `send` writes them, built now: its head (with `host` and
   * `content-length`) and body in one buffer. A header with a line break is not refused here but
   * when the request is sent, as its failure.
   */
  prepare(request: WireRequest): PreparedRequest {
    let head = `${request.method} ${request.path} HTTP/1.1\r\nhost: ${this.#hostHeader}\r\n`
    for (const name in request.headers) {
      const value = request.headers[name] as string
      // A CR or LF would end the header early and let the rest be read as another one.
      if (/[\r\n]/.test(name) || /[\r\n]/.test(value)) {
        const error = new ServegateError(
          'CONFIG_INVALID',
          `header ${JSON.stringify(name)}: a value with a line break cannot be sent; remove it`,
        )
        return { bytes: Buffer.alloc(0), body: request.body, error }
      }
      head += `${name}: ${value}\r\n`
    }
    const body = request.body
    head += body === null ? '\r\n' : `content-length: ${body.length}\r\n\r\n`
    // One buffer, one write: on an idle connection the kernel takes it at once.
    const bytes = Buffer.allocUnsafe(Buffer.byteLength(head, 'latin1') + (body?.length ?? 0))
    const headBytes = bytes.write(head, 'latin1')
    body?.copy(bytes, headBytes)
    return { bytes, body, error: null }
  }

  /**
   * Opens connections until `count` are open (never past the bound), each answering a `GET path`
   * of its own, and keeps them idle for the requests to come, so that a measured phase connects
   * nothing. Best effort: a connection that fails is dropped, and a request opens a new one.
   */
  async warm(count: number, get: { path: string; headers?: Record<string, string>; timeoutMs: number }): Promise<void> {
    const fresh: Conn[] = []
    while (this.#accepting && this.#open.length < Math.min(count, this.#max)) fresh.push(this.#connect())
    const request = this.prepare({ method: 'GET', path: get.path, headers: get.headers ?? {}, body: null })
    await Promise.all(
      fresh.map(
        (conn) =>
          new Promise<void>((resolve) => {
            const done = (): void => {
              clearTimeout(timer)
              resolve()
            }
            const exchange = new Exchange(
              { onSent() {}, onHead() {}, onBody() {}, onEnd: done, onError: done },
              this.#releaseConn,
              this.#dropConn,
            )
            const timer = setTimeout(
              () => exchange.abort(new ConnectionError('WARM_TIMEOUT', `no reply to GET ${get.path} within ${get.timeoutMs} ms`)),
              get.timeoutMs,
            )
            this.#write(conn, exchange, request)
          }),
      ),
    )
  }

  /** Stops taking requests; those waiting still go out as connections free; resolves when every connection has closed. */
  async close(): Promise<void> {
    this.#accepting = false
    while (this.#waiting.length > 0) await new Promise<void>((resolve) => (this.#drained = resolve))
    await Promise.all(this.#open.filter((c) => c.exchange !== null).map((c) => new Promise<void>((resolve) => (c.onFree = resolve))))
    await this.#endAll(false)
  }

  /** Fails the requests still waiting and ends every connection at once, in flight or not. */
  async destroy(err: Error | null = null): Promise<void> {
    this.#accepting = false
    this.#destroyed = true
    const reason = err ?? new ServegateError('REQUEST_ABORTED', 'the connections were destroyed before this request could be sent')
    for (const q of this.#waiting.splice(0)) q.exchange.fail(reason, monoMs())
    this.#idle.length = 0
    await this.#endAll(true, err)
  }

  async #endAll(force: boolean, err: Error | null = null): Promise<void> {
    const conns = this.#open.splice(0)
    this.#idle.length = 0
    await Promise.all(
      conns.map(
        (conn) =>
          new Promise<void>((resolve) => {
            conn.dead = true
            if (conn.socket.destroyed) return resolve()
            conn.socket.once('close', () => resolve())
            if (force) {
              conn.exchange?.fail(err ?? new ConnectionError('CONNECTIONS_DESTROYED', 'the connection was destroyed'), monoMs())
              conn.socket.destroy()
            } else conn.socket.end()
          }),
      ),
    )
  }

  /** Hands a request to a free connection, or to the waiting line. */
  #handOn(q: Queued): void {
    if (q.exchange.finished) return
    let conn = this.#idle.pop()
    while (conn !== undefined && conn.dead) conn = this.#idle.pop()
    if (conn === undefined && this.#open.length < this.#max) conn = this.#connect()
    if (conn === undefined) {
      this.#waiting.push(q)
      return
    }
    this.#write(conn, q.exchange, q.request)
  }

  #checkDrained(): void {
    if (this.#waiting.length === 0 && this.#drained !== null) {
      this.#drained()
      this.#drained = null
    }
  }

  #connect(): Conn {
    const socket = this.#tls
      ? nodeTls().connect({
          host: this.#host,
          port: this.#port,
          ...(isIP(this.#host) === 0 ? { servername: this.#host } : {}),
          ALPNProtocols: ['http/1.1'],
          ...(this.#trust === null ? {} : { secureContext: this.#trust }),
        })
      : netConnect({
          host: this.#host,
          port: this.#port,
          // Plain TCP reads into one buffer the connections share, handed over before the
          // stream machinery: no Buffer and no 'data' event a read. TLS reads arrive as 'data'.
          onread: { buffer: this.#readBuffer, callback: (n: number, buffer: Uint8Array) => this.#onRead(conn, monoMs(), buffer, n) },
        })
    socket.setNoDelay(true)
    const conn: Conn = { socket, exchange: null, dead: false, onFree: null }
    this.#open.push(conn)
    if (this.#tls) socket.on('data', (bytes: Buffer) => this.#onRead(conn, monoMs(), bytes, bytes.length))
    const ended = (err: Error | null): void => {
      const at = monoMs()
      // The reads made before the end are parsed before it.
      flushStagedReads()
      const exchange = conn.exchange
      this.#drop(conn)
      exchange?.closed(at, err)
    }
    socket.on('end', () => ended(null))
    socket.on('error', (err) => ended(err))
    socket.on('close', () => ended(null))
    return conn
  }

  /**
   * One read of `conn`, its first `n` bytes of `buffer`, stamped `at` by the callback before it
   * allocates anything (an allocation can start a collection), and staged to be parsed after this
   * poll's other reads. `buffer` is valid only during the call (plain TCP reuses it for the next
   * read): the stage copies it.
   */
  #onRead(conn: Conn, at: number, buffer: Uint8Array, n: number): boolean {
    const exchange = conn.exchange
    if (exchange !== null) stageRead(exchange, buffer.subarray(0, n), at)
    else this.#drop(conn) // bytes nobody asked for: the connection is not to be trusted again
    noteStreamRead(at)
    return true
  }

  /** Writes the request on the connection, its bytes built ahead in one buffer, stamped once handed to the socket. */
  #write(conn: Conn, exchange: Exchange, request: PreparedRequest): void {
    if (exchange.finished) {
      this.#release(conn) // aborted while it waited: the connection goes to the next
      return
    }
    conn.exchange = exchange
    exchange.conn = conn
    if (request.error !== null) {
      exchange.fail(request.error, monoMs())
      return
    }
    const { bytes, body } = request
    const socket = conn.socket
    const put = (): void => {
      if (exchange.finished || conn.dead) return
      socket.write(bytes)
      exchange.handler.onSent(body, monoMs())
    }
    if (socket.connecting) socket.once('connect', put)
    else if (socket.destroyed || conn.dead) exchange.closed(monoMs(), new ConnectionError('SOCKET_CLOSED', 'other side closed'))
    else put()
  }

  /** The exchange on `conn` ended: a reusable connection goes to the next request or the idle ones; any other is dropped. */
  readonly #releaseConn = (conn: Conn, reusable: boolean): void => {
    conn.exchange = null
    conn.onFree?.()
    conn.onFree = null
    if (!reusable || conn.dead || this.#destroyed) {
      this.#drop(conn)
      return
    }
    this.#release(conn)
  }

  /** Hands the connection to the first waiting request, or keeps it idle. */
  #release(conn: Conn): void {
    if (this.#destroyed || conn.dead) return
    const next = this.#waiting.shift()
    if (next === undefined) this.#idle.push(conn)
    else this.#write(conn, next.exchange, next.request)
    this.#checkDrained()
  }

  readonly #dropConn = (conn: Conn): void => this.#drop(conn)

  /** Closes a connection for good and forgets it; a request waiting for a connection may now open one. */
  #drop(conn: Conn): void {
    if (conn.dead) return
    conn.dead = true
    if (!conn.socket.destroyed) conn.socket.destroy()
    const at = this.#open.indexOf(conn)
    if (at >= 0) this.#open.splice(at, 1)
    const idle = this.#idle.indexOf(conn)
    if (idle >= 0) this.#idle.splice(idle, 1)
    const next = this.#waiting.length > 0 && this.#open.length < this.#max && this.#accepting ? this.#waiting.shift() : undefined
    if (next !== undefined) this.#handOn(next)
    this.#checkDrained()
  }
}
