import { createServer, type Socket } from 'node:net'
import { setFlagsFromString } from 'node:v8'
import { runInNewContext } from 'node:vm'
import { ChunkInterpreter } from '../client/chunk-interpreter.ts'
import { StreamConnections } from '../client/connections.ts'
import { streamCompletion } from '../client/stream.ts'
import { Http1ResponseParser } from '../http1.ts'

const CHUNK = '{"id":"warm","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":" warm"},"finish_reason":null}]}'
const LAST =
  'data: {"choices":[{"index":0,"delta":{},"finish_reason":"length"}],"usage":{"prompt_tokens":8,"completion_tokens":64}}\n\ndata: [DONE]\n\n'

/** A whole chunked event-stream response of these 64 events' data, one event a chunk, as a server writes it. */
function response(events: readonly string[]): Buffer {
  const chunk = (event: string): string => `${Buffer.byteLength(event).toString(16)}\r\n${event}\r\n`
  return Buffer.from(
    'HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n' +
      events.map((data) => chunk(`data: ${data}\n\n`)).join('') +
      `${chunk(LAST)}0\r\n\r\n`,
  )
}

/**
 * The warm-up's two replies. Every token chunk alike but for its text, read by the stream's
 * learned shape (`TextChunkShape`); and chunks that each differ in more (a per-chunk field, as a
 * server that stamps its chunks sends), each parsed whole. A cell may meet either, so both paths
 * are compiled before it: a path first taken while measuring is compiled then, on a V8 worker
 * that shares the measuring thread's core.
 */
const RESPONSES: readonly Buffer[] = [
  response(Array.from({ length: 64 }, () => CHUNK)),
  response(Array.from({ length: 64 }, (_, k) => CHUNK.replace('"choices"', `"t":${k},"choices"`))),
]

/**
 * Runs the per-read hot path (HTTP/1.1 framing, SSE split, JSON parse, the chunk interpreter) a
 * few thousand times before a cell so the JIT has compiled it: a parser still being compiled
 * shows up as latency in the first requests. Takes a few milliseconds; sends nothing.
 * @returns the output chunks the warm-up streams carried (so none of it is optimized away)
 */
export function warmClientJit(rounds = 200): number {
  let chunks = 0
  for (let i = 0; i < rounds; i++) {
    const interpreter = new ChunkInterpreter({
      dispatchedAt: 0,
      captureChars: 0,
      origin: 'http://warm',
      onSettle: (obs) => (chunks += obs.outputChunkAt.length),
    })
    const parser = new Http1ResponseParser({
      onHead: (status, headers) => interpreter.onResponseStart(status, headers, 0),
      onBody: (bytes) => interpreter.onResponseData(bytes, i),
      onEnd: () => interpreter.onResponseEnd(i),
    })
    interpreter.onRequestSent(0)
    // One read an event, as a paced stream arrives.
    const reply = RESPONSES[i % RESPONSES.length] as Buffer
    for (let at = 0; at < reply.length; at += 137) parser.push(reply.subarray(at, at + 137))
  }
  return chunks
}

/** Requests `warmRequestPath` sends: past V8's 400 calls before a function is optimized (Maglev), with room to spare. */
const WARM_REQUESTS = 600
/** Its connections: the requests go out a round of this many at a time, as a closed loop's do. */
const WARM_CONNECTIONS = 16
let requestPathWarmed: Promise<number> | null = null

/**
 * Sends `WARM_REQUESTS` whole requests, once per thread, through the client's own request path
 * (`streamCompletion` on `StreamConnections`: the body written to a socket, its reply's reads
 * stamped, staged, parsed, settled) to a throwaway server on loopback in this thread, which answers
 * each with the canned 64-chunk stream. V8 optimizes a function once it has run about 400 times;
 * a cell's warm-up of C requests runs the once-a-request functions only C times, so at C = 256
 * they were compiled during the first measured round, 20-odd compilations that on one core took
 * the thread for 4–6 ms of a 12 ms round of 256 sends. Takes about 100 ms; the server is closed
 * and every connection ended before it resolves. The code it optimizes is partly deoptimized on
 * the first real send (other maps, branches the warm-up never took): 1–1.5 ms once, which is
 * why a cell calls it only before large rounds.
 * @returns the warm-up requests that streamed whole (every call in a thread: the first one's); 0
 *   when the loopback server could not be started
 */
export function warmRequestPath(): Promise<number> {
  // Best effort: a thread that cannot listen on loopback measures as it would have without it.
  requestPathWarmed ??= sendWarmRequests().catch(() => 0)
  return requestPathWarmed
}

async function sendWarmRequests(): Promise<number> {
  const sockets = new Set<Socket>()
  const server = createServer((socket) => {
    sockets.add(socket)
    socket.on('close', () => sockets.delete(socket))
    let pending = ''
    let replies = 0
    socket.on('data', (bytes) => {
      pending += bytes.toString('latin1')
      for (;;) {
        const head = pending.indexOf('\r\n\r\n')
        if (head < 0) return
        const length = Number(/content-length: (\d+)/i.exec(pending.slice(0, head))?.[1] ?? 0)
        if (pending.length < head + 4 + length) return
        pending = pending.slice(head + 4 + length)
        socket.write(RESPONSES[replies++ % RESPONSES.length] as Buffer)
      }
    })
  })
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    server.listen(0, '127.0.0.1', resolve)
  })
  const address = server.address()
  const origin = `http://127.0.0.1:${typeof address === 'object' && address !== null ? address.port : 0}`
  const connections = new StreamConnections(origin, WARM_CONNECTIONS)
  const body = Buffer.from(JSON.stringify({ model: 'warm', messages: [{ role: 'user', content: 'warm '.repeat(200) }], stream: true }))
  let next = 0
  let whole = 0
  try {
    await Promise.all(
      Array.from({ length: WARM_CONNECTIONS }, async () => {
        while (next++ < WARM_REQUESTS) {
          const obs = await streamCompletion(connections, origin, { api: 'chat', body, deadlineMs: 5000, model: 'warm' })
          if (obs.error === null) whole++
        }
      }),
    )
    return whole
  } finally {
    await connections.destroy()
    for (const socket of sockets) socket.destroy()
    await new Promise((resolve) => server.close(resolve))
  }
}

let collect: ((options?: { type: 'minor' | 'major' }) => void) | null = null

/**
 * Collects the whole heap before a measured phase, as `vllm bench serve` runs `gc.collect()` and
 * `gc.freeze()` before its requests. Loading, the warm-up and the prepared bodies leave an old
 * generation that V8 would otherwise mark and compact during the first measured requests, in
 * incremental steps of up to tens of milliseconds on one core: a chunk that arrives in one is
 * stamped that much late. Node exposes no collector without `--expose-gc`; the flag is set for
 * the one new context that fetches `gc`, as Jest's leak detector does.
 */
export function settleHeap(): void {
  collector()()
}

/**
 * Collects the young generation only (a scavenge, about a millisecond), so that what comes next
 * allocates into an empty one: a closed loop's opening round, whose built requests would
 * otherwise fill it and have a scavenge copy them all in the middle of the round.
 */
export function settleYoung(): void {
  collector()({ type: 'minor' })
}

function collector(): (options?: { type: 'minor' | 'major' }) => void {
  if (collect === null) {
    setFlagsFromString('--expose-gc')
    collect = runInNewContext('gc') as (options?: { type: 'minor' | 'major' }) => void
  }
  return collect
}
