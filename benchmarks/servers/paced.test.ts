import { Readable } from 'node:stream'
import { afterEach, describe, expect, test } from 'vitest'
import { Client } from 'undici'
import { serverStamps } from '../itl.ts'
import { type ServerProcess, startServerProcess } from './spawn.ts'

const INTERVAL_MS = 20
let server: ServerProcess | null = null

afterEach(async () => {
  await server?.close()
  server = null
})

const body = (tokens: number): string =>
  JSON.stringify({ model: 'm', stream: true, max_tokens: tokens, messages: [{ role: 'user', content: 'x' }] })

/** One streaming request on `client`'s connection: its status and the server's send stamps of its token chunks. */
async function stream(client: Client, tokens: number): Promise<{ status: number; stamps: number[] }> {
  const r = await client.request({
    method: 'POST',
    path: '/v1/chat/completions',
    body: body(tokens),
    headers: { 'content-type': 'application/json' },
  })
  const bytes = Buffer.from(await r.body.arrayBuffer())
  return { status: r.statusCode, stamps: serverStamps(bytes) }
}

async function stats(client: Client): Promise<{ chunks: number; lateP99Ms: number | null }> {
  const r = await client.request({ method: 'GET', path: '/stats' })
  return (await r.body.json()) as { chunks: number; lateP99Ms: number | null }
}

describe('the paced bench server', () => {
  test('serves requests one after another on one kept-alive connection, each chunk on its interval', async () => {
    server = await startServerProcess('paced', ['--interval-ms', String(INTERVAL_MS)])
    const client = new Client(server.origin, { pipelining: 1 })
    try {
      for (const tokens of [5, 3]) {
        const { status, stamps } = await stream(client, tokens)
        expect(status).toBe(200)
        expect(stamps).toHaveLength(tokens)
        // The absolute schedule: chunk k is due k intervals after chunk 0 was, never earlier (chunk 0
        // itself goes out a little after it was due, hence half an interval's slack).
        for (let k = 1; k < tokens; k++) {
          expect((stamps[k] as number) - (stamps[0] as number)).toBeGreaterThan((k - 0.5) * INTERVAL_MS)
        }
      }
      expect((await stats(client)).chunks).toBe(8)
      // /stats resets what it reports.
      expect((await stats(client)).chunks).toBe(0)
      const missing = await client.request({ method: 'GET', path: '/nowhere' })
      await missing.body.dump()
      expect(missing.statusCode).toBe(404)
    } finally {
      await client.close()
    }
  })

  test('/stats?values=1 gives each chunk’s lateness in send order: the stamps’ gaps follow from it', async () => {
    server = await startServerProcess('paced', ['--interval-ms', String(INTERVAL_MS)])
    const client = new Client(server.origin, { pipelining: 1 })
    try {
      await stats(client)
      const first = await stream(client, 4)
      const second = await stream(client, 3)
      const r = await client.request({ method: 'GET', path: '/stats?values=1' })
      const body = (await r.body.json()) as { chunks: number; lateMs: number[] }
      expect(body.chunks).toBe(7)
      expect(body.lateMs).toHaveLength(7)
      // Within a stream, chunk k is due one interval after chunk k − 1: its send gap is the interval plus the change in lateness.
      for (const [stamps, offset] of [
        [first.stamps, 0],
        [second.stamps, 4],
      ] as const) {
        for (let k = 1; k < stamps.length; k++) {
          const gap = (stamps[k] as number) - (stamps[k - 1] as number)
          const late = body.lateMs as number[]
          expect(gap).toBeCloseTo(INTERVAL_MS + (late[offset + k] as number) - (late[offset + k - 1] as number), 6)
        }
      }
    } finally {
      await client.close()
    }
  })

  test('refuses a chunked request body with 400, naming what it takes', async () => {
    server = await startServerProcess('paced', [])
    const client = new Client(server.origin)
    try {
      const r = await client.request({
        method: 'POST',
        path: '/v1/chat/completions',
        body: Readable.from([Buffer.from(body(2))]),
      })
      expect(r.statusCode).toBe(400)
      expect(await r.body.text()).toMatch(/content-length/)
    } finally {
      await client.close()
    }
  })

  test('--phases spread starts streams sent together at different points of the interval; aligned starts them together', async () => {
    const firstStamps = async (phases: string): Promise<number[]> => {
      server = await startServerProcess('paced', ['--interval-ms', String(INTERVAL_MS), '--phases', phases])
      const clients = Array.from({ length: 8 }, () => new Client((server as ServerProcess).origin))
      try {
        const streams = await Promise.all(clients.map((c) => stream(c, 2)))
        return streams.map((s) => s.stamps[0] as number).sort((a, b) => a - b)
      } finally {
        await Promise.all(clients.map((c) => c.close()))
        await server.close()
      }
    }
    const spread = await firstStamps('spread')
    // The golden-ratio phases of 8 streams span 0.85 of the interval, whenever the requests arrived.
    expect((spread.at(-1) as number) - (spread[0] as number)).toBeGreaterThan(0.6 * INTERVAL_MS)
    const aligned = await firstStamps('aligned')
    expect((aligned.at(-1) as number) - (aligned[0] as number)).toBeLessThan((spread.at(-1) as number) - (spread[0] as number))
  })

  test('--processes 2 serves from two processes on one port; /stats merges both; close ends them all', async () => {
    server = await startServerProcess('paced', ['--interval-ms', String(INTERVAL_MS), '--processes', '2'])
    expect(server.workerPids).toHaveLength(2)
    // Connections go round-robin to the workers: six of them reach both.
    const clients = Array.from({ length: 6 }, () => new Client((server as ServerProcess).origin, { pipelining: 1 }))
    try {
      const streams = await Promise.all(clients.map((c) => stream(c, 3)))
      for (const s of streams) expect(s.stamps).toHaveLength(3)
      // Whichever worker answers /stats, it reports every process's chunks, and resets them all.
      expect((await stats(clients[0] as Client)).chunks).toBe(18)
      expect((await stats(clients[1] as Client)).chunks).toBe(0)
    } finally {
      await Promise.all(clients.map((c) => c.close()))
    }
    const pids = [server.pid, ...server.workerPids]
    await server.close()
    const alive = (pid: number): boolean => {
      try {
        process.kill(pid, 0)
        return true
      } catch {
        return false
      }
    }
    await expect.poll(() => pids.filter(alive), { timeout: 3000 }).toEqual([])
  })

  test('a bad --processes stops the server before it listens', async () => {
    await expect(startServerProcess('paced', ['--processes', '0'])).rejects.toThrow(/exited before listening/)
  })

  test('a bad --phases stops the server before it listens', async () => {
    await expect(startServerProcess('paced', ['--phases', 'random'])).rejects.toThrow(/exited before listening/)
  })
})
