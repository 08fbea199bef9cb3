import { hostname } from 'node:os'
import { connect, createServer, type Server, type Socket } from 'node:net'
import { ServegateError } from '../errors.ts'
import { parseRunText } from '../record/record-io.ts'
import type { ShardResult } from '../runner/shard-merge.ts'
import type { ShardStreams } from '../runner/shard-split.ts'
import { ShardFigures } from '../schema/shards.ts'

/**
 * The shards' link to their coordinator (`servegate run --shards N`): one TCP connection per
 * shard, one JSON message a line. A shard says hello, times K pings (NTP's four timestamps),
 * waits at the barrier, is told the start in the coordinator's clock, and after its cell sends
 * its shard record. A shard whose connection closes before its record failed.
 */
type Message =
  | { type: 'hello'; index: number; host: string }
  | { type: 'ping'; t0: number }
  | { type: 'pong'; t0: number; t1: number; t2: number; /** When the shard read it (set on arrival). */ t3?: number }
  | { type: 'ready'; clockOffsetMs: number; clockOffsetUncertaintyMs: number }
  | { type: 'start'; atMs: number }
  | { type: 'result'; figures: ShardFigures; streams: ShardStreams; record: string }
  | { type: 'failed'; message: string }
  | { type: 'done' }
  | { type: 'refused'; message: string }

/**
 * Now in ms on `process.hrtime`'s monotonic scale, the client's own (`monoMs`): a start converted
 * into it is where the shard's cell counts its send offsets from.
 */
function monoMs(): number {
  return Number(process.hrtime.bigint()) / 1e6
}

/** Pings a shard times against the coordinator's clock; the one of least round trip gives the offset. */
const CLOCK_PINGS = 16

/**
 * Lead of the start over the moment the last shard is ready, ms: time for the start message to
 * reach every shard (twice the slowest ping round trip is added) and for each to arm its timers.
 */
const START_LEAD_MS = 250

/** How long the coordinator waits for every shard to join and be ready, ms. */
const BARRIER_TIMEOUT_MS = 15 * 60_000

/** How long a shard keeps trying to reach a coordinator not listening yet (a pod still starting), ms. */
const CONNECT_RETRY_MS = 5 * 60_000

/** Splits a socket's bytes into JSON lines and hands each message over, stamped with when its read arrived. */
function onLines(socket: Socket, handle: (message: Message, readAt: number) => void): void {
  let pending = ''
  socket.setEncoding('utf8')
  socket.on('data', (text: string) => {
    const readAt = monoMs()
    pending += text
    let newline = pending.indexOf('\n')
    while (newline >= 0) {
      const line = pending.slice(0, newline)
      pending = pending.slice(newline + 1)
      newline = pending.indexOf('\n')
      if (line === '') continue
      let message: Message
      try {
        message = JSON.parse(line) as Message
      } catch {
        // Not a shard (on Kubernetes anything in the cluster can reach the port): dropped.
        socket.destroy()
        return
      }
      handle(message, readAt)
    }
  })
}

function send(socket: Socket, message: Message): void {
  socket.write(`${JSON.stringify(message)}\n`)
}

/** A clock offset as NTP takes it from the ping of least round trip: coordinator minus shard, and half that round trip. */
export function clockOffset(pongs: ReadonlyArray<{ t0: number; t1: number; t2: number; t3: number }>): {
  clockOffsetMs: number
  clockOffsetUncertaintyMs: number
} {
  let best = pongs[0]
  for (const p of pongs) if (best === undefined || p.t3 - p.t0 - (p.t2 - p.t1) < best.t3 - best.t0 - (best.t2 - best.t1)) best = p
  if (best === undefined) throw new ServegateError('INTERNAL', 'no ping came back from the coordinator')
  return {
    clockOffsetMs: (best.t1 - best.t0 + (best.t2 - best.t3)) / 2,
    clockOffsetUncertaintyMs: Math.max(0, (best.t3 - best.t0 - (best.t2 - best.t1)) / 2),
  }
}

/**
 * The coordinator: listens for N shards, holds them at the barrier until every one is ready,
 * tells them one start (its own monotonic ms plus a lead), and collects their records.
 */
export class ShardCoordinator {
  readonly count: number
  readonly #server: Server
  readonly #sockets = new Map<number, Socket>()
  readonly #ready = new Map<number, number>()
  readonly #results = new Map<number, ShardResult>()
  readonly #all: Promise<ShardResult[]>
  #resolve: (results: ShardResult[]) => void = () => {}
  #reject: (error: Error) => void = () => {}
  #settled = false
  readonly #barrierTimer: NodeJS.Timeout

