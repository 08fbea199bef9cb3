import { createServer, type Server, type Socket } from 'node:net'
import type { AddressInfo } from 'node:net'
import { Worker } from 'node:worker_threads'
import { afterEach, describe, expect, test } from 'vitest'
import { StreamConnections } from './connections.ts'
import {
  addPauses,
  batchingAfter,
  ENTER_UTILIZATION,
  EXIT_UTILIZATION,
  PAUSE_MS,
  ReadBatcher,
  type ReadBatcherHost,
  ReadBatchingMeter,
} from './read-batching.ts'
import { streamCompletion } from './stream.ts'

const TOKEN_EVENT = 'data: {"choices":[{"index":0,"delta":{"content":" a"},"finish_reason":null}]}\n\n'
const END_EVENTS =
  'data: {"choices":[{"index":0,"delta":{},"finish_reason":"length"}],"usage":{"prompt_tokens":1,"completion_tokens":TOKENS}}\n\ndata: [DONE]\n\n'
const HEAD = 'HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n'

function httpChunk(text: string): string {
  return `${Buffer.byteLength(text).toString(16)}\r\n${text}\r\n`
}

let server: Server | null = null
const workers: Worker[] = []
afterEach(async () => {
  await new Promise((resolve) => (server === null ? resolve(null) : server.close(resolve)))
  server = null
  await Promise.all(workers.splice(0).map((w) => w.terminate()))
})

/** A clock, an idle counter and a sleep that the test moves by hand. */
class FakeHost implements ReadBatcherHost {
  at = 0
  idle = 0
  readonly sleeps: number[] = []
  #pending: (() => void) | null = null
  now = (): number => this.at
  loopIdleMs = (): number => this.idle
  sleep = (ms: number): void => {
    this.sleeps.push(ms)
    this.at += ms
  }
  afterReads = (callback: () => void): void => {
    this.#pending = callback
  }

  /** `count` turns, each a read, `workMs` of work and its check, after `idleMs` of waiting. */
  turns(batcher: ReadBatcher, workMs: number, idleMs: number, count: number): void {
    for (let i = 0; i < count; i++) {
      this.at += idleMs
      this.idle += idleMs
      batcher.noteRead(this.at)
      this.at += workMs
      const check = this.#pending
      this.#pending = null
      check?.()
    }
  }
}

/**
 * A server that answers every POST with `tokens` token events, one HTTP chunk and one socket write
 * each, as an engine flushing every token does: `everyMs` apart, or back to back (0).
 */
async function serveTokens(tokens: number, everyMs: number): Promise<string> {
  const sockets = new Set<Socket>()
  server = createServer((socket) => {
    sockets.add(socket)
    socket.on('close', () => sockets.delete(socket))
    let pending = ''
    socket.on('data', (bytes) => {
      pending += bytes.toString('latin1')
      const head = pending.indexOf('\r\n\r\n')
      if (head < 0) return
      const length = Number(/content-length: (\d+)/i.exec(pending.slice(0, head))?.[1] ?? 0)
      if (pending.length < head + 4 + length) return
      pending = pending.slice(head + 4 + length)
      void answer(socket)
    })
  })
  const answer = async (socket: Socket): Promise<void> => {
    socket.write(HEAD)
    for (let k = 0; k < tokens; k++) {
      if (everyMs > 0) await new Promise((resolve) => setTimeout(resolve, everyMs))
      if (!socket.write(httpChunk(TOKEN_EVENT))) await new Promise((resolve) => socket.once('drain', resolve))
    }
    socket.write(httpChunk(END_EVENTS.replace('TOKENS', String(tokens))) + '0\r\n\r\n')
  }
  server.on('close', () => {
    for (const s of sockets) s.destroy()
  })
  await new Promise<void>((resolve) => server?.listen(0, '127.0.0.1', resolve))
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`
}

/** The same server, back to back, on a thread of its own: the client's turns are its own. */
async function serveTokensInWorker(tokens: number): Promise<string> {
  const source = `
    const { createServer } = require('node:net')
    const { parentPort } = require('node:worker_threads')
    const head = ${JSON.stringify(HEAD)}
    const chunk = (t) => Buffer.byteLength(t).toString(16) + '\\r\\n' + t + '\\r\\n'
    const token = chunk(${JSON.stringify(TOKEN_EVENT)})
    const end = chunk(${JSON.stringify(END_EVENTS.replace('TOKENS', String(tokens)))}) + '0\\r\\n\\r\\n'
    const server = createServer((socket) => {
      let pending = ''
      socket.on('data', async (bytes) => {
        pending += bytes.toString('latin1')
        const at = pending.indexOf('\\r\\n\\r\\n')
        if (at < 0) return
        const length = Number(/content-length: (\\d+)/i.exec(pending.slice(0, at))?.[1] ?? 0)
        if (pending.length < at + 4 + length) return
        pending = pending.slice(at + 4 + length)
        socket.write(head)
        for (let k = 0; k < ${tokens}; k++) if (!socket.write(token)) await new Promise((r) => socket.once('drain', r))
        socket.write(end)
      })
    })
    server.listen(0, '127.0.0.1', () => parentPort.postMessage(server.address().port))
    parentPort.on('message', () => server.close(() => process.exit(0)))
  `
  const worker = new Worker(source, { eval: true })
  workers.push(worker)
  const port = await new Promise<number>((resolve) => worker.once('message', resolve))
  return `http://127.0.0.1:${port}`
}

