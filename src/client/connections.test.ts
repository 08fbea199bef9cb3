import { createServer, type ServerResponse, type Server } from 'node:http'
import type { AddressInfo, Socket } from 'node:net'
import { afterEach, describe, expect, test } from 'vitest'
import { StreamConnections } from './connections.ts'
import { streamCompletion } from './stream.ts'

const STREAM = 'data: {"choices":[{"delta":{"content":"hi"}}]}\n\ndata: [DONE]\n\n'

let server: Server | null = null
afterEach(async () => {
  server?.closeAllConnections()
  await new Promise((r) => (server === null ? r(null) : server.close(r)))
  server = null
})

/** A server that records each request's client port and answers it when `answer()` is called (or at once). */
async function serve(hold: boolean): Promise<{ origin: string; ports: number[]; answer: () => void; open: () => number }> {
  const ports: number[] = []
  const held: ServerResponse[] = []
  server = createServer((req, res) => {
    if (req.method === 'GET') return res.end('{"data":[]}')
    ports.push(req.socket.remotePort ?? -1)
    req.resume()
    req.on('end', () => {
      res.writeHead(200, { 'content-type': 'text/event-stream' })
      if (hold) held.push(res)
      else res.end(STREAM)
    })
  })
  let sockets = 0
  server.on('connection', (s) => {
    sockets++
    s.on('close', () => sockets--)
  })
  await new Promise<void>((r) => server?.listen(0, '127.0.0.1', r))
  return {
    origin: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    ports,
    answer: () => held.shift()?.end(STREAM),
    open: () => sockets,
  }
}

/**
 * A raw request: resolves at its response's end (or error); `turns()` counts the event-loop turns
 * (check phases) until its bytes went out (0: at once).
 */
function raw(
  connections: StreamConnections,
  path = '/v1/chat/completions',
): { turns: () => Promise<number>; ended: Promise<Error | null>; abort: () => void } {
  let sent = false
  let finish: (err: Error | null) => void = () => {}
  const ended = new Promise<Error | null>((r) => (finish = r))
  const exchange = connections.send(
    { method: 'POST', path, body: Buffer.from('{}'), headers: { 'content-type': 'application/json' } },
    {
      onSent: () => (sent = true),
      onHead: () => {},
      onBody: () => {},
      onEnd: () => finish(null),
      onError: (err) => finish(err),
    },
  )
  const turns = async (): Promise<number> => {
    let n = 0
    while (!sent && n < 100) {
      await new Promise((r) => setImmediate(r))
      n++
    }
    return n
  }
  return { turns, ended, abort: () => exchange.abort(new Error('cancelled')) }
}

