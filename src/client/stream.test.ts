import { createHash } from 'node:crypto'
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { afterEach, expect, test } from 'vitest'
import { monoMs } from './clock.ts'
import { prepareCompletion, streamCompletion } from './stream.ts'
import { StreamConnections } from './connections.ts'

let server: Server | null = null
afterEach(async () => {
  await new Promise((r) => (server === null ? r(null) : server.close(r)))
  server?.closeAllConnections()
  server = null
})

/** A server that drops the connection of its first `drops` requests without answering, then streams. */
async function dropping(drops: number): Promise<string> {
  let seen = 0
  server = createServer((req, res) => {
    req.resume()
    req.on('end', () => {
      if (seen++ < drops) {
        req.socket.destroy()
        return
      }
      res.writeHead(200, { 'content-type': 'text/event-stream' })
      res.end(
        'data: {"choices":[{"delta":{"content":"hi"}}]}\n\n' +
          'data: {"choices":[],"usage":{"prompt_tokens":2,"completion_tokens":1}}\n\n' +
          'data: [DONE]\n\n',
      )
    })
  })
  await new Promise<void>((r) => server?.listen(0, '127.0.0.1', r))
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`
}

test('a connection the server closes before any response is sent again once, and the attempt is counted', async () => {
  const origin = await dropping(1)
  const pool = new StreamConnections(origin, null)
  try {
    const obs = await streamCompletion(pool, origin, { api: 'chat', body: Buffer.from('{}'), deadlineMs: 5000 })
    expect(obs.error).toBeNull()
    expect(obs.attempts).toBe(2)
    expect(obs.contentChunks).toBe(1)
    expect(obs.sent?.bytes).toBe(2)
    expect(obs.sent?.sha256).toBe(createHash('sha256').update('{}').digest('hex'))
  } finally {
    await pool.destroy()
  }
})

test('a second close fails the request as CONNECTION_CLOSED; it is never retried twice', async () => {
  const origin = await dropping(2)
  const pool = new StreamConnections(origin, null)
  try {
    const obs = await streamCompletion(pool, origin, { api: 'chat', body: Buffer.from('{}'), deadlineMs: 5000 })
    expect(obs.error?.code).toBe('CONNECTION_CLOSED')
    expect(obs.error?.message).toMatch(/^the server closed the connection before any response/)
    expect(obs.attempts).toBe(2)
  } finally {
    await pool.destroy()
  }
})

test('a completion prepared ahead is dispatched and stamped when it goes, with the abort signal it is given then', async () => {
  const origin = await dropping(1)
  const pool = new StreamConnections(origin, null)
  try {
    const go = prepareCompletion(pool, origin, { api: 'chat', body: Buffer.from('{"a":1}'), deadlineMs: 5000 })
    await new Promise((r) => setTimeout(r, 30))
    const at = monoMs()
    const obs = await go()
    // Prepared 30 ms before: its clock starts when it goes, not when it was built.
    expect(obs.dispatchedAt).toBeGreaterThanOrEqual(at)
    expect(obs.sentAt).toBeGreaterThanOrEqual(at)
    // The retry on a fresh connection writes the same bytes.
    expect(obs.error).toBeNull()
    expect(obs.attempts).toBe(2)
    expect(obs.sent?.sha256).toBe(createHash('sha256').update('{"a":1}').digest('hex'))
    const aborted = prepareCompletion(pool, origin, { api: 'chat', body: Buffer.from('{}'), deadlineMs: 5000 })
    expect((await aborted(AbortSignal.abort())).error?.code).toBe('REQUEST_ABORTED')
  } finally {
    await pool.destroy()
  }
})
