import { StreamConnections } from '../src/client/connections.ts'
import type { Distribution } from '../src/schema/run.ts'
import { createSseParser } from '../src/client/sse.ts'
import { streamCompletion, type StreamObservation } from '../src/client/stream.ts'
import { distribution } from '../src/metrics/distribution.ts'
import { chatBody, closedLoop } from './ingest.ts'

export interface ItlOptions {
  /** Paced server origin. */
  origin: string
  /** The paced server's chunk interval, ms. */
  intervalMs: number
  concurrency: number
  /** Token chunks per stream. */
  chunks: number
  /** Requests per slot; every slot's first request starts at once. */
  rounds: number
  /**
   * Per-request deadline as a multiple of the nominal stream time (chunks × interval).
   * @default 1.5
   */
  deadlineFactor?: number
}

/** What the client measured against a paced server at one concurrency. All times ms. */
export interface ItlResult {
  concurrency: number
  requests: number
  okRequests: number
  /** Per-request deadline: `deadlineFactor` × the nominal stream time. */
  deadlineMs: number
  /** |client-measured gap − interval| over every consecutive pair of content chunks. */
  itlErrorMs: Distribution
  /** |client-measured gap − server send gap|: the client's own error. */
  clientErrorMs: Distribution
  /** |server send gap − interval|: the server's lateness, for reference. */
  serverErrorMs: Distribution
  /** Client read time − server send time, on the same monotonic clock. */
  arrivalLatencyMs: Distribution
  offeredTokens: number
  /** Content chunks the client received before the request deadline. */
  deliveredTokens: number
  deliveredShare: number
  /** Client process CPU time over wall time. */
  cpuShare: number
  failures: string[]
}

/** Chunks per stream of the unmeasured warm-up round. */
const WARM_CHUNKS = 50

/** A response's bytes, appended read by read into one buffer (no object per read to collect). */
export interface ByteLog {
  bytes: Buffer
  length: number
}

function append(log: ByteLog, chunk: Uint8Array): void {
  if (log.length + chunk.length > log.bytes.length) {
    const grown = Buffer.allocUnsafe(Math.max(2 * log.bytes.length, log.length + chunk.length))
    log.bytes.copy(grown, 0, 0, log.length)
    log.bytes = grown
  }
  log.bytes.set(chunk, log.length)
  log.length += chunk.length
}

/** The `"t"` send stamp of every non-empty content chunk in a response's bytes, in order. */
export function serverStamps(bytes: Uint8Array): number[] {
  const stamps: number[] = []
  const take = (data: string): void => {
    if (data === '[DONE]') return
    const chunk = JSON.parse(data) as { t?: number; choices?: Array<{ delta?: { content?: string } }> }
    const content = chunk.choices?.[0]?.delta?.content
    if (typeof content === 'string' && content.length > 0 && typeof chunk.t === 'number') stamps.push(chunk.t)
  }
  const parser = createSseParser(take)
  parser.push(bytes)
  parser.end()
  return stamps
}

/**
 * Measures inter-token-latency accuracy against a paced server: `concurrency` streams started
 * at once, `rounds` requests per slot, closed loop. Gaps come from the client's own
 * `outputChunkAt` (per read: events of one read share a timestamp, a measured gap of 0).
 */
export async function measureItl(o: ItlOptions): Promise<ItlResult> {
  const logs = new Map<string, ByteLog>()
  const connections = new StreamConnections(o.origin, o.concurrency)
  const deadlineMs = (o.deadlineFactor ?? 1.5) * o.chunks * o.intervalMs
  const requests = o.concurrency * o.rounds
  const bodies = Array.from({ length: requests }, (_, i) => chatBody(o.chunks, i))
  try {
    // Unmeasured: opens every connection and runs the paced read path until the JIT has it.
    const warmBody = chatBody(Math.min(o.chunks, WARM_CHUNKS), 0)
    await closedLoop(o.concurrency, o.concurrency, async () => {
      const obs = await streamCompletion(connections, o.origin, { api: 'chat', body: warmBody, deadlineMs: 10_000 })
      if (obs.error !== null) throw new Error(`ITL warm-up request failed: ${obs.error.code}: ${obs.error.message}`)
    })

    const observations: StreamObservation[] = new Array(requests)
    const cpu0 = process.cpuUsage()
    const t0 = performance.now()
    await closedLoop(o.concurrency, requests, async (i) => {
      // Each response's bytes, kept for the server's "t" stamps: on the measured path only a copy
      // into a preallocated buffer, after the read was stamped, not a second parse.
      const log: ByteLog = { bytes: Buffer.allocUnsafe(1024 + o.chunks * 320), length: 0 }
      logs.set(String(i), log)
      observations[i] = await streamCompletion(connections, o.origin, {
        api: 'chat',
        body: bodies[i] as Buffer,
        onBody: (bytes) => append(log, bytes),
        deadlineMs,
      })
    })
    const wallMs = performance.now() - t0
    const cpu = process.cpuUsage(cpu0)

    const itl: number[] = []
    const client: number[] = []
    const server: number[] = []
    const arrival: number[] = []
    const failures: string[] = []
    let okRequests = 0
    let deliveredTokens = 0
    for (let i = 0; i < requests; i++) {
      const obs = observations[i] as StreamObservation
      const at = obs.outputChunkAt
      const log = logs.get(String(i))
      const stamps = log === undefined ? [] : serverStamps(log.bytes.subarray(0, log.length))
      deliveredTokens += at.length
      if (obs.error === null && at.length === o.chunks && stamps.length === o.chunks) okRequests++
      else if (failures.length < 5) {
        failures.push(
          obs.error === null
            ? `${at.length} chunks timed, ${stamps.length} stamped, ${o.chunks} offered`
            : `${obs.error.code}: ${obs.error.message}`,
        )
      }
      const n = Math.min(at.length, stamps.length)
      for (let k = 0; k < n; k++) {
        const atK = at[k] as number
        const sentK = stamps[k] as number
        // Both stamps are process.hrtime ms (the client's monoMs, the server's "t"): one clock.
        arrival.push(atK - sentK)
        if (k === 0) continue
        const gap = atK - (at[k - 1] as number)
        const sentGap = sentK - (stamps[k - 1] as number)
        itl.push(Math.abs(gap - o.intervalMs))
        client.push(Math.abs(gap - sentGap))
        server.push(Math.abs(sentGap - o.intervalMs))
      }
    }
    const offeredTokens = requests * o.chunks
    return {
      concurrency: o.concurrency,
      requests,
      okRequests,
      deadlineMs,
      itlErrorMs: distribution(itl),
      clientErrorMs: distribution(client),
      serverErrorMs: distribution(server),
      arrivalLatencyMs: distribution(arrival),
      offeredTokens,
      deliveredTokens,
      deliveredShare: deliveredTokens / offeredTokens,
      cpuShare: (cpu.user + cpu.system) / 1000 / wallMs,
      failures,
    }
  } finally {
    await connections.destroy()
  }
}
