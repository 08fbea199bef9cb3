/**
 * A paced streaming server (child process): each `POST /v1/chat/completions` streams
 * `max_tokens` token chunks on an absolute schedule, chunk k due at t0 + k·interval where t0 is
 * when its response started. Each chunk carries `"t"`, its actual send time in ms on the
 * machine's monotonic clock (`process.hrtime`), so a client can tell its own error from the
 * server's lateness.
 *
 * It speaks HTTP/1.1 over `node:net` itself (keep-alive, `content-length` request bodies, chunked
 * responses), and records its lateness in a typed array: with `node:http` and an array of
 * numbers, the server, not the client, was the first to fall behind at a few hundred streams
 * (late p99 38–82 ms at C = 256 on one core of the development VM, 4–10 ms after this change).
 *
 * `--phases aligned` (the default) starts each stream when its request arrives, so streams
 * started together fall due together, as one decode step of a batching engine delivers them.
 * `--phases spread` starts stream i a fraction frac(i·0.618…) of an interval later (its first
 * token chunk included), which spreads any count of streams evenly over the interval: a scale
 * ladder then measures how many chunk arrivals a client takes, not how long one thread takes to
 * write a burst of thousands (about 5 µs a write: 10 ms for 2048, the whole interval).
 *
 * One timer loop serves every stream: it sleeps with `setTimeout` until shortly before the
 * earliest due chunk, then with `Atomics.wait` (sub-millisecond, frees the core) until just
 * before it, then spins on the clock and sends each chunk when it falls due.
 *
 * `GET /stats` says whether it kept that schedule since the last call: chunks sent and how late
 * (send time − due time) at p50, p99 and max, ms; `GET /stats?values=1` adds every chunk's
 * lateness in send order (`lateMs`), from which a client's own error at C = 1 follows: chunk k of a
 * stream went out `intervalMs + lateMs[k] − lateMs[k − 1]` after chunk k − 1.
 *
 * `--log FILE` keeps, per chat request, the sha256 of the request body bytes it received (what
 * followed the head, `content-length` of them: the bytes servegate's `wireSha256` digests) and
 * every token chunk's actual send time, the `"t"` it carried, in a typed array per stream (no I/O
 * per chunk). `GET /log` writes the requests logged since the last call to FILE as JSONL, one
 * `{"sha256", "bodyBytes", "tokens", "sendMs": […]}` a line, replacing the file, and answers
 * `{"requests", "chunks", "file"}`; call it between runs, when no stream is in flight. What is
 * left is written when the server stops. One process only.
 *
 * `--processes N` serves from N processes (`node:cluster`, one shared port, connections handed
 * round-robin): one process, one timer loop, keeps its schedule up to a few tens of thousands of
 * chunks a second (late at C = 512 × 10 ms on one core of the development VM), and a C = 2048
 * ladder rung asks 204,800. `GET /stats` then merges every process's lateness. The first line
 * is `listening <port> <pid>,<pid>…`, the workers' pids, so a bench can pin each.
 *
 * Usage: `node benchmarks/servers/paced.ts [--port 0] [--interval-ms 10] [--phases aligned|spread] [--processes 1] [--log FILE]`
 */
import cluster, { type Worker } from 'node:cluster'
import { createHash } from 'node:crypto'
import { renameSync, writeFileSync } from 'node:fs'
import { createServer, type Socket } from 'node:net'
import { parseArgs } from 'node:util'
import { intFlag } from '../../src/cli/flags.ts'
import { monoMs } from '../../src/client/clock.ts'
import { chunkHead, DONE_EVENT, roleEvent, tokenEvent, usageEvent } from '../chunks.ts'
import { httpChunk as chunk, readRequests, respond } from './http1-requests.ts'
import { maxTokensOf, MODELS_BODY, serveUntilStopped, stopWith } from './serve.ts'

const { values } = parseArgs({
  options: {
    port: { type: 'string', default: '0' },
    'interval-ms': { type: 'string', default: '10' },
    phases: { type: 'string', default: 'aligned' },
    processes: { type: 'string', default: '1' },
    log: { type: 'string' },
  },
})
const processes = intFlag('--processes', values.processes, 1) ?? 1
const logFile = values.log ?? null
if (logFile !== null && processes > 1) throw new Error('--log: only with --processes 1 (one process, one log)')
const intervalMs = Number(values['interval-ms'])
if (values.phases !== 'aligned' && values.phases !== 'spread') throw new Error(`--phases: use aligned or spread, got ${values.phases}`)
const spread = values.phases === 'spread'
/** The golden ratio's fraction: stream i starts at frac(i·GOLDEN) of an interval, which spreads any count of streams evenly. */
const GOLDEN = (Math.sqrt(5) - 1) / 2
const PROMPT_TOKENS = 32
const DEFAULT_TOKENS = 200
/**
 * How long before a due chunk the loop stops sleeping on a timer, ms. Node timers have
 * whole-millisecond granularity and fire up to ~1 ms late, hence more than 1 ms.
 */
