import { ServegateError } from '../errors.ts'
import type { Api } from '../schema/run.ts'
import { ChunkInterpreter } from './chunk-interpreter.ts'
import { type PreparedRequest, StreamConnections, type WireExchange, type WireHandler, type WireRequest } from './connections.ts'
import type { StreamObservation } from './observation.ts'
import { monoMs } from './clock.ts'

// Callers take the observation and its helpers from the client's entry, beside streamCompletion.
export { captureContent, emptyObservation, type StreamObservation } from './observation.ts'

/** One streaming request, its body already serialized (the bytes both arms receive). */
export interface StreamRequest {
  api: Api
  /** Request body bytes (JSON with `stream: true`). */
  body: Buffer
  /** Extra headers, e.g. `authorization`; never recorded. */
  headers?: Record<string, string>
  /** Per-request deadline from dispatch to the end of the stream, ms. */
  deadlineMs: number
  signal?: AbortSignal
  /** Characters of content (never reasoning) to keep for canaries and scoring; 0 keeps none. @default 0 */
  captureChars?: number
  /** Keep every delta's text, reasoning and content, as `obs.streamedText` (the usage cross-check). @default false */
  keepStreamedText?: boolean
  /** Bytes one SSE line may hold before the request fails as STREAM_PROTOCOL. @default 4 MiB */
  maxSseLineBytes?: number
  /** The model name the body starts with, left out of the wire digest's body hash (`obs.sent`). @default none */
  model?: string
  /**
   * Sees every piece of the reply's body, de-chunked, after its read was stamped (a bench reads
   * the server's stamps in it); the bytes are valid only during the call.
   */
  onBody?: (bytes: Uint8Array) => void
}

const API_PATHS: Record<Api, string> = {
  chat: '/v1/chat/completions',
  completions: '/v1/completions',
}

/**
 * Streams one OpenAI-compatible completion and records what the client observed. Never
 * throws for a request-level failure: HTTP errors, drops, protocol errors, deadlines, aborts
 * and empty completions come back as `error` with a stable code and partial timings kept.
 *
 * Each read is timestamped when its bytes arrive, before SSE or JSON parsing; every event in
 * that read shares the timestamp (they arrived together).
 */
export function streamCompletion(connections: StreamConnections, origin: string, req: StreamRequest): Promise<StreamObservation> {
  return completion(connections, origin, req, connections.prepare(wireRequest(req)))
}

/**
 * {@link streamCompletion} with the request's bytes built now, so that its send, when the
 * returned function is called (with the request's abort signal, if any), is a socket write and the
 * set-up of its reading: a closed loop's opening round, C requests due at one instant, builds them
 * before the round starts.
 * @example const go = prepareCompletion(connections, origin, req); … const obs = await go(signal)
 */
export function prepareCompletion(
  connections: StreamConnections,
  origin: string,
  req: Omit<StreamRequest, 'signal'>,
): (signal?: AbortSignal) => Promise<StreamObservation> {
  const wire = connections.prepare(wireRequest(req))
  return (signal) => completion(connections, origin, signal === undefined ? req : { ...req, signal }, wire)
}

function wireRequest(req: Omit<StreamRequest, 'signal'>): WireRequest {
  return {
    method: 'POST',
    path: API_PATHS[req.api],
    headers: { 'content-type': 'application/json', accept: 'text/event-stream', ...req.headers },
    body: req.body,
  }
}