/** `streams` requests at once, each of `tokens` tokens; every one must arrive whole. */
async function stream(origin: string, streams: number, tokens: number): Promise<void> {
  const connections = new StreamConnections(origin, streams)
  const body = Buffer.from('{"model":"m","stream":true}')
  try {
    const observations = await Promise.all(
      Array.from({ length: streams }, () => streamCompletion(connections, origin, { api: 'chat', body, deadlineMs: 30_000 })),
    )
    for (const obs of observations) {
      expect(obs.error).toBeNull()
      expect(obs.contentChunks).toBe(tokens)
      expect(obs.usageCompletionTokens).toBe(tokens)
    }
  } finally {
    await connections.destroy()
  }
}

describe('batched reads', () => {
  // First in the file: the thread's batching state is its own, and a busy test before would leave it on.
  test('a thread with time to spare never pauses: every chunk is read as it arrives', async () => {
    const origin = await serveTokens(40, 5)
    const meter = new ReadBatchingMeter()
    await stream(origin, 1, 40)
    meter.stop()
    expect(meter.pauses).toBe(0)
    expect(meter.pausedMs).toBe(0)
  })

  test('a thread kept busy by a server flushing a token a write, in another thread, pauses between polls and loses no chunk', async () => {
    const origin = await serveTokensInWorker(8000)
    const meter = new ReadBatchingMeter()
    await stream(origin, 16, 8000)
    meter.stop()
    expect(meter.pauses).toBeGreaterThan(0)
    expect(meter.pausedMs).toBeGreaterThan(0)
    expect(meter.longestPauseMs).toBeGreaterThanOrEqual(meter.pausedMs / meter.pauses)
    // A stopped meter counts no more.
    const counted = meter.pauses
    await stream(origin, 2, 8000)
    expect(meter.pauses).toBe(counted)
  })

  test('while batching, a short turn is topped up to the pause; a long one is not; an idle window stops it', () => {
    const host = new FakeHost()
    const batcher = new ReadBatcher(host)
    const meter = new ReadBatchingMeter()
    // Turns of 0.12 ms back to back, never idle: the first window only starts the count. Topped
    // up to the pause, their work still fills 60% of each window, so it batches on.
    host.turns(batcher, 0.12, 0, 250)
    expect(batcher.batching).toBe(true)
    const before = host.sleeps.length
    host.turns(batcher, 0.12, 0, 10)
    expect(host.sleeps.slice(before)).toEqual(Array.from({ length: 10 }, () => expect.closeTo(PAUSE_MS - 0.12, 9)))
    host.turns(batcher, 0.12, 0, 200)
    expect(batcher.batching).toBe(true)
    // A turn that already took longer than the pause finds its chunks gathered.
    const beforeLong = host.sleeps.length
    host.turns(batcher, PAUSE_MS + 0.1, 0, 5)
    expect(host.sleeps.length).toBe(beforeLong)
    // Mostly idle between turns: batching stops within a window or two.
    host.turns(batcher, 0.05, 2, 20)
    expect(batcher.batching).toBe(false)
    const afterIdle = host.sleeps.length
    host.turns(batcher, 0.05, 2, 20)
    expect(host.sleeps.length).toBe(afterIdle)
    // Back to 0.12 ms turns back to back: it batches again.
    host.turns(batcher, 0.12, 0, 200)
    expect(batcher.batching).toBe(true)
    // Never idle, but turns of 0.05 ms topped up to the pause: 25% of the time is work, the rest
    // the pauses' (a pause takes the place of the poll's wait): it stops.
    host.turns(batcher, 0.05, 0, 200)
    expect(batcher.batching).toBe(false)
    const afterLight = host.sleeps.length
    meter.stop()
    expect(meter.pauses).toBe(afterLight)
    expect(meter.pausedMs).toBeCloseTo(
      host.sleeps.reduce((a, b) => a + b, 0),
      9,
    )
  })

  test('a window starts batching when busy enough, and stops when its own work, pauses not counted, fills too little of it', () => {
    const window = (busy: number) => ({ activeMs: busy * 10, idleMs: (1 - busy) * 10, pausedMs: 0 })
    expect(batchingAfter(false, window(ENTER_UTILIZATION + 0.01))).toBe(true)
    expect(batchingAfter(false, window(ENTER_UTILIZATION - 0.01))).toBe(false)
    // Between the two bounds, it keeps what it was doing.
    const between = window((ENTER_UTILIZATION + EXIT_UTILIZATION) / 2)
    expect(batchingAfter(true, between)).toBe(true)
    expect(batchingAfter(false, between)).toBe(false)
    expect(batchingAfter(true, window(EXIT_UTILIZATION - 0.01))).toBe(false)
    // A pause takes the place of the poll's wait: 6.5 ms of pauses and 3 of work in a window
    // that never idled is a thread with most of its time to spare (the paced C = 256 cell
    // between two rounds), so it stops; 4.5 ms of work in 10 keeps it (a server flushing tokens
    // as fast as it can).
    expect(batchingAfter(true, { activeMs: 9.5, idleMs: 0.5, pausedMs: 6.5 })).toBe(false)
    expect(batchingAfter(true, { activeMs: 10, idleMs: 0, pausedMs: 5.5 })).toBe(true)
    // An empty window is idle.
    expect(batchingAfter(true, { activeMs: 0, idleMs: 0, pausedMs: 0 })).toBe(false)
    expect(batchingAfter(false, { activeMs: 0, idleMs: 0, pausedMs: 0 })).toBe(false)
  })

  test('two counts add up, the longest pause the longer of the two', () => {
    expect(addPauses({ pauses: 2, pausedMs: 0.3, longestPauseMs: 0.2 }, { pauses: 1, pausedMs: 0.25, longestPauseMs: 0.25 })).toEqual({
      pauses: 3,
      pausedMs: 0.55,
      longestPauseMs: 0.25,
    })
  })
})