const TIMER_MARGIN_MS = 2
/**
 * How long before a due chunk `Atomics.wait` hands over to the spin, ms. A wake-up from a
 * sleep is late by the timer slack (50 µs) and, on a busy or virtual machine, now and then by
 * a millisecond; the spin covers that. Not longer: a spinning server takes a core the client
 * may need.
 */
const SPIN_MS = 1
const blocker = new Int32Array(new SharedArrayBuffer(4))

/** One request of `--log FILE`: what it sent and when each token chunk went out. */
interface LoggedRequest {
  /** sha256 of the request body bytes as received, hex. */
  sha256: string
  bodyBytes: number
  /** Each token chunk's send time (its `"t"`), ms on the monotonic clock; the first `sent` are set. */
  sendMs: Float64Array
  sent: number
}

interface PacedStream {
  socket: Socket
  head: string
  t0: number
  next: number
  tokens: number
  dueMs: number
  log: LoggedRequest | null
}

/** `--log FILE`: the requests since the last `GET /log`; null without `--log`. */
let sendLog: LoggedRequest[] | null = logFile === null ? null : []

/** Open streams, a binary min-heap on `dueMs`: `heap[0]` is due first. */
let heap: PacedStream[] = []
let timer: NodeJS.Timeout | null = null
let immediate: NodeJS.Immediate | null = null
let timerDueMs = Infinity
let served = 0
/**
 * How late each chunk went out (send time − due time, ms) since the last `GET /stats`: the
 * first `lateCount` entries, in a typed array that doubles when full (no heap number per chunk,
 * no growing array of them for the garbage collector to copy while streams wait).
 */
let lateness = new Float64Array(1 << 16)
let lateCount = 0

function push(s: PacedStream): void {
  let i = heap.push(s) - 1
  while (i > 0) {
    const parent = (i - 1) >> 1
    const p = heap[parent] as PacedStream
    if (p.dueMs <= s.dueMs) break
    heap[i] = p
    i = parent
  }
  heap[i] = s
}

function pop(): PacedStream | undefined {
  const top = heap[0]
  const last = heap.pop()
  if (top === undefined || last === undefined || heap.length === 0) return top
  let i = 0
  for (;;) {
    const left = 2 * i + 1
    if (left >= heap.length) break
    const right = left + 1
    const child = right < heap.length && (heap[right] as PacedStream).dueMs < (heap[left] as PacedStream).dueMs ? right : left
    if ((heap[child] as PacedStream).dueMs >= last.dueMs) break
    heap[i] = heap[child] as PacedStream
    i = child
  }
  heap[i] = last
  return top
}

/** Sends stream `s`'s next chunk, stamped `at`; true when it was the last. */
function send(s: PacedStream, at: number): boolean {
  const k = s.next
  const last = k === s.tokens - 1
  if (lateCount === lateness.length) {
    const grown = new Float64Array(2 * lateness.length)
    grown.set(lateness)
    lateness = grown
  }
  lateness[lateCount++] = at - s.dueMs
  if (s.log !== null) s.log.sendMs[s.log.sent++] = at
  let text = tokenEvent(s.head, k, last ? 'length' : null, at)
  if (last) text += usageEvent(s.head, PROMPT_TOKENS, s.tokens) + DONE_EVENT
  s.socket.write(last ? `${chunk(text)}0\r\n\r\n` : chunk(text))
  s.next++
  s.dueMs = s.t0 + s.next * intervalMs
  return last
}

/** Wakes the loop in time for the earliest due chunk. */
function schedule(): void {
  const head = heap[0]
  if (head === undefined || immediate !== null) return
  const due = head.dueMs
  const sleepMs = due - TIMER_MARGIN_MS - monoMs()
  if (sleepMs < 1) {
    if (timer !== null) clearTimeout(timer)
    timer = null
    timerDueMs = Infinity
    immediate = setImmediate(tick)
    return
  }
  if (timer !== null && timerDueMs <= due) return
  if (timer !== null) clearTimeout(timer)
  timerDueMs = due
  timer = setTimeout(tick, Math.floor(sleepMs))
}

