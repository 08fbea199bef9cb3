/**
 * A zero-delay streaming server (child process): every `POST /v1/chat/completions` gets a
 * pre-rendered vLLM-shaped stream of `max_tokens` tokens, written in a few large writes as fast
 * as the socket takes them (`res.write` backpressure), so the client is the bottleneck.
 *
 * Usage: `node benchmarks/servers/zero-delay.ts [--port 0] [--writes 4]`
 */
import { createServer, type ServerResponse } from 'node:http'
import { parseArgs } from 'node:util'
import { renderCompletion } from '../chunks.ts'
import { answerModels, requestedTokens, serveUntilStopped } from './serve.ts'

const { values } = parseArgs({
  options: {
    port: { type: 'string', default: '0' },
    writes: { type: 'string', default: '4' },
  },
})
const writes = Math.max(1, Number(values.writes))
const PROMPT_TOKENS = 32

/** Responses by token count, each split into `writes` pieces. */
const rendered = new Map<number, Buffer[]>()

function piecesFor(tokens: number): Buffer[] {
  let pieces = rendered.get(tokens)
  if (pieces === undefined) {
    const body = Buffer.from(renderCompletion(tokens, tokens, PROMPT_TOKENS))
    const size = Math.ceil(body.length / writes)
    pieces = []
    for (let at = 0; at < body.length; at += size) pieces.push(body.subarray(at, at + size))
    rendered.set(tokens, pieces)
  }
  return pieces
}

async function writeAll(res: ServerResponse, pieces: readonly Buffer[]): Promise<void> {
  for (const piece of pieces) {
    if (res.destroyed) return
    if (!res.write(piece)) {
      await new Promise<void>((resolve) => {
        const done = (): void => {
          res.off('drain', done)
          res.off('close', done)
          resolve()
        }
        res.on('drain', done)
        res.on('close', done)
      })
    }
  }
  res.end()
}

const server = createServer((req, res) => {
  if (answerModels(req, res)) return
  if (req.method !== 'POST' || req.url !== '/v1/chat/completions') {
    res.writeHead(404).end()
    return
  }
  requestedTokens(req, 1000)
    .then((tokens) => {
      res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' })
      return writeAll(res, piecesFor(tokens))
    })
    .catch(() => res.destroy())
})

serveUntilStopped(server, Number(values.port))