describe('StreamConnections', () => {
  test('the next request goes out at once on the connection just released', async () => {
    const { origin, ports } = await serve(false)
    const connections = new StreamConnections(origin, 1)
    try {
      await raw(connections).ended
      // At once: the socket reported any close or unasked bytes when they came, so nothing is
      // checked before the write (undici's Pool took two event-loop turns here).
      const next = raw(connections)
      expect(await next.turns()).toBe(0)
      await next.ended
      expect(new Set(ports).size).toBe(1)
      expect(connections.opened).toBe(1)
    } finally {
      await connections.destroy()
    }
  })

  test('a closed loop of C streams reuses C connections, each slot its own', async () => {
    const { origin, ports, open } = await serve(false)
    const connections = new StreamConnections(origin, 3)
    try {
      await Promise.all(
        Array.from({ length: 3 }, async () => {
          for (let i = 0; i < 5; i++) {
            const obs = await streamCompletion(connections, origin, { api: 'chat', body: Buffer.from('{}'), deadlineMs: 5000 })
            expect(obs.error).toBeNull()
          }
        }),
      )
      expect(ports).toHaveLength(15)
      expect(new Set(ports).size).toBe(3)
      expect(connections.opened).toBe(3)
      expect(open()).toBe(3)
    } finally {
      await connections.destroy()
    }
  })

  test('never more than `connections` at once: the next waits, first come first served, for the first released', async () => {
    const { origin, ports, answer } = await serve(true)
    // The four go to connections or the line at once.
    const connections = new StreamConnections(origin, 2)
    try {
      const a = raw(connections)
      const b = raw(connections)
      const c = raw(connections)
      const d = raw(connections)
      expect(connections.waiting).toBe(2)
      expect(connections.opened).toBe(2)
      await expect.poll(() => ports.length).toBe(2)
      answer()
      expect(await a.ended).toBeNull()
      // c went out on a's connection; d still waits.
      await expect.poll(() => ports.length).toBe(3)
      expect(ports[2]).toBe(ports[0])
      expect(connections.waiting).toBe(1)
      answer()
      answer()
      await Promise.all([b.ended, c.ended])
      await expect.poll(() => ports.length).toBe(4)
      answer()
      expect(await d.ended).toBeNull()
      expect(connections.opened).toBe(2)
    } finally {
      await connections.destroy()
    }
  })

  test('a waiting request aborted before its turn never goes out, and the next still goes', async () => {
    const { origin, ports, answer } = await serve(true)
    const connections = new StreamConnections(origin, 1)
    try {
      const a = raw(connections)
      const gone = raw(connections)
      const c = raw(connections)
      await expect.poll(() => ports.length).toBe(1)
      gone.abort()
      expect((await gone.ended)?.message).toBe('cancelled')
      answer()
      expect(await a.ended).toBeNull()
      await expect.poll(() => ports.length).toBe(2)
      answer()
      expect(await c.ended).toBeNull()
      expect(ports).toHaveLength(2)
    } finally {
      await connections.destroy()
    }
  })

  test('an idle connection the server closed, or sent bytes on unasked, is dropped: the next request connects anew', async () => {
    let sockets: Socket[] = []
    server = createServer((req, res) => {
      req.resume()
      req.on('end', () => res.end(STREAM))
    })
    server.on('connection', (s) => sockets.push(s))
    await new Promise<void>((r) => server?.listen(0, '127.0.0.1', r))
    const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
    const connections = new StreamConnections(origin, 1)
    try {
      expect(await raw(connections).ended).toBeNull()
      ;(sockets[0] as Socket).end()
      await expect.poll(() => connections.opened).toBe(0)
      expect(await raw(connections).ended).toBeNull()
      expect(sockets).toHaveLength(2)
      ;(sockets[1] as Socket).write('HTTP/1.1 200 OK\r\n')
      await expect.poll(() => connections.opened).toBe(0)
      expect(await raw(connections).ended).toBeNull()
      expect(sockets).toHaveLength(3)
    } finally {
      sockets = []
      await connections.destroy()
    }
  })

  test('an aborted request frees its connection for the one waiting', async () => {
    const { origin, ports, answer } = await serve(true)
    const connections = new StreamConnections(origin, 1)
    try {
      const a = raw(connections)
      const b = raw(connections)
      await expect.poll(() => ports.length).toBe(1)
      a.abort()
      expect((await a.ended)?.message).toBe('cancelled')
      await expect.poll(() => ports.length).toBe(2)
      answer()
      answer()
      expect(await b.ended).toBeNull()
    } finally {
      await connections.destroy()
    }
  })

  test('destroy fails the waiting requests and closes every connection; nothing more can be sent', async () => {
    const { origin, ports, open } = await serve(true)
    const connections = new StreamConnections(origin, 1)
    const a = raw(connections)
    const b = raw(connections)
    await expect.poll(() => ports.length).toBe(1)
    await connections.destroy()
    expect(await a.ended).toBeInstanceOf(Error)
    expect((await b.ended)?.message).toMatch(/destroyed before this request could be sent/)
    await expect.poll(open).toBe(0)
    expect(() => raw(connections)).toThrow(/closed/)
  })

  test('close lets the waiting requests go out and ends when they have', async () => {
    const { origin, ports, answer, open } = await serve(true)
    const connections = new StreamConnections(origin, 1)
    const a = raw(connections)
    const b = raw(connections)
    await expect.poll(() => ports.length).toBe(1)
    const closed = connections.close()
    answer()
    await expect.poll(() => ports.length).toBe(2)
    answer()
    expect(await a.ended).toBeNull()
    expect(await b.ended).toBeNull()
    await closed
    await expect.poll(open).toBe(0)
  })

  test('null connections open as many as are in flight at once', async () => {
    const { origin, answer, open, ports } = await serve(true)
    const connections = new StreamConnections(origin, null)
    try {
      // Five held at once, whatever the turns they went out in: five connections.
      const held = Array.from({ length: 5 }, () => raw(connections))
      await expect.poll(() => ports.length).toBe(5)
      for (let i = 0; i < 5; i++) answer()
      expect(await Promise.all(held.map((r) => r.ended))).toEqual([null, null, null, null, null])
      expect(connections.opened).toBe(5)
      expect(open()).toBe(5)
    } finally {
      await connections.destroy()
    }
  })

  test('warm opens connections up to the count, each answering a GET of its own, and requests then connect nothing', async () => {
    const { origin, open, ports } = await serve(false)
    const connections = new StreamConnections(origin, 8)
    try {
      // One open already: warm adds what is missing, however fast the server answers.
      await raw(connections).ended
      await connections.warm(5, { path: '/v1/models', timeoutMs: 5000 })
      expect(connections.opened).toBe(5)
      expect(open()).toBe(5)
      // Never past the bound.
      await connections.warm(20, { path: '/v1/models', timeoutMs: 5000 })
      expect(connections.opened).toBe(8)
      ports.length = 0
      await Promise.all(Array.from({ length: 8 }, () => raw(connections).ended))
      expect(connections.opened).toBe(8)
      expect(new Set(ports).size).toBeGreaterThan(1)
      expect(open()).toBe(8)
    } finally {
      await connections.destroy()
    }
  })

  test('a burst goes out at once on warm connections', async () => {
    const { origin } = await serve(false)
    const connections = new StreamConnections(origin, 4)
    try {
      await Promise.all(Array.from({ length: 4 }, () => raw(connections).ended))
      const burst = Array.from({ length: 4 }, () => raw(connections))
      expect(await Promise.all(burst.map((r) => r.turns()))).toEqual([0, 0, 0, 0])
      expect(await Promise.all(burst.map((r) => r.ended))).toEqual([null, null, null, null])
    } finally {
      await connections.destroy()
    }
  })

  test('a header value with a line break fails its request before a byte is written', async () => {
    const { origin, ports } = await serve(false)
    const connections = new StreamConnections(origin, 1)
    try {
      let failed: Error | null = null
      await new Promise<void>((resolve) => {
        connections.send(
          {
            method: 'POST',
            path: '/v1/chat/completions',
            headers: { authorization: 'Bearer k\r\nx-injected: 1' },
            body: Buffer.from('{}'),
          },
          {
            onSent: () => {},
            onHead: () => {},
            onBody: () => {},
            onEnd: () => resolve(),
            onError: (err) => {
              failed = err
              resolve()
            },
          },
        )
      })
      expect((failed as Error | null)?.message).toMatch(/header "authorization": a value with a line break cannot be sent/)
      expect(await raw(connections).ended).toBeNull()
      expect(ports).toHaveLength(1)
    } finally {
      await connections.destroy()
    }
  })

  test('a request prepared ahead goes out as the same bytes, once sent; a bad header in it fails it only then', async () => {
    const seen: string[] = []
    server = createServer((req, res) => {
      let body = ''
      req.setEncoding('latin1')
      req.on('data', (piece: string) => (body += piece))
      req.on('end', () => {
        seen.push(`${req.method} ${req.url} ${JSON.stringify(req.headers)} ${body}`)
        res.writeHead(200, { 'content-type': 'text/event-stream' })
        res.end(STREAM)
      })
    })
    await new Promise<void>((r) => server?.listen(0, '127.0.0.1', r))
    const connections = new StreamConnections(`http://127.0.0.1:${(server.address() as AddressInfo).port}`, 1)
    const request = { method: 'POST' as const, path: '/v1/completions', headers: { 'x-a': '1' }, body: Buffer.from('{"prompt":"é"}') }
    const settled = (wire: Parameters<StreamConnections['send']>[0]) =>
      new Promise<Error | null>((resolve) => {
        connections.send(wire, { onSent() {}, onHead() {}, onBody() {}, onEnd: () => resolve(null), onError: resolve })
      })
    try {
      const prepared = connections.prepare(request)
      const bad = connections.prepare({ ...request, headers: { 'x-a': '1\r\nx-injected: 1' } })
      expect(seen).toEqual([]) // nothing written by preparing
      expect(await settled(request)).toBeNull()
      expect(await settled(prepared)).toBeNull()
      expect(seen).toHaveLength(2)
      expect(seen[1]).toBe(seen[0])
      expect((await settled(bad))?.message).toMatch(/header "x-a": a value with a line break cannot be sent/)
      expect(seen).toHaveLength(2)
    } finally {
      await connections.destroy()
    }
  })

  test('reads of several connections share one buffer: split events and error bodies come out whole, each on its own request', async () => {
    // Each request's reply goes out in pieces cut mid-line, the streams' pieces interleaved, so a
    // kept view of one read would be overwritten by the next connection's.
    const replies: ServerResponse[] = []
    let allIn: () => void = () => {}
    const ready = new Promise<void>((r) => (allIn = r))
    server = createServer((req, res) => {
      req.resume()
      req.on('end', () => {
        if (req.url === '/v1/completions') {
          res.writeHead(503, { 'content-type': 'application/json' })
          res.write('{"error":{"message":"over')
          // Longer than the first read, so it covers where that read lay in the buffer.
          setTimeout(() => res.end(`loaded, retry later${' please'.repeat(60)}"}}`), 20)
          return
        }
        res.writeHead(200, { 'content-type': 'text/event-stream' })
        replies.push(res)
        if (replies.length === 3) allIn()
      })
    })
    await new Promise<void>((r) => server?.listen(0, '127.0.0.1', r))
    const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
    const connections = new StreamConnections(origin, 4)
    try {
      const streams = [0, 1, 2].map(() =>
        streamCompletion(connections, origin, { api: 'chat', body: Buffer.from('{}'), deadlineMs: 5000, captureChars: 100 }),
      )
      await ready
      const events = (i: number): string =>
        [0, 1, 2, 3].map((k) => `data: {"choices":[{"delta":{"content":"s${i}t${k} "}}]}\n\n`).join('') + 'data: [DONE]\n\n'
      const texts = replies.map((_, i) => events(i))
      for (let at = 0; at < Math.max(...texts.map((t) => t.length)); at += 23) {
        for (const [i, res] of replies.entries()) if (at < (texts[i] as string).length) res.write((texts[i] as string).slice(at, at + 23))
        await new Promise((r) => setTimeout(r, 2))
      }
      for (const res of replies) res.end()
      const failed = await streamCompletion(connections, origin, { api: 'completions', body: Buffer.from('{}'), deadlineMs: 5000 })
      const got = await Promise.all(streams)
      // Which request got which reply follows the server's arrival order: compare as sets.
      expect(got.map((o) => o.content).sort()).toEqual(['s0t0 s0t1 s0t2 s0t3 ', 's1t0 s1t1 s1t2 s1t3 ', 's2t0 s2t1 s2t2 s2t3 '])
      expect(got.map((o) => o.error)).toEqual([null, null, null])
      expect(failed.error?.message).toMatch(/overloaded, retry later/)
    } finally {
      await connections.destroy()
    }
  })

  test('a connection count that is not a whole number ≥ 1 is refused', () => {
    expect(() => new StreamConnections('http://127.0.0.1:1', 0)).toThrow(/connections: a whole number ≥ 1 or null, got 0/)
    expect(() => new StreamConnections('http://127.0.0.1:1', 1.5)).toThrow(/got 1.5/)
  })
})