/** Waits for the earliest due chunk, sends every chunk due by then, and yields to I/O. */
function tick(): void {
  timer = null
  immediate = null
  timerDueMs = Infinity
  const head = heap[0]
  if (head === undefined) return
  const due = head.dueMs
  // Within reach of the wait: `schedule` uses a timer only for sleeps of 1 ms or more.
  if (due - monoMs() < TIMER_MARGIN_MS + 1) {
    const waitMs = due - SPIN_MS - monoMs()
    if (waitMs > 0) Atomics.wait(blocker, 0, 0, waitMs)
    let now = monoMs()
    while (now < due) now = monoMs()
    // Only what was due when the loop woke: a server that fell a whole interval behind sends
    // each stream's next chunk on the next turn, after the sockets have been read.
    const batch: PacedStream[] = []
    while (heap.length > 0 && (heap[0] as PacedStream).dueMs <= now) batch.push(pop() as PacedStream)
    for (const s of batch) if (!s.socket.destroyed && !send(s, monoMs())) push(s)
  }
  schedule()
}

/** Compiles the chunk renderer before the first stream, so the first chunks are not late. */
function warmRenderer(): number {
  let bytes = 0
  const head = chunkHead(0)
  for (let k = 0; k < 20_000; k++) bytes += chunk(tokenEvent(head, k, null, monoMs())).length
  return bytes
}
if (!(processes > 1 && cluster.isPrimary)) warmRenderer()

/** This process's lateness since the last call, a copy; resets it. */
function takeLateness(): Float64Array {
  const taken = lateness.slice(0, lateCount)
  lateCount = 0
  return taken
}

/**
 * The `GET /stats` body for these lateness values: chunks sent, lateness percentiles, ms; with
 * `withValues`, every value too, in the order the chunks went out (`lateMs`).
 */
function statsBody(values: Float64Array, withValues = false): string {
  const lateMs = withValues ? Array.from(values) : undefined
  const sorted = values.sort()
  const at = (q: number): number | null =>
    sorted.length === 0 ? null : (sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] as number)
  return JSON.stringify({ chunks: sorted.length, lateP50Ms: at(0.5), lateP99Ms: at(0.99), lateMaxMs: at(1), lateMs })
}

/** Messages between the processes of `--processes N`. */
type Message =
  | { kind: 'stats'; id: number }
  | { kind: 'collect'; round: number }
  | { kind: 'lateness'; round: number; values: Float64Array }
  | { kind: 'stats-body'; id: number; body: string }
  | { kind: 'listening'; port: number }

/** `/stats` requests a worker has passed to the primary, by id: each waits for the merged body. */
const statsWaiting = new Map<number, Socket>()
let statsIds = 0

/**
 * `GET /stats`: whether the server kept its schedule since the last call, every process's chunks
 * merged; resets. `GET /stats?values=1` adds each chunk's lateness in send order (one process
 * only: across processes there is no one order).
 */
function stats(socket: Socket, withValues: boolean): void {
  if (!cluster.isWorker) return respond(socket, '200 OK', 'application/json', statsBody(takeLateness(), withValues))
  if (withValues) return respond(socket, '400 Bad Request', 'text/plain', '/stats?values=1: only with --processes 1')
  const id = statsIds++
  statsWaiting.set(id, socket)
  process.send?.({ kind: 'stats', id } satisfies Message)
}

/**
 * When stream `index` starts, ms: now, or with `--phases spread` a fraction of an interval later
 * (the golden-ratio sequence), so that streams started together do not fall due together.
 */
function startMs(index: number): number {
  return spread ? monoMs() + ((index * GOLDEN) % 1) * intervalMs : monoMs()
}

function startStream(socket: Socket, tokens: number, body: Buffer): void {
  const index = served++
  const head = chunkHead(index)
  let log: LoggedRequest | null = null
  if (sendLog !== null) {
    log = { sha256: createHash('sha256').update(body).digest('hex'), bodyBytes: body.length, sendMs: new Float64Array(tokens), sent: 0 }
    sendLog.push(log)
  }
  const t0 = startMs(index)
  socket.write(
    'HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\ntransfer-encoding: chunked\r\n\r\n' +
      chunk(roleEvent(head)),
  )
  const stream: PacedStream = { socket, head, t0, next: 0, tokens, dueMs: t0, log }
  // Aligned, the first chunk is due now: sent at once; spread, it waits for its phase.
  if (t0 > monoMs() || !send(stream, monoMs())) push(stream)
  schedule()
}

/** Answers one request. */
function answer(socket: Socket, method: string, path: string, body: Buffer): void {
  if (method === 'GET' && path === '/v1/models') respond(socket, '200 OK', 'application/json', MODELS_BODY)
  else if (method === 'GET' && (path === '/stats' || path === '/stats?values=1')) stats(socket, path !== '/stats')
  else if (method === 'POST' && path === '/v1/chat/completions') startStream(socket, maxTokensOf(body, DEFAULT_TOKENS), body)
  else if (method === 'GET' && path === '/log') writeLog(socket)
  else respond(socket, '404 Not Found', 'text/plain', 'not found')
}

