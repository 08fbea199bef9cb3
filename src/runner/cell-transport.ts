import { Pool } from 'undici'
import { streamCompletion, type StreamObservation } from '../client/stream.ts'
import { probeTokenizer, type TokenizerProbe } from '../client/tokenize.ts'
import type { ResolvedCellOptions } from './cell-options.ts'

/**
 * How a cell reaches its engine: over HTTP (an undici pool) or in-process. Either way each
 * request yields the same observation, so one methodology measures both shapes.
 */
export interface CellTransport {
  /** Sends one request body (model name included); never throws for a request failure. */
  send(body: Buffer, captureChars: number, signal: AbortSignal): Promise<StreamObservation>
  /** The engine's tokenizer for calibration, or null (sizes are then estimated). */
  tokenizer(): Promise<TokenizerProbe | null>
  /**
   * Opens `connections` keep-alive connections before the measured phase (each with a
   * side-effect-free `GET /v1/models`), so its first requests do not pay for connecting (a
   * connection to an engine in another process can take milliseconds on a busy host, and would
   * count as send lag); a transport without connections leaves it out.
   */
  warm?(connections: number): Promise<void>
  close(): Promise<void>
}

/**
 * Connections an open-loop cell without an in-flight cap opens before it starts (more open as the load
 * needs them, their cost counted as send lag).
 */
export const OPEN_LOOP_WARM_CONNECTIONS = 4

/** The connections the measured phase will use from its first request: the concurrency, or the in-flight cap. */
export function connectionsToWarm(o: ResolvedCellOptions): number {
  return Math.min(o.requests, o.arrival === null ? o.concurrency : (o.arrival.maxInFlight ?? OPEN_LOOP_WARM_CONNECTIONS))
}

/** The HTTP transport: a pool of C keep-alive connections to a loopback origin. */
export function httpTransport(o: ResolvedCellOptions, origin: string): CellTransport {
  const headers = o.apiKey === undefined ? undefined : { authorization: `Bearer ${o.apiKey}` }
  // Open loop: as many connections as requests in flight (the cap, or unbounded), so none waits in the pool.
  const connections = o.arrival === null ? o.concurrency : o.arrival.maxInFlight
  const pool = new Pool(origin, { connections, pipelining: 1, keepAliveTimeout: 60_000 })
  const send: CellTransport['send'] = (body, captureChars, signal) =>
    streamCompletion(pool, origin, { api: o.api, body, headers, deadlineMs: o.requestTimeoutMs, signal, captureChars })
  // The chat requests' chat_template_kwargs, so prompts are counted through the template they get.
  const thinking = o.workload.sampling.thinking
  const templateKwargs = o.api === 'chat' && thinking !== undefined ? { enable_thinking: thinking === 'enabled' } : null
  // The template cost of a chat prompt, where the tokenizer cannot apply the template itself:
  // one single-token request whose usage.prompt_tokens is compared with the text's count.
  const measureChatOverhead = async (countText: (text: string) => Promise<number>): Promise<number | null> => {
    const content = 'Hello there, tokenizer.'
    const body = Buffer.from(
      JSON.stringify({
        model: o.model,
        messages: [{ role: 'user', content }],
        ...(templateKwargs === null ? {} : { chat_template_kwargs: templateKwargs }),
        max_tokens: 1,
        stream: true,
        stream_options: { include_usage: true },
      }),
    )
    const obs = await send(body, 0, AbortSignal.timeout(o.requestTimeoutMs))
    return obs.usagePromptTokens === null ? null : obs.usagePromptTokens - (await countText(content))
  }
  const warmOne = async (): Promise<void> => {
    const res = await pool.request({ method: 'GET', path: '/v1/models', headers, signal: AbortSignal.timeout(o.requestTimeoutMs) })
    await res.body.dump()
  }
  return {
    send,
    tokenizer: () => probeTokenizer(origin, o.model, o.api === 'chat' ? measureChatOverhead : async () => null, undefined, templateKwargs),
    warm: async (connections) => {
      // Best effort: an engine that refuses the extra connections is measured as it is.
      await Promise.allSettled(Array.from({ length: connections }, warmOne))
    },
    close: () => pool.destroy(),
  }
}
