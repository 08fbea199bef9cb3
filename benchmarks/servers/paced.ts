/**
 * A paced streaming server (child process): each `POST /v1/chat/completions` streams
 * `max_tokens` token chunks on an absolute schedule, chunk k due at t0 + k·interval where t0 is
 * when its response started. Each chunk carries `"t"`, its actual send time in ms on the
 * machine's monotonic clock (`process.hrtime`), so a client can tell its own error from the
 * server's lateness.
 *
 * One timer loop serves every stream: it sleeps with `setTimeout` until shortly before the
 * earliest due chunk, then with `Atomics.wait` (sub-millisecond, frees the core) until just
 * before it, then spins on the clock and sends each chunk when it falls due.
 *
 * `GET /stats` says whether it kept that schedule since the last call: chunks sent and how late
 * (send time − due time) at p50, p99 and max, ms.
 *
 * Usage: `node benchmarks/servers/paced.ts [--port 0] [--interval-ms 10]`
 */
import { createServer, type ServerResponse } from 'node:http'
import { parseArgs } from 'node:util'
import { monoMs } from '../../src/client/clock.ts'
import { chunkHead, DONE_EVENT, roleEvent, tokenEvent, usageEvent } from '../chunks.ts'
import { answerModels, requestedTokens, serveUntilStopped } from './serve.ts'

const { values } = parseArgs({
  options: {
    port: { type: 'string', default: '0' },
    'interval-ms': { type: 'string', default: '10' },
  },
})
const intervalMs = Number(values['interval-ms'])
const PROMPT_TOKENS = 32
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

interface PacedStream {
  res: ServerResponse
  head: string
  t0: number
  next: number
  tokens: number
  dueMs: number
}

/** Monotonic ms as `process.hrtime` counts them (the client's own clock), allocating nothing (the spin loop reads it often). */
const nowMs = monoMs

/** Open streams in start order, which is also due order (one interval for all). */
let streams: PacedStream[] = []
let timer: NodeJS.Timeout | null = null
let immediate: NodeJS.Immediate | null = null
let timerDueMs = Infinity
let served = 0
/** How late each chunk went out (send time − due time, ms) since the last `GET /stats`. */
let lateness: number[] = []

function earliestDue(): number {
  let due = Infinity
  for (const s of streams) if (s.dueMs < due) due = s.dueMs
  return due
}

/** Wakes the loop in time for the earliest due chunk. */
function schedule(): void {
  const due = earliestDue()
  if (due === Infinity || immediate !== null) return
  const sleepMs = due - TIMER_MARGIN_MS - nowMs()
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

function send(s: PacedStream, at: number): void {
  const k = s.next
  const last = k === s.tokens - 1
  lateness.push(at - s.dueMs)
  let text = tokenEvent(s.head, k, last ? 'length' : null, at)
  if (last) text += usageEvent(s.head, PROMPT_TOKENS, s.tokens) + DONE_EVENT
  s.res.write(text)
  s.next++
  s.dueMs = s.t0 + s.next * intervalMs
  if (last) s.res.end()
}

/** Waits for the earliest due chunk, sends every chunk due by then, and yields to I/O. */
function tick(): void {
  timer = null
  immediate = null
  timerDueMs = Infinity
  const due = earliestDue()
  if (due === Infinity) return
  // Within reach of the wait: `schedule` uses a timer only for sleeps of 1 ms or more.
  if (due - nowMs() < TIMER_MARGIN_MS + 1) {
    const waitMs = due - SPIN_MS - nowMs()
    if (waitMs > 0) Atomics.wait(blocker, 0, 0, waitMs)
    let now = nowMs()
    while (now < due) now = nowMs()
    let finished = false
    for (const s of streams) {
      if (s.dueMs <= now && !s.res.destroyed) {
        send(s, nowMs())
        if (s.next === s.tokens) finished = true
      }
    }
    if (finished) streams = streams.filter((s) => s.next < s.tokens && !s.res.destroyed)
  }
  schedule()
}

/** Compiles the chunk renderer before the first stream, so the first chunks are not late. */
function warmRenderer(): number {
  let bytes = 0
  const head = chunkHead(0)
  for (let k = 0; k < 20_000; k++) bytes += tokenEvent(head, k, null, nowMs()).length
  return bytes
}
warmRenderer()

/** `GET /stats`: whether the server kept its schedule since the last call (chunks sent, lateness percentiles, ms); resets. */
function stats(): string {
  const sorted = lateness.sort((a, b) => a - b)
  const at = (q: number): number | null =>
    sorted.length === 0 ? null : (sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] as number)
  lateness = []
  return JSON.stringify({ chunks: sorted.length, lateP50Ms: at(0.5), lateP99Ms: at(0.99), lateMaxMs: at(1) })
}

const server = createServer((req, res) => {
  if (answerModels(req, res)) return
  if (req.method === 'GET' && req.url === '/stats') {
    res.writeHead(200, { 'content-type': 'application/json' }).end(stats())
    return
  }
  if (req.method !== 'POST' || req.url !== '/v1/chat/completions') {
    res.writeHead(404).end()
    return
  }
  requestedTokens(req, 200)
    .then((tokens) => {
      const head = chunkHead(served++)
      const t0 = nowMs()
      res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' })
      res.write(roleEvent(head))
      const stream: PacedStream = { res, head, t0, next: 0, tokens, dueMs: t0 }
      streams.push(stream)
      res.on('close', () => {
        if (stream.next < stream.tokens) streams = streams.filter((s) => s !== stream)
      })
      schedule()
    })
    .catch(() => res.destroy())
})

serveUntilStopped(server, Number(values.port), () => {
  if (timer !== null) clearTimeout(timer)
  if (immediate !== null) clearImmediate(immediate)
  streams = []
})
