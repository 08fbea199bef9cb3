import { Worker } from 'node:worker_threads'
import { afterEach, describe, expect, test } from 'vitest'
import { StreamConnections } from './connections.ts'
import { MAX_STAGED_BYTES, StagedReads, type StagedTarget } from './staged-reads.ts'

/** A target that keeps what it parsed (a copy of each read's bytes, and its stamp) and counts its stray reads. */
interface Keeper extends StagedTarget {
  finished: boolean
  got: Array<[string, number]>
  strays: number
}

function keeper(): Keeper {
  const got: Array<[string, number]> = []
  const target: Keeper = {
    finished: false,
    got,
    strays: 0,
    read: (bytes: Uint8Array, at: number) => got.push([Buffer.from(bytes).toString(), at]),
    stray: () => target.strays++,
  }
  return target
}

/** A stage whose after-poll callbacks wait for `poll()`. */
function manualStage(): { stage: StagedReads; poll: () => void } {
  const due: Array<() => void> = []
  return { stage: new StagedReads((callback) => due.push(callback)), poll: () => due.splice(0).forEach((c) => c()) }
}

describe('StagedReads', () => {
  test('parses nothing until the poll ends, then each read in order with its own bytes and stamp', () => {
    const { stage, poll } = manualStage()
    const a = keeper()
    const b = keeper()
    const shared = Buffer.from('one')
    stage.add(a, shared, 1)
    shared.write('two') // the socket's buffer reused for the next read
    stage.add(b, shared, 2)
    stage.add(a, Buffer.from('three'), 3)
    expect(a.got).toEqual([])
    expect(stage.pending).toBe(3)
    poll()
    expect(a.got).toEqual([
      ['one', 1],
      ['three', 3],
    ])
    expect(b.got).toEqual([['two', 2]])
    expect(stage.pending).toBe(0)
    // The buffer is reused by the next poll's reads.
    stage.add(b, Buffer.from('four'), 4)
    poll()
    expect(b.got).toEqual([
      ['two', 2],
      ['four', 4],
    ])
  })

  test('a request finished before its read is parsed (an abort, or an end earlier in the poll) parses nothing and hears of the stray bytes', () => {
    const { stage, poll } = manualStage()
    const a = keeper()
    stage.add(a, Buffer.from('end of the response'), 1)
    stage.add(a, Buffer.from('bytes past it'), 2)
    // Its first read ends it; the second is unasked.
    const read = a.read
    a.read = (bytes, at) => {
      read(bytes, at)
      a.finished = true
    }
    poll()
    expect(a.got).toEqual([['end of the response', 1]])
    expect(a.strays).toBe(1)
  })

  test('flush parses what is staged at once (a socket that ends after its reads)', () => {
    const { stage, poll } = manualStage()
    const a = keeper()
    stage.add(a, Buffer.from('last bytes'), 5)
    stage.flush()
    expect(a.got).toEqual([['last bytes', 5]])
    poll()
    expect(a.got).toHaveLength(1)
  })

  test('staged bytes stay within the bound: reads past it parse those before first, a larger one at once', () => {
    const { stage } = manualStage()
    const a = keeper()
    const half = Buffer.alloc(MAX_STAGED_BYTES / 2 + 1, 'x')
    stage.add(a, half, 1)
    expect(a.got).toHaveLength(0)
    stage.add(a, half, 2)
    expect(a.got.map(([, at]) => at)).toEqual([1])
    stage.add(a, Buffer.alloc(MAX_STAGED_BYTES + 1, 'y'), 3)
    expect(a.got.map(([, at]) => at)).toEqual([1, 2, 3])
    expect(stage.pending).toBe(0)
    // Parsed at once, a large read still goes to a finished target only as stray bytes.
    a.finished = true
    stage.add(a, Buffer.alloc(MAX_STAGED_BYTES + 1, 'z'), 4)
    expect(a.got).toHaveLength(3)
    expect(a.strays).toBe(1)
  })
})

/**
 * A raw HTTP server in a worker thread (so it writes while this thread is blocked): a GET gets an
 * empty JSON reply; any other request an event-stream head and one event, the stream left open.
 */
function startWorkerServer(): Promise<{ origin: string; worker: Worker }> {
  const source = `
    const { createServer } = require('node:net')
    const { parentPort } = require('node:worker_threads')
    const server = createServer((socket) => {
      socket.setNoDelay(true)
      socket.on('data', (bytes) => {
        if (bytes.toString('latin1').startsWith('GET')) {
          socket.write('HTTP/1.1 200 OK\\r\\ncontent-length: 2\\r\\n\\r\\n{}')
          return
        }
        socket.write('HTTP/1.1 200 OK\\r\\ncontent-type: text/event-stream\\r\\ntransfer-encoding: chunked\\r\\n\\r\\n')
        const event = 'data: {"choices":[{"delta":{"content":"x"}}]}\\n\\n'
        socket.write(event.length.toString(16) + '\\r\\n' + event + '\\r\\n')
      })
    })
    server.listen(0, '127.0.0.1', () => parentPort.postMessage(server.address().port))
  `
  const worker = new Worker(source, { eval: true })
  return new Promise((resolve, reject) => {
    worker.once('message', (port: number) => resolve({ origin: `http://127.0.0.1:${port}`, worker }))
    worker.once('error', reject)
  })
}

let stop: (() => Promise<unknown>) | null = null
afterEach(async () => {
  await stop?.()
  stop = null
})

describe('StreamConnections with staged reads', () => {
  test('reads that arrive in one poll are stamped together, however long each takes to parse', async () => {
    const { origin, worker } = await startWorkerServer()
    const connections = new StreamConnections(origin, 2)
    stop = async () => {
      await connections.destroy()
      await worker.terminate()
    }
    // Two connections open and idle: each request below is one write, at once.
    await connections.warm(2, { path: '/v1/models', timeoutMs: 5000 })
    expect(connections.opened).toBe(2)
    const stamps: number[] = []
    const PARSE_MS = 8
    const handler = {
      onSent() {},
      onHead() {},
      onBody(_bytes: Uint8Array, at: number) {
        stamps.push(at)
        // A slow parse: unstaged, the other connection's read would wait for it to be stamped.
        const until = performance.now() + PARSE_MS
        while (performance.now() < until);
      },
      onEnd() {},
      onError() {},
    }
    const request = { method: 'POST' as const, path: '/v1/chat/completions', headers: {}, body: Buffer.from('{}') }
    connections.send(request, handler)
    connections.send(request, handler)
    // Both are answered while this thread is blocked: the next poll finds both readable.
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 150)
    await expect.poll(() => stamps.length, { timeout: 5000 }).toBe(2)
    const [first, second] = stamps as [number, number]
    expect(Math.abs(second - first)).toBeLessThan(PARSE_MS / 2)
  })
})
