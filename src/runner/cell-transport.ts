import { StreamConnections } from '../client/connections.ts'
import { NO_TEXT, type TextCapture } from '../client/observation.ts'
import { prepareCompletion, type StreamObservation, type StreamRequest } from '../client/stream.ts'
import { StreamWorkers } from '../client/stream-workers.ts'
import { probeTokenizer, type TokenizerProbe } from '../client/tokenize.ts'
import { TurnSlice } from '../client/turn-slice.ts'
import type { WorkerMeasure } from '../client/worker-protocol.ts'
import type { ResolvedRunCellOptions } from './cell-options.ts'
import { clientWorkerCount } from './client-workers.ts'

/**
 * How a cell reaches its engine: over HTTP (keep-alive connections) or in-process. Either way each
 * request yields the same observation, so one methodology measures both shapes.
 */
export interface CellTransport {
  /** Sends one request body (model name included); never throws for a request failure. */
  send(body: Buffer, capture: TextCapture, signal: AbortSignal): Promise<StreamObservation>
  /**
   * `send` in two steps: the request's bytes built now, its send when the returned function is
   * called (a closed loop's opening round builds its C requests before they are due). Absent where
   * there is nothing to build ahead (worker threads, an in-process engine).
   */
  prepare?(body: Buffer, capture: TextCapture): (signal: AbortSignal) => Promise<StreamObservation>
  /** The engine's tokenizer for calibration, or null (sizes are then estimated). */
  tokenizer(): Promise<TokenizerProbe | null>
  /**
   * Opens `connections` keep-alive connections before the measured phase (each with a
   * side-effect-free `GET /v1/models`), so its first requests do not pay for connecting (a
   * connection to an engine in another process can take milliseconds on a busy host, and would
   * count as send lag); a transport without connections leaves it out.
   */
  warm?(connections: number): Promise<void>
  /**
   * The turn slices a slot loop makes its ended requests' records in, where the cell's thread
   * reads the chunks itself, so the reads that arrive meanwhile are stamped between slices.
   * Absent where the thread reads no chunks (worker threads, an in-process engine).
   */
  slice?: TurnSlice
  /**
   * The engine runs in this process (an in-process engine): its threads' CPU time is the
   * engine's, so the client's is the cell thread's own. Absent for an engine in another process.
   */
  engineInProcess?: true
  /** The client's worker threads, around the measured phase; absent when it streams in the cell's thread. */
  workers?: { count: number; measureStart(): void; measureStop(): Promise<WorkerMeasure[]> }
  close(): Promise<void>
}

/**
 * Connections an open-loop cell without an in-flight cap opens before it starts (more open as the load
 * needs them, their cost counted as send lag).
 */
const OPEN_LOOP_WARM_CONNECTIONS = 4

/** The connections the measured phase will use from its first request: the concurrency, or the in-flight cap. */
export function connectionsToWarm(o: ResolvedRunCellOptions): number {
  return Math.min(o.requests, o.arrival === null ? o.concurrency : (o.arrival.maxInFlight ?? OPEN_LOOP_WARM_CONNECTIONS))
}

/**
 * The HTTP transport: C keep-alive connections to a loopback origin, in the cell's thread or
 * shared out over worker threads (`clientWorkers`), the engine's cores left to it.
 * @param engineCores the CPU cores the engine takes on this machine (`engineCpuCores`); 1 when unknown
 */
export function httpTransport(o: ResolvedRunCellOptions, origin: string, engineCores = 1): CellTransport {
  const headers = o.apiKey === undefined ? undefined : { authorization: `Bearer ${o.apiKey}` }
  // Open loop: as many connections as requests in flight (the cap, or unbounded), so none waits for one.
  const connections = o.arrival === null ? o.concurrency : o.arrival.maxInFlight
  const workerCount = clientWorkerCount(o.clientWorkers, connections, engineCores)
  const workers =
    workerCount === 0
      ? null
      : new StreamWorkers(workerCount, {
          origin,
          api: o.api,
          model: o.model,
          headers: headers ?? null,
          deadlineMs: o.requestTimeoutMs,
          connections,
        })
  // Streams every request in the cell's thread; with workers each has connections of its own, and
  // these are never used (none opens before a request).
  const dispatcher = new StreamConnections(origin, connections)
  // The turn slices a closed loop makes its ended requests' records in, the reads in between.
  const slice = new TurnSlice()
  const request = (body: Buffer, capture: TextCapture): Omit<StreamRequest, 'signal'> => ({
    api: o.api,
    body,
    headers,
    deadlineMs: o.requestTimeoutMs,
    captureChars: capture.contentChars,
    keepStreamedText: capture.streamed,
    model: o.model,
  })
  const prepare = (body: Buffer, capture: TextCapture) => prepareCompletion(dispatcher, origin, request(body, capture))
  const send: CellTransport['send'] =
    workers === null
      ? (body, capture, signal) => prepare(body, capture)(signal)
      : (body, capture, signal) => workers.send(body, capture, signal)
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
    const obs = await send(body, NO_TEXT, AbortSignal.timeout(o.requestTimeoutMs))
    return obs.usagePromptTokens === null ? null : obs.usagePromptTokens - (await countText(content))
  }
  return {
    send,
    tokenizer: () => probeTokenizer(origin, o.model, o.api === 'chat' ? measureChatOverhead : async () => null, undefined, templateKwargs),
    warm: async (connections) => {
      if (workers !== null) return workers.warm(connections)
      // Best effort: an engine that refuses the extra connections is measured as it is.
      await dispatcher.warm(connections, { path: '/v1/models', headers, timeoutMs: o.requestTimeoutMs })
    },
    ...(workers === null
      ? { slice, prepare }
      : { workers: { count: workers.count, measureStart: () => workers.measureStart(), measureStop: () => workers.measureStop() } }),
    close: async () => {
      await Promise.all([dispatcher.destroy(), workers?.close()])
    },
  }
}
