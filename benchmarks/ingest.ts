import { StreamConnections } from '../src/client/connections.ts'
import { streamCompletion, type StreamObservation } from '../src/client/stream.ts'
import { MODEL } from './chunks.ts'

export interface IngestOptions {
  /** Zero-delay server origin. */
  origin: string
  concurrency: number
  /** Measured requests, closed loop. */
  requests: number
  /** Completion tokens per response (one per chunk). */
  tokens: number
  /** Per-request deadline, ms. */
  deadlineMs: number
}

/** What one measured ingest run saw. */
export interface IngestResult {
  concurrency: number
  requests: number
  /** Requests with no error, `tokens` usage completion tokens and as many content chunks. */
  okRequests: number
  /** Sum of usage completion tokens over all requests. */
  completionTokens: number
  wallS: number
  /** completionTokens / wallS */
  tokPerS: number
  /** Client process CPU time (user + system) over wall time; 1 = one core busy. */
  cpuShare: number
  /** The first few failures, `code: message`. */
  failures: string[]
}

/** Closed-loop request loop: `concurrency` workers take the next index until `requests` are done. */
export async function closedLoop(concurrency: number, requests: number, run: (index: number) => Promise<void>): Promise<void> {
  let next = 0
  const worker = async (): Promise<void> => {
    while (next < requests) await run(next++)
  }
  await Promise.all(Array.from({ length: Math.min(concurrency, requests) }, worker))
}

/**
 * The chat request body of request `index` asking for `tokens` tokens. The bench servers read
 * only `max_tokens`; the prompt is a short unique line, as a workload's would be.
 */
export function chatBody(tokens: number, index: number): Buffer {
  return Buffer.from(
    JSON.stringify({
      model: MODEL,
      messages: [
        { role: 'user', content: `Request ${index}. Summarize the following notes in a few sentences: the client reads every chunk.` },
      ],
      max_tokens: tokens,
      stream: true,
      stream_options: { include_usage: true },
    }),
  )
}

function okFor(obs: StreamObservation, tokens: number): boolean {
  return obs.error === null && obs.usageCompletionTokens === tokens && obs.contentChunks === tokens && obs.outputChunkAt.length === tokens
}

/**
 * Measures how many output tokens per second the client ingests from a zero-delay server at
 * one concurrency: fresh `StreamConnections` (as many as the concurrency, as a cell has), every
 * connection opened by an unmeasured short request first, then `requests` measured requests,
 * closed loop.
 */
export async function measureIngest(o: IngestOptions): Promise<IngestResult> {
  const connections = new StreamConnections(o.origin, o.concurrency)
  const bodies = Array.from({ length: o.requests }, (_, i) => chatBody(o.tokens, i))
  try {
    const warmBody = chatBody(8, 0)
    await closedLoop(o.concurrency, o.concurrency, async () => {
      const obs = await streamCompletion(connections, o.origin, { api: 'chat', body: warmBody, deadlineMs: o.deadlineMs })
      if (obs.error !== null) throw new Error(`ingest warm-up request failed: ${obs.error.code}: ${obs.error.message}`)
    })

    let okRequests = 0
    let completionTokens = 0
    const failures: string[] = []
    const cpu0 = process.cpuUsage()
    const t0 = performance.now()
    await closedLoop(o.concurrency, o.requests, async (i) => {
      const obs = await streamCompletion(connections, o.origin, { api: 'chat', body: bodies[i] as Buffer, deadlineMs: o.deadlineMs })
      completionTokens += obs.usageCompletionTokens ?? 0
      if (okFor(obs, o.tokens)) okRequests++
      else if (failures.length < 5) {
        failures.push(
          obs.error === null
            ? `contents: ${obs.contentChunks} chunks, usage ${obs.usageCompletionTokens}`
            : `${obs.error.code}: ${obs.error.message}`,
        )
      }
    })
    const wallMs = performance.now() - t0
    const cpu = process.cpuUsage(cpu0)
    return {
      concurrency: o.concurrency,
      requests: o.requests,
      okRequests,
      completionTokens,
      wallS: wallMs / 1000,
      tokPerS: completionTokens / (wallMs / 1000),
      cpuShare: (cpu.user + cpu.system) / 1000 / wallMs,
      failures,
    }
  } finally {
    await connections.destroy()
  }
}
