import { createHash } from 'node:crypto'
import { mkdtemp, readFile, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Readable } from 'node:stream'
import { afterEach, describe, expect, test } from 'vitest'
import { Client } from 'undici'
import { serverStamps } from '../itl.ts'
import { gapErrors, parseSendLog, takeSendLog } from '../send-truth.ts'
import { type ServerProcess, startServerProcess } from './spawn.ts'

const INTERVAL_MS = 20
let server: ServerProcess | null = null

afterEach(async () => {
  await server?.close()
  server = null
})

const body = (tokens: number, content = 'x'): string =>
  JSON.stringify({ model: 'm', stream: true, max_tokens: tokens, messages: [{ role: 'user', content }] })

/** One streaming request on `client`'s connection: its status and the server's send stamps of its token chunks. */
async function stream(client: Client, tokens: number, content = 'x'): Promise<{ status: number; stamps: number[] }> {
  const r = await client.request({
    method: 'POST',
    path: '/v1/chat/completions',
    body: body(tokens, content),
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

  test('--log: per request, the sha256 of the body it received and each chunk’s send time, its "t"; GET /log takes them', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'paced-log-'))
    const file = join(dir, 'sends.jsonl')
    try {
      server = await startServerProcess('paced', ['--interval-ms', String(INTERVAL_MS), '--log', file])
      const client = new Client(server.origin, { pipelining: 1 })
      try {
        const first = await stream(client, 4, 'first')
        const second = await stream(client, 3, 'second')
        const log = await takeSendLog(server.origin)
        expect(log.requests).toBe(2)
        const sha = (text: string): string => createHash('sha256').update(text).digest('hex')
        expect(log.bySha256.get(sha(body(4, 'first')))).toEqual({
          sha256: sha(body(4, 'first')),
          bodyBytes: body(4, 'first').length,
          tokens: 4,
          sendMs: first.stamps,
        })
        expect(log.bySha256.get(sha(body(3, 'second')))?.sendMs).toEqual(second.stamps)
        // A client whose gaps are the send gaps plus 1 ms reads 1 ms off on every gap, +1 ms on the first.
        const gapsMs = first.stamps.slice(1).map((t, k) => t - (first.stamps[k] as number) + 1)
        const errors = gapErrors(
          [
            { sha256: sha(body(4, 'first')), gapsMs },
            { sha256: null, gapsMs: [10] },
          ],
          log,
        )
        expect(errors).toMatchObject({ requests: 2, matched: 1, incomplete: 0, gaps: 3 })
        expect(errors.errorMeanMs).toBeCloseTo(1, 9)
        expect(errors.errorP99Ms).toBeCloseTo(1, 9)
        expect(errors.firstGapSignedMeanMs).toBeCloseTo(1, 9)
        // Taken: the next call has only what came after; what is left is written when the server stops.
        expect((await takeSendLog(server.origin)).requests).toBe(0)
        await stream(client, 2, 'third')
      } finally {
        await client.close()
      }
      await server.close()
      const left = parseSendLog(await readFile(file, 'utf8'), file)
      expect([...left.bySha256.values()].map((e) => e.sendMs.length)).toEqual([2])
    } finally {
      await rm(dir, { recursive: true, force: true })
    }
  })

  test('GET /log without --log is a 400 naming the flag', async () => {
    server = await startServerProcess('paced', [])
    await expect(takeSendLog(server.origin)).rejects.toThrow(/--log FILE/)
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