/** Reads requests off one connection and answers each. */
function onConnection(socket: Socket): void {
  readRequests(socket, answer)
}

/**
 * Writes the requests logged since the last call to `--log FILE` (JSONL, replacing it: a temporary
 * file renamed over it) and starts a new log; null without `--log`.
 */
function flushLog(): { requests: number; chunks: number; file: string } | null {
  if (sendLog === null || logFile === null) return null
  const taken = sendLog
  sendLog = []
  let chunks = 0
  const lines = taken.map((r) => {
    chunks += r.sent
    const sendMs = Array.from(r.sendMs.subarray(0, r.sent))
    return `${JSON.stringify({ sha256: r.sha256, bodyBytes: r.bodyBytes, tokens: r.sendMs.length, sendMs })}\n`
  })
  const temporary = `${logFile}.${process.pid}.tmp`
  writeFileSync(temporary, lines.join(''))
  renameSync(temporary, logFile)
  return { requests: taken.length, chunks, file: logFile }
}

/** `GET /log`: writes the log since the last call (see `flushLog`) and says how much. */
function writeLog(socket: Socket): void {
  const written = flushLog()
  if (written === null) respond(socket, '400 Bad Request', 'text/plain', '/log: start the server with --log FILE')
  else respond(socket, '200 OK', 'application/json', JSON.stringify(written))
}

const stopLoop = (): void => {
  if (timer !== null) clearTimeout(timer)
  if (immediate !== null) clearImmediate(immediate)
  heap = []
  flushLog()
}

/**
 * The primary of `--processes N`: forks the workers, prints `listening <port> <pids>` once every
 * one listens, merges their lateness for `/stats`, and stops them when it is stopped. A worker
 * that dies stops the whole server: a bench must not read a schedule half the streams missed.
 */
function runPrimary(count: number): void {
  cluster.setupPrimary({ serialization: 'advanced' })
  const workers: Worker[] = []
  let listening = 0
  let round = 0
  /** Per collect round: the values so far, how many replied, and who asked. */
  const rounds = new Map<number, { parts: Float64Array[]; asker: Worker; id: number }>()
  let stopping = false
  const stop = (): void => {
    stopping = true
    for (const w of workers) w.kill()
  }
  for (let i = 0; i < count; i++) {
    const worker = cluster.fork()
    workers.push(worker)
    worker.on('exit', (code) => {
      if (stopping) return
      process.stderr.write(`paced server: worker ${worker.process.pid} exited (${code}); stopping\n`)
      stop()
      process.exit(1)
    })
    worker.on('message', (m: Message) => {
      if (m.kind === 'listening' && ++listening === count) {
        process.stdout.write(`listening ${m.port} ${workers.map((w) => w.process.pid).join(',')}\n`)
      } else if (m.kind === 'stats') {
        const r = round++
        rounds.set(r, { parts: [], asker: worker, id: m.id })
        for (const w of workers) w.send({ kind: 'collect', round: r } satisfies Message)
      } else if (m.kind === 'lateness') {
        const pending = rounds.get(m.round)
        if (pending === undefined) return
        pending.parts.push(m.values)
        if (pending.parts.length < count) return
        rounds.delete(m.round)
        const merged = new Float64Array(pending.parts.reduce((n, p) => n + p.length, 0))
        let at = 0
        for (const part of pending.parts) {
          merged.set(part, at)
          at += part.length
        }
        pending.asker.send({ kind: 'stats-body', id: pending.id, body: statsBody(merged) } satisfies Message)
      }
    })
  }
  stopWith(stop)
}

/** A worker of `--processes N`: serves on the shared port; exits when the primary goes. */
function runWorker(server: ReturnType<typeof createServer>): void {
  process.on('message', (m: Message) => {
    if (m.kind === 'collect') process.send?.({ kind: 'lateness', round: m.round, values: takeLateness() } satisfies Message)
    else if (m.kind === 'stats-body') {
      const socket = statsWaiting.get(m.id)
      statsWaiting.delete(m.id)
      if (socket !== undefined && !socket.destroyed) respond(socket, '200 OK', 'application/json', m.body)
    }
  })
  server.on('connection', (socket: Socket) => socket.setNoDelay(true))
  process.on('disconnect', () => {
    stopLoop()
    process.exit(0)
  })
  server.listen(Number(values.port), '127.0.0.1', () => {
    const address = server.address()
    process.send?.({ kind: 'listening', port: typeof address === 'object' && address !== null ? address.port : -1 } satisfies Message)
  })
}

if (processes > 1 && cluster.isPrimary) runPrimary(processes)
else if (cluster.isWorker) runWorker(createServer(onConnection))
else serveUntilStopped(createServer(onConnection), Number(values.port), stopLoop)