  private constructor(count: number, server: Server) {
    this.count = count
    this.#server = server
    this.#all = new Promise((resolve, reject) => {
      this.#resolve = resolve
      this.#reject = reject
    })
    // Read once it settles, so a failure before anyone awaits it is not an unhandled rejection.
    this.#all.catch(() => {})
    this.#barrierTimer = setTimeout(
      () => this.#fail(`only ${this.#ready.size} of ${this.count} shards were ready after ${BARRIER_TIMEOUT_MS / 60_000} min`),
      BARRIER_TIMEOUT_MS,
    )
    server.on('connection', (socket) => this.#accept(socket))
  }

  /** Listens on `host:port` (port 0: any free one). */
  static async listen(count: number, host: string, port: number): Promise<ShardCoordinator> {
    const server = createServer({ noDelay: true })
    await new Promise<void>((resolve, reject) => {
      server.once('error', (error) =>
        reject(
          new ServegateError('CONFIG_INVALID', `--coordinator: cannot listen on ${host}:${port} (${error.message})`, { cause: error }),
        ),
      )
      server.listen(port, host, () => resolve())
    })
    return new ShardCoordinator(count, server)
  }

  /** The port it listens on. */
  get port(): number {
    const address = this.#server.address()
    return typeof address === 'object' && address !== null ? address.port : 0
  }

  /** Every shard's result, in shard order, once all came; rejects naming the first shard that failed. */
  results(): Promise<ShardResult[]> {
    return this.#all
  }

  /** Fails the run from outside (a shard process that exited, a signal). */
  abort(message: string): void {
    this.#fail(message)
  }

  /** Stops listening and drops every connection. */
  async close(): Promise<void> {
    clearTimeout(this.#barrierTimer)
    for (const socket of this.#sockets.values()) socket.destroy()
    await new Promise<void>((resolve) => this.#server.close(() => resolve()))
  }

  #fail(message: string): void {
    if (this.#settled) return
    this.#settled = true
    clearTimeout(this.#barrierTimer)
    for (const socket of this.#sockets.values()) socket.destroy()
    this.#reject(new ServegateError('INTERNAL', `--shards: ${message}`))
  }

  #accept(socket: Socket): void {
    socket.setNoDelay(true)
    let index: number | null = null
    socket.on('error', () => {})
    socket.on('close', () => {
      if (index !== null && !this.#results.has(index)) this.#fail(`shard ${index} disconnected before it sent its record`)
    })
    onLines(socket, (message, readAt) => {
      if (message.type === 'hello') {
        if (!Number.isInteger(message.index) || message.index < 0 || message.index >= this.count || this.#sockets.has(message.index)) {
          send(socket, { type: 'refused', message: `shard index ${message.index} is not one of 0…${this.count - 1} not yet joined` })
          socket.end()
          return
        }
        index = message.index
        this.#sockets.set(index, socket)
      } else if (message.type === 'ping') {
        send(socket, { type: 'pong', t0: message.t0, t1: readAt, t2: monoMs() })
      } else if (message.type === 'ready' && index !== null) {
        this.#ready.set(index, message.clockOffsetUncertaintyMs)
        if (this.#ready.size === this.count) this.#start()
      } else if (message.type === 'result' && index !== null) {
        this.#result(index, message)
        send(socket, { type: 'done' })
      } else if (message.type === 'failed') {
        this.#fail(`shard ${index ?? '?'} failed: ${message.message}`)
      }
    })
  }

  #start(): void {
    clearTimeout(this.#barrierTimer)
    const slowest = Math.max(...this.#ready.values())
    const atMs = monoMs() + START_LEAD_MS + 4 * slowest
    for (const socket of this.#sockets.values()) send(socket, { type: 'start', atMs })
  }

  #result(index: number, message: Extract<Message, { type: 'result' }>): void {
    try {
      const record = parseRunText(message.record, `shard ${index}'s record`)
      this.#results.set(index, { figures: ShardFigures.parse(message.figures), record, streams: message.streams })
    } catch (error) {
      this.#fail(`shard ${index} sent a record that does not read: ${(error as Error).message}`)
      return
    }
    if (this.#results.size === this.count && !this.#settled) {
      this.#settled = true
      this.#resolve([...this.#results.values()].sort((a, b) => a.figures.index - b.figures.index))
    }
  }
}

/** Resolves with the next message of `type` (or rejects on `refused` or the connection's end). */
class Inbox {
  readonly #queue: Message[] = []
  #waiting: { type: Message['type']; resolve: (m: Message) => void; reject: (e: Error) => void } | null = null
  #closed: Error | null = null

  constructor(socket: Socket, where: string) {
    onLines(socket, (message, readAt) => {
      if (message.type === 'pong') message.t3 = readAt
      this.#queue.push(message)
      this.#deliver()
    })
    socket.on('close', () => {
      this.#closed = new ServegateError('CONNECT_FAILED', `--coordinator ${where} closed the connection`)
      this.#deliver()
    })
  }

  next<T extends Message['type']>(type: T): Promise<Extract<Message, { type: T }>> {
    return new Promise((resolve, reject) => {
      this.#waiting = { type, resolve: resolve as (m: Message) => void, reject }
      this.#deliver()
    })
  }

  #deliver(): void {
    const waiting = this.#waiting
    if (waiting === null) return
    const refused = this.#queue.find((m) => m.type === 'refused')
    if (refused !== undefined) {
      this.#waiting = null
      waiting.reject(
        new ServegateError('CONFIG_INVALID', `--shard-index: the coordinator refused it: ${(refused as { message: string }).message}`),
      )
      return
    }
    const at = this.#queue.findIndex((m) => m.type === waiting.type)
    if (at >= 0) {
      this.#waiting = null
      waiting.resolve(this.#queue.splice(at, 1)[0] as Message)
    } else if (this.#closed !== null) {
      this.#waiting = null
      waiting.reject(this.#closed)
    }
  }
}

/** A shard's side of the link: its clock against the coordinator's, the barrier, its record. */
export class ShardMember {
  readonly index: number
  readonly host = hostname()
  readonly #socket: Socket
  readonly #inbox: Inbox
  /** Set at the barrier. */
  clock = { clockOffsetMs: 0, clockOffsetUncertaintyMs: 0 }

  private constructor(index: number, socket: Socket, where: string) {
    this.index = index
    this.#socket = socket
    this.#inbox = new Inbox(socket, where)
    send(socket, { type: 'hello', index, host: this.host })
  }

  /**
   * Connects to the coordinator at `host:port`, retrying while it is not listening yet (on
   * Kubernetes pod 0 may start after the others) for up to five minutes.
   */
  static async join(index: number, host: string, port: number, signal?: AbortSignal): Promise<ShardMember> {
    const deadline = monoMs() + CONNECT_RETRY_MS
    for (;;) {
      try {
        const socket = await new Promise<Socket>((resolve, reject) => {
          const s = connect({ host, port, noDelay: true }, () => resolve(s))
          s.once('error', reject)
        })
        socket.on('error', () => {})
        return new ShardMember(index, socket, `${host}:${port}`)
      } catch (error) {
        if (monoMs() > deadline || signal?.aborted === true)
          throw new ServegateError('CONNECT_FAILED', `--coordinator ${host}:${port}: cannot connect (${(error as Error).message})`, {
            cause: error,
          })
        await new Promise((resolve) => setTimeout(resolve, 250))
      }
    }
  }

  /** Times the pings, says it is ready, and resolves with the shared start as this process's monotonic ms. */
  async barrier(): Promise<number> {
    const pongs: Array<{ t0: number; t1: number; t2: number; t3: number }> = []
    for (let i = 0; i < CLOCK_PINGS; i++) {
      send(this.#socket, { type: 'ping', t0: monoMs() })
      const { t0, t1, t2, t3 } = await this.#inbox.next('pong')
      pongs.push({ t0, t1, t2, t3: t3 ?? monoMs() })
    }
    this.clock = clockOffset(pongs)
    send(this.#socket, { type: 'ready', ...this.clock })
    const { atMs } = await this.#inbox.next('start')
    return atMs - this.clock.clockOffsetMs
  }

  /** Sends the shard's record and figures; resolves once the coordinator has them. */
  async hand(figures: ShardFigures, streams: ShardStreams, record: string): Promise<void> {
    send(this.#socket, { type: 'result', figures, streams, record })
    await this.#inbox.next('done')
  }

  /** Tells the coordinator this shard failed (it stops the run), then closes. */
  fail(message: string): void {
    send(this.#socket, { type: 'failed', message })
    this.#socket.end()
  }

  close(): void {
    this.#socket.end()
  }
}