async function completion(
  connections: StreamConnections,
  origin: string,
  req: StreamRequest,
  wire: PreparedRequest,
): Promise<StreamObservation> {
  const first = await streamOnce(connections, origin, req, wire)
  if (first.error?.code !== 'CONNECTION_CLOSED' || req.signal?.aborted === true) return first
  // A keep-alive connection the server closed as the request went out (llama.cpp's server does
  // this beyond its HTTP threads), before a single byte of reply: nothing reached the engine, so
  // the request is sent once more. Anything the server answered, even a malformed status line, is
  // a reply (STREAM_PROTOCOL, RESPONSE_NOT_STREAM…) and is never resent: the engine may have done
  // the work. The one resend goes on a fresh connection, within what is left of the deadline; the
  // record keeps the attempt count.
  const left = req.deadlineMs - (monoMs() - first.dispatchedAt)
  if (left <= 0) return first
  // A connection of its own: the others' idle connections may be closing the same way.
  const fresh = new StreamConnections(origin, 1)
  try {
    const second = await streamOnce(fresh, origin, { ...req, deadlineMs: left }, wire)
    second.attempts = 2
    return second
  } finally {
    void fresh.destroy()
  }
}

/**
 * The callbacks waiting on each signal, behind one listener a signal. A cell's requests share its
 * signal, and an `AbortSignal` checks every listener already added for a duplicate: hundreds of
 * requests in flight made each `addEventListener` cost tens of microseconds of a send.
 */
const abortWaiters = new WeakMap<AbortSignal, Set<() => void>>()

function whenAborted(signal: AbortSignal, callback: () => void): void {
  let waiters = abortWaiters.get(signal)
  if (waiters === undefined) {
    const set = new Set<() => void>()
    waiters = set
    abortWaiters.set(signal, set)
    signal.addEventListener(
      'abort',
      () => {
        abortWaiters.delete(signal)
        for (const waiter of set) waiter()
      },
      { once: true },
    )
  }
  waiters.add(callback)
}

function forgetAbort(signal: AbortSignal, callback: () => void): void {
  abortWaiters.get(signal)?.delete(callback)
}

/** One attempt: a connection, the deadline and the caller's abort around a ChunkInterpreter, which it feeds timestamped reads. */
function streamOnce(connections: StreamConnections, origin: string, req: StreamRequest, wire: PreparedRequest): Promise<StreamObservation> {
  return new Promise((resolve) => {
    let exchange: WireExchange | null = null
    const interpreter = new ChunkInterpreter({
      dispatchedAt: monoMs(),
      captureChars: req.captureChars ?? 0,
      keepStreamedText: req.keepStreamedText ?? false,
      origin,
      maxSseLineBytes: req.maxSseLineBytes,
      model: req.model ?? null,
      onSettle(obs, abortWith) {
        clearTimeout(deadline)
        if (req.signal !== undefined) forgetAbort(req.signal, onAbort)
        resolve(obs)
        if (abortWith !== null) exchange?.abort(abortWith)
      },
    })

    const deadline = setTimeout(() => {
      interpreter.fail('REQUEST_DEADLINE', `no end of stream within the ${req.deadlineMs} ms request deadline`, monoMs())
    }, req.deadlineMs)
    const onAbort = (): void => interpreter.fail('REQUEST_ABORTED', 'cancelled by the caller', monoMs())
    if (req.signal?.aborted) {
      queueMicrotask(onAbort)
    } else if (req.signal !== undefined) {
      whenAborted(req.signal, onAbort)
    }

    // Each read arrives here stamped in the socket's data callback, before anything of it is parsed.
    const handler: WireHandler = {
      onSent(body, at) {
        if (body !== null) interpreter.onBodySent(body)
        interpreter.onRequestSent(at)
      },
      onHead(status, headers) {
        interpreter.onResponseStart(status, headers, Date.now())
      },
      onBody(bytes, at) {
        req.onBody?.(bytes)
        interpreter.onResponseData(bytes, at)
      },
      onEnd(at) {
        interpreter.onResponseEnd(at)
      },
      onError(err, at) {
        interpreter.onResponseError(err, at)
      },
    }

    try {
      exchange = connections.send(wire, handler)
      if (interpreter.settled) exchange.abort(new ServegateError('REQUEST_ABORTED', 'settled before it was sent'))
    } catch (err) {
      interpreter.fail('INTERNAL', `dispatch failed: ${(err as Error).message}`, monoMs())
    }
  })
}
