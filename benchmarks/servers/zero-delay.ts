/**
 * A zero-delay streaming server (child process): every `POST /v1/chat/completions` gets a
 * pre-rendered vLLM-shaped stream of `max_tokens` tokens (chunked, as vLLM sends it) as fast as
 * the socket takes it, so the client is the bottleneck.
 *
 * `--writes N` (the default, 4) hands the response to the socket in N large writes.
 * `--events-per-write E` hands it over E SSE events at a time instead, each group one
 * `socket.write` of its own HTTP chunk (no corking, so one `send` while the kernel has room): 1 is
 * a server that flushes every token as it is made, as an engine at batch size one does; 16, one
 * that batches. A write the socket cannot take at once waits for `drain` before the next.
 *
 * It speaks HTTP/1.1 over `node:net` itself (keep-alive, `content-length` request bodies):
 * `node:http` corks every `res.write` of a tick into one `writev`, which would merge the events
 * whatever the server asked for.
 *
 * Usage: `node benchmarks/servers/zero-delay.ts [--port 0] [--writes 4 | --events-per-write E]`
 */
import { createServer, type Socket } from 'node:net'
import { parseArgs } from 'node:util'
import { intFlag } from '../../src/cli/flags.ts'
import { chunkHead, DONE_EVENT, roleEvent, tokenEvent, usageEvent } from '../chunks.ts'
import { httpChunk, readRequests, respond } from './http1-requests.ts'
import { maxTokensOf, MODELS_BODY, serveUntilStopped } from './serve.ts'

const { values } = parseArgs({
  options: {
    port: { type: 'string', default: '0' },
    writes: { type: 'string' },
    'events-per-write': { type: 'string' },
  },
})
if (values.writes !== undefined && values['events-per-write'] !== undefined) {
  throw new Error('--writes and --events-per-write are exclusive: split the response in N writes, or E events a write')
}
const writes = intFlag('--writes', values.writes, 1) ?? 4
const eventsPerWrite = intFlag('--events-per-write', values['events-per-write'], 1) ?? null
const PROMPT_TOKENS = 32
const DEFAULT_TOKENS = 1000
const HEAD = 'HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\ntransfer-encoding: chunked\r\n\r\n'
const END = '0\r\n\r\n'

/** The SSE events of a `tokens`-token response: role, one per token, usage, `[DONE]`. */
function events(tokens: number): string[] {
  const head = chunkHead(tokens)
  const all = [roleEvent(head)]
  for (let k = 0; k < tokens; k++) all.push(tokenEvent(head, k, k === tokens - 1 ? 'length' : null))
  all.push(usageEvent(head, PROMPT_TOKENS, tokens), DONE_EVENT)
  return all
}

/**
 * The response's writes: with `--events-per-write E`, the head, then one HTTP chunk of E events
 * per write, the terminating chunk on the last; else the whole response in `--writes` pieces.
 */
function renderWrites(tokens: number): Buffer[] {
  const all = events(tokens)
  if (eventsPerWrite !== null) {
    const pieces = [Buffer.from(HEAD, 'latin1')]
    for (let at = 0; at < all.length; at += eventsPerWrite) {
      const last = at + eventsPerWrite >= all.length
      pieces.push(Buffer.from(httpChunk(all.slice(at, at + eventsPerWrite).join('')) + (last ? END : '')))
    }
    return pieces
  }
  const body = Buffer.from(HEAD + httpChunk(all.join('')) + END)
  const size = Math.ceil(body.length / writes)
  const pieces: Buffer[] = []
  for (let at = 0; at < body.length; at += size) pieces.push(body.subarray(at, at + size))
  return pieces
}

/** Responses by token count. */
const rendered = new Map<number, Buffer[]>()

function writesFor(tokens: number): Buffer[] {
  let pieces = rendered.get(tokens)
  if (pieces === undefined) {
    pieces = renderWrites(tokens)
    rendered.set(tokens, pieces)
  }
  return pieces
}

/**
 * Writes `pieces` from `from` on, one `socket.write` each; when the socket asks to wait, goes on
 * at `drain`. One response at a time per connection: the client sends the next request after the end.
 */
function writeFrom(socket: Socket, pieces: readonly Buffer[], from: number): void {
  for (let i = from; i < pieces.length; i++) {
    if (socket.destroyed) return
    if (!socket.write(pieces[i] as Buffer) && i + 1 < pieces.length) {
      socket.once('drain', () => writeFrom(socket, pieces, i + 1))
      return
    }
  }
}

function answer(socket: Socket, method: string, path: string, body: Buffer): void {
  if (method === 'GET' && path === '/v1/models') respond(socket, '200 OK', 'application/json', MODELS_BODY)
  else if (method === 'POST' && path === '/v1/chat/completions') writeFrom(socket, writesFor(maxTokensOf(body, DEFAULT_TOKENS)), 0)
  else respond(socket, '404 Not Found', 'text/plain', 'not found')
}

serveUntilStopped(
  createServer((socket) => readRequests(socket, answer)),
  Number(values.port),
)
