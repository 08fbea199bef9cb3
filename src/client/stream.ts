import { Client, type Dispatcher } from 'undici'
import { type ErrorCode, sanitizeMessage, ServegateError } from '../errors.ts'
import type { Api, ErrorInfo } from '../schema/run.ts'
import { createSseParser } from './sse.ts'

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
}

/** What the client saw of one request, monotonic ms (performance.now()), before any derivation. */
export interface StreamObservation {
  /** When `dispatch` was called. */
  dispatchedAt: number
  /** When the request bytes were fully handed to the socket (falls back to `dispatchedAt`). */
  sentAt: number
  firstOutputAt: number | null
  firstContentAt: number | null
  endAt: number | null
  /** Arrival time of each chunk carrying a non-empty delta (reasoning or content). */
  outputChunkAt: number[]
  reasoningChunks: number
  contentChunks: number
  usagePromptTokens: number | null
  usageCompletionTokens: number | null
  finishReason: string | null
  httpStatus: number | null
  /** The first `captureChars` characters of content (reasoning excluded). */
  content: string
  /** True when the content was longer than the capture. */
  contentTruncated: boolean
  /** The buffers handed to the socket, as written (for hashing what was sent). */
  sentChunks: Buffer[]
  /** The engine's own timings, where its stream carries them (llama-server's `timings`). */
  engineTimings: Record<string, number> | null
  /** 2 when the first attempt's connection was closed by the server before any response. */
  attempts: number
  /** Null when the request succeeded. */
  error: ErrorInfo | null
}

/** Appends content to an observation's bounded capture; past the bound it marks it truncated. */
export function captureContent(obs: StreamObservation, text: string, captureChars: number): void {
  const room = captureChars - obs.content.length
  if (text.length > room) {
    obs.content += text.slice(0, room)
    obs.contentTruncated = true
  } else {
    obs.content += text
  }
}

export const API_PATHS: Record<Api, string> = {
  chat: '/v1/chat/completions',
  completions: '/v1/completions',
}

const MAX_ERROR_BODY_BYTES = 4096

interface ChunkChoice {
  delta?: { content?: unknown; reasoning_content?: unknown; reasoning?: unknown }
  text?: unknown
  finish_reason?: unknown
}
interface ChunkShape {
  choices?: ChunkChoice[]
  usage?: { prompt_tokens?: unknown; completion_tokens?: unknown } | null
  error?: { message?: unknown } | string
  timings?: Record<string, unknown>
}

function nonEmpty(v: unknown): boolean {
  return typeof v === 'string' && v.length > 0
}

function retryAfterSeconds(value: string | string[] | undefined, nowMs: number): number | null {
  const raw = Array.isArray(value) ? value[0] : value
  if (raw === undefined) return null
  const seconds = Number(raw)
  if (Number.isFinite(seconds) && seconds >= 0) return seconds
  const date = Date.parse(raw)
  return Number.isNaN(date) ? null : Math.max(0, (date - nowMs) / 1000)
}

function httpErrorMessage(status: number, body: Buffer): string {
  const text = body.toString('utf8')
  let detail = text
  try {
    const parsed = JSON.parse(text) as { error?: { message?: unknown } | string; message?: unknown; detail?: unknown }
    const fromError = typeof parsed.error === 'string' ? parsed.error : parsed.error?.message
    const found = [fromError, parsed.message, parsed.detail].find((v) => typeof v === 'string')
    if (typeof found === 'string') detail = found
  } catch {
    // Not JSON: keep the raw (sanitized) text.
  }
  return sanitizeMessage(`HTTP ${status}: ${detail || '(empty body)'}`)
}

/**
 * Streams one OpenAI-compatible completion and records what the client observed. Never
 * throws for a request-level failure: HTTP errors, drops, protocol errors, deadlines, aborts
 * and empty completions come back as `error` with a stable code and partial timings kept.
 *
 * Each read is timestamped when its bytes arrive, before SSE or JSON parsing; every event in
 * that read shares the timestamp (they arrived together).
 */
export async function streamCompletion(dispatcher: Dispatcher, origin: string, req: StreamRequest): Promise<StreamObservation> {
  const first = await streamOnce(dispatcher, origin, req)
  if (first.error?.code !== 'CONNECTION_CLOSED' || req.signal?.aborted === true) return first
  // A keep-alive connection the server closed as the request went out (llama.cpp's server does
  // this beyond its HTTP threads): nothing reached the engine, so the request is sent once more,
  // on a fresh connection, within what is left of its deadline; the record keeps the attempt count.
  const left = req.deadlineMs - (performance.now() - first.dispatchedAt)
  if (left <= 0) return first
  // A connection of its own: the pool's other idle connections may be closing the same way.
  const fresh = new Client(origin, { pipelining: 1 })
  try {
    const second = await streamOnce(fresh, origin, { ...req, deadlineMs: left })
    second.attempts = 2
    return second
  } finally {
    void fresh.destroy()
  }
}

function streamOnce(dispatcher: Dispatcher, origin: string, req: StreamRequest): Promise<StreamObservation> {
  return new Promise((resolve) => {
    // The arrival time of the read being parsed: every event of one read shares it.
    let readAt = 0
    const parser = createSseParser((data) => {
      if (!settled) onEvent(data, readAt)
    })
    const obs: StreamObservation = {
      dispatchedAt: performance.now(),
      sentAt: -1,
      firstOutputAt: null,
      firstContentAt: null,
      endAt: null,
      outputChunkAt: [],
      reasoningChunks: 0,
      contentChunks: 0,
      usagePromptTokens: null,
      usageCompletionTokens: null,
      finishReason: null,
      httpStatus: null,
      content: '',
      contentTruncated: false,
      sentChunks: [],
      engineTimings: null,
      attempts: 1,
      error: null,
    }
    const captureChars = req.captureChars ?? 0
    let settled = false
    let done = false
    let errorBody: Buffer[] | null = null
    let errorBodyBytes = 0
    let retryAfterS: number | null = null
    let controllerRef: Dispatcher.DispatchController | null = null

    const finish = (at: number, error: ErrorInfo | null): void => {
      if (settled) return
      settled = true
      clearTimeout(deadline)
      req.signal?.removeEventListener('abort', onAbort)
      if (obs.sentAt < 0) obs.sentAt = obs.dispatchedAt
      obs.endAt = at
      if (error === null && obs.firstOutputAt === null) {
        error = {
          code: 'EMPTY_COMPLETION',
          message: 'the stream finished without a non-empty delta',
          httpStatus: obs.httpStatus,
          retryAfterS: null,
        }
      }
      obs.error = error
      resolve(obs)
    }
    const fail = (code: ErrorCode, message: string, at = performance.now()): void => {
      finish(at, { code, message: sanitizeMessage(message), httpStatus: obs.httpStatus, retryAfterS })
      controllerRef?.abort(new ServegateError(code, message))
    }

    const deadline = setTimeout(() => {
      fail('REQUEST_DEADLINE', `no end of stream within the ${req.deadlineMs} ms request deadline`)
    }, req.deadlineMs)
    const onAbort = (): void => fail('REQUEST_ABORTED', 'cancelled by the caller')
    if (req.signal?.aborted) {
      queueMicrotask(onAbort)
    } else {
      req.signal?.addEventListener('abort', onAbort, { once: true })
    }

    const capture = (text: string): void => captureContent(obs, text, captureChars)

    const onEvent = (data: string, at: number): void => {
      if (data === '[DONE]') {
        done = true
        return
      }
      let chunk: ChunkShape
      try {
        chunk = JSON.parse(data) as ChunkShape
      } catch {
        fail('STREAM_PROTOCOL', `malformed data line (not JSON): ${data.slice(0, 80)}`, at)
        return
      }
      if (chunk === null || typeof chunk !== 'object') {
        fail('STREAM_PROTOCOL', `data line is not a JSON object: ${data.slice(0, 80)}`, at)
        return
      }
      if (chunk.error !== undefined) {
        const message = typeof chunk.error === 'string' ? chunk.error : String(chunk.error?.message ?? 'unknown error')
        fail('STREAM_ERROR_EVENT', `the server sent an error event: ${message}`, at)
        return
      }
      const choice = chunk.choices?.[0]
      if (choice !== undefined) {
        const delta = choice.delta
        const reasoning = delta !== undefined && (nonEmpty(delta.reasoning_content) || nonEmpty(delta.reasoning))
        const text = delta !== undefined ? delta.content : choice.text
        const content = nonEmpty(text)
        if (content && captureChars > 0 && !obs.contentTruncated) capture(text as string)
        if (reasoning || content) {
          obs.outputChunkAt.push(at)
          if (obs.firstOutputAt === null) obs.firstOutputAt = at
          if (reasoning) obs.reasoningChunks++
          if (content) {
            obs.contentChunks++
            if (obs.firstContentAt === null) obs.firstContentAt = at
          }
        }
        if (typeof choice.finish_reason === 'string') obs.finishReason = choice.finish_reason
      }
      if (chunk.timings !== undefined && chunk.timings !== null && typeof chunk.timings === 'object') {
        const numeric: Record<string, number> = {}
        for (const [k, v] of Object.entries(chunk.timings)) if (typeof v === 'number' && Number.isFinite(v)) numeric[k] = v
        obs.engineTimings = numeric
      }
      const usage = chunk.usage
      if (usage !== undefined && usage !== null) {
        if (typeof usage.prompt_tokens === 'number') obs.usagePromptTokens = usage.prompt_tokens
        if (typeof usage.completion_tokens === 'number') obs.usageCompletionTokens = usage.completion_tokens
      }
    }

    const handler: Dispatcher.DispatchHandler = {
      onRequestStart(controller) {
        controllerRef = controller
        if (settled) controller.abort(new ServegateError('REQUEST_ABORTED', 'settled before start'))
      },
      onBodySent(chunk) {
        obs.sentChunks.push(Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk))
      },
      onRequestSent() {
        obs.sentAt = performance.now()
      },
      onResponseStart(_controller, statusCode, headers) {
        obs.httpStatus = statusCode
        if (statusCode < 200 || statusCode >= 300) {
          errorBody = []
          if (statusCode === 429) retryAfterS = retryAfterSeconds(headers['retry-after'], Date.now())
        }
      },
      onResponseData(_controller, bytes) {
        const at = performance.now()
        if (settled) return
        if (errorBody !== null) {
          if (errorBodyBytes < MAX_ERROR_BODY_BYTES) {
            errorBody.push(bytes)
            errorBodyBytes += bytes.length
          }
          return
        }
        readAt = at
        parser.push(bytes)
        if (done && !settled) finish(at, null)
      },
      onResponseEnd() {
        const at = performance.now()
        if (settled) return
        if (errorBody !== null) {
          const status = obs.httpStatus ?? 0
          const code: ErrorCode = status === 429 ? 'HTTP_RATE_LIMITED' : 'HTTP_STATUS'
          const note = status === 429 && retryAfterS !== null ? ` (Retry-After ${retryAfterS} s)` : ''
          finish(at, { code, message: httpErrorMessage(status, Buffer.concat(errorBody)) + note, httpStatus: status, retryAfterS })
          return
        }
        readAt = at
        parser.end()
        if (settled) return
        if (done || obs.finishReason !== null) finish(at, null)
        else fail('STREAM_DROPPED', 'the stream ended without [DONE] or a finish_reason', at)
      },
      onResponseError(_controller, err) {
        const at = performance.now()
        if (settled) return
        const code = (err as { code?: string }).code ?? ''
        const connectFailed =
          obs.httpStatus === null && /ECONNREFUSED|ENOTFOUND|EHOSTUNREACH|ECONNRESET|UND_ERR_CONNECT/.test(`${code} ${err.message}`)
        if (connectFailed && obs.sentAt < 0) {
          fail('CONNECT_FAILED', `cannot connect to ${origin}: ${code || err.message}`, at)
        } else if (obs.httpStatus === null) {
          fail('CONNECTION_CLOSED', `the server closed the connection before any response: ${code || err.message}`, at)
        } else {
          fail('STREAM_DROPPED', `the connection closed mid-stream: ${code || err.message}`, at)
        }
      },
    }

    try {
      dispatcher.dispatch(
        {
          origin,
          path: API_PATHS[req.api],
          method: 'POST',
          body: req.body,
          headers: { 'content-type': 'application/json', accept: 'text/event-stream', ...req.headers },
          headersTimeout: 0,
          bodyTimeout: 0,
        },
        handler,
      )
    } catch (err) {
      fail('INTERNAL', `dispatch failed: ${(err as Error).message}`)
    }
  })
}
