import { type ErrorCode, sanitizeMessage, ServegateError } from '../errors.ts'
import type { ErrorInfo } from '../schema/run.ts'
import { captureContent, ChunkStamps, emptyObservation, type StreamObservation } from './observation.ts'
import { digestSent } from './sent-digest.ts'
import { createSseParser, DEFAULT_MAX_SSE_LINE_BYTES, type SseParser } from './sse.ts'
import { TextChunkShape } from './text-chunk-shape.ts'

const MAX_ERROR_BODY_BYTES = 4096
/** Bytes of a 2xx reply that is not an event stream kept as its evidence; it fails once it has them. */
const NOT_STREAM_EVIDENCE_BYTES = 512
/** `sentAt` until the request bytes have been handed to the socket. */
const NOT_SENT = -1

interface ChunkChoice {
  delta?: { content?: unknown; reasoning_content?: unknown; reasoning?: unknown }
  text?: unknown
  finish_reason?: unknown
}
interface ChunkShape {
  choices?: ChunkChoice[]
  usage?: { prompt_tokens?: unknown; completion_tokens?: unknown; prompt_tokens_details?: { cached_tokens?: unknown } | null } | null
  error?: { message?: unknown } | string
  /**
   * An OpenAI-style ErrorResponse put bare on a data line, as older engine stream handlers did:
   * `{"object":"error","message":…}` (the shape vLLM's pre-2025 and TensorRT-LLM's ErrorResponse serialize to).
   */
  object?: unknown
  message?: unknown
  timings?: Record<string, unknown>
}

/** A usage count as sent: the number, NaN when it is something else, null when absent. */
function usageNumber(v: unknown): number | null {
  if (v === undefined || v === null) return null
  return typeof v === 'number' ? v : Number.NaN
}

/** A cached-token count as an engine reports it: a whole number ≥ 0, else null (absent, or not a count). */
function cachedCount(v: unknown): number | null {
  return typeof v === 'number' && Number.isSafeInteger(v) && v >= 0 ? v : null
}

function nonEmpty(v: unknown): boolean {
  return typeof v === 'string' && v.length > 0
}

/**
 * The chunk's content text when that is all it carries (no reasoning, finish reason, usage,
 * timings or error), else null: the chunks a {@link TextChunkShape} may learn from.
 */
function soleText(chunk: ChunkShape): string | null {
  if (chunk.error !== undefined || chunk.object === 'error') return null
  if ((chunk.usage !== undefined && chunk.usage !== null) || (chunk.timings !== undefined && chunk.timings !== null)) return null
  const choice = chunk.choices?.[0]
  if (choice === undefined || typeof choice.finish_reason === 'string') return null
  const delta = choice.delta
  if (delta !== undefined && (nonEmpty(delta.reasoning_content) || nonEmpty(delta.reasoning))) return null
  const text = delta !== undefined ? delta.content : choice.text
  return nonEmpty(text) ? (text as string) : null
}

/** {@link soleText} of a chunk's data, null where it is not a JSON object. */
function parsedSoleText(data: string): string | null {
  try {
    const chunk = JSON.parse(data) as ChunkShape | null
    return chunk !== null && typeof chunk === 'object' ? soleText(chunk) : null
  } catch {
    return null
  }
}

function retryAfterSeconds(value: string | string[] | undefined, nowMs: number): number | null {
  const raw = Array.isArray(value) ? value[0] : value
  if (raw === undefined) return null
  const seconds = Number(raw)
  if (Number.isFinite(seconds) && seconds >= 0) return seconds
  const date = Date.parse(raw)
  return Number.isNaN(date) ? null : Math.max(0, (date - nowMs) / 1000)
}

/** The host a 3xx's Location points to; `no Location` or `a relative Location` where it names none. */
function locationHost(value: string | string[] | undefined): string {
  const raw = Array.isArray(value) ? value[0] : value
  if (raw === undefined) return 'no Location'
  try {
    return new URL(raw).host
  } catch {
    return 'a relative Location'
  }
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

/** How a {@link ChunkInterpreter} starts. */
export interface ChunkInterpreterOptions {
  /** When the request was dispatched, monotonic ms. */
  dispatchedAt: number
  /** Characters of content (never reasoning) to keep; 0 keeps none. */
  captureChars: number
  /** Keep every delta's text, reasoning and content, as `obs.streamedText`. @default false */
  keepStreamedText?: boolean
  /** The server's origin, named when the connection cannot be opened. */
  origin: string
  /** Bytes one SSE line (or one event's data) may hold before the request fails as STREAM_PROTOCOL. @default 4 MiB */
  maxSseLineBytes?: number
  /** The model name the body was built with: its member is left out of the wire digest's body hash. @default null */
  model?: string | null
  /**
   * Called once, when the observation is final. `abortWith` is set when the interpreter failed
   * the request while the exchange may still be running: the caller aborts the request with it.
   */
  onSettle: (obs: StreamObservation, abortWith: ServegateError | null) => void
}

/**
 * Turns one OpenAI-compatible streaming exchange into its {@link StreamObservation}. Its methods
 * are the exchange's events, each with its arrival time (monotonic ms): it does no I/O and reads
 * no clock, so a test drives it with literal bytes and times. Request-level failures (HTTP
 * statuses, drops, protocol errors, error events, empty completions) settle it with a stable
 * code; the first settlement wins and later events are ignored.
 *
 * Every SSE event completed by one read gets that read's arrival time (they arrived together).
 * @example
 * const it = new ChunkInterpreter({ dispatchedAt: 0, captureChars: 0, origin, onSettle: (obs) => console.log(obs.contentChunks) })
 * it.onResponseStart(200, {}, Date.now())
 * it.onResponseData(Buffer.from('data: {"choices":[{"delta":{"content":"hi"}}]}\n\ndata: [DONE]\n\n'), 12.5) // logs 1
 */
export class ChunkInterpreter {
  /** The observation being built; final once {@link settled}. */
  readonly obs: StreamObservation
  private readonly captureChars: number
  private readonly origin: string
  private readonly onSettle: ChunkInterpreterOptions['onSettle']
  private readonly parser: SseParser
  private isSettled = false
  /** `[DONE]` arrived: the read that carried it settles the request. */
  private done = false
  /** Non-null for a non-2xx response: its body is evidence, not a stream. */
  private errorBody: Uint8Array[] | null = null
  /** Set for a 2xx reply whose content type is not an event stream: its first bytes are evidence. */
  private notStreamType: string | null = null
  private errorBodyBytes = 0
  private retryAfterS: number | null = null
  /** A 3xx's Location host, named in its failure: the client never follows a redirect. */
  private redirectHost: string | null = null
  /** The arrival time of the read being parsed. */
  private readAt = 0
  private readonly stamps = new ChunkStamps()
  /** This stream's text chunk, learned: its next chunks' texts are read without a parse. */
  private readonly shape = new TextChunkShape()
  /** Where `obs.cachedPromptTokens` came from so far: usage's details outrank llama.cpp's `timings.cache_n`. */
  private cachedFrom: 'usage' | 'timings' | null = null
  /** The pieces handed to the socket, until the request settles and they are digested. */
  private sentPieces: Uint8Array[] = []
  private readonly model: string | null

  constructor(options: ChunkInterpreterOptions) {
    this.obs = emptyObservation(options.dispatchedAt, NOT_SENT)
    this.captureChars = options.captureChars
    this.origin = options.origin
    this.onSettle = options.onSettle
    this.model = options.model ?? null
    if (options.keepStreamedText === true) this.obs.streamedText = ''
    this.parser = createSseParser((data) => this.onEvent(data, this.readAt), {
      maxLineBytes: options.maxSseLineBytes ?? DEFAULT_MAX_SSE_LINE_BYTES,
    })
  }

  /** True once the observation is final. */
  get settled(): boolean {
    return this.isSettled
  }

  /** Request bytes were handed to the socket; they are held only until the request is sent. */
  onBodySent(chunk: Uint8Array): void {
    this.sentPieces.push(chunk)
  }

  /**
   * The whole request was handed to the socket at `at`. What was written is digested when the
   * request settles, not now: a send costs the thread no hashing.
   */
  onRequestSent(at: number): void {
    this.obs.sentAt = at
  }

  /** Keeps what was written as its digest, and lets the pieces go. */
  private digestPieces(): void {
    if (this.sentPieces.length === 0) return
    this.obs.sent = digestSent(this.sentPieces, this.model)
    this.sentPieces = []
  }

  /**
   * The response status and headers arrived. A non-2xx body, or a 2xx one whose content type is
   * not `text/event-stream` (a proxy's HTML page, a non-streaming JSON reply), is kept as evidence
   * instead of parsed. A missing content type is read as a stream.
   * @param wallMs the wall clock (Date.now()), to read a 429's `Retry-After` given as a date
   */
  onResponseStart(statusCode: number, headers: Readonly<Record<string, string | string[] | undefined>>, wallMs: number): void {
    this.obs.httpStatus = statusCode
    if (statusCode < 200 || statusCode >= 300) {
      this.errorBody = []
      if (statusCode === 429) this.retryAfterS = retryAfterSeconds(headers['retry-after'], wallMs)
      if (statusCode >= 300 && statusCode < 400) this.redirectHost = locationHost(headers.location)
      return
    }
    const raw = headers['content-type']
    const type = (Array.isArray(raw) ? raw[0] : raw)?.trim()
    if (type !== undefined && type !== '' && !/^text\/event-stream\s*(;|$)/i.test(type)) {
      this.notStreamType = type
      this.errorBody = []
    }
  }

  /** One read of the response body arrived at `at`; a read that completes `[DONE]` settles the request. */
  onResponseData(bytes: Uint8Array, at: number): void {
    if (this.isSettled) return
    const errorBody = this.errorBody
    if (errorBody !== null) {
      if (this.errorBodyBytes < MAX_ERROR_BODY_BYTES) {
        errorBody.push(Buffer.from(bytes)) // the read's buffer is reused once this returns
        this.errorBodyBytes += bytes.length
      }
      // Enough of a reply that is not a stream to show what it is: no need to wait for the rest.
      if (this.notStreamType !== null && this.errorBodyBytes >= NOT_STREAM_EVIDENCE_BYTES) this.failNotStream(at)
      return
    }
    this.readAt = at
    try {
      this.parser.push(bytes)
    } catch (err) {
      this.failParser(err, at)
      return
    }
    if (this.done && !this.isSettled) this.settle(at, null, null)
  }

  /** The response ended cleanly at `at`: a stream without `[DONE]` or a finish reason was dropped. */
  onResponseEnd(at: number): void {
    if (this.isSettled) return
    if (this.notStreamType !== null) {
      this.failNotStream(at)
      return
    }
    if (this.errorBody !== null) {
      const status = this.obs.httpStatus ?? 0
      const code: ErrorCode = status === 429 ? 'HTTP_RATE_LIMITED' : 'HTTP_STATUS'
      const retryAfterS = this.retryAfterS
      const note =
        status === 429 && retryAfterS !== null
          ? ` (Retry-After ${Math.round(retryAfterS)} s)`
          : this.redirectHost !== null
            ? ` (a redirect to ${this.redirectHost}: never followed)`
            : ''
      const message = httpErrorMessage(status, Buffer.concat(this.errorBody)) + note
      this.settle(at, { code, message, httpStatus: status, retryAfterS }, null)
      return
    }
    this.readAt = at
    try {
      this.parser.end()
    } catch (err) {
      this.failParser(err, at)
      return
    }
    if (this.isSettled) return
    if (this.done || this.obs.finishReason !== null) this.settle(at, null, null)
    else this.fail('STREAM_DROPPED', 'the stream ended without [DONE] or a finish_reason', at)
  }

  /**
   * The exchange broke at `at`: a connect failure, a close before any response, a response that
   * is not HTTP (its status line or headers malformed: the server answered, so the request is
   * never sent again), or a drop mid-stream.
   */
  onResponseError(err: Error, at: number): void {
    if (this.isSettled) return
    const code = (err as { code?: string }).code ?? ''
    const obs = this.obs
    const connectFailed =
      obs.httpStatus === null && /ECONNREFUSED|ENOTFOUND|EHOSTUNREACH|ECONNRESET|UND_ERR_CONNECT/.test(`${code} ${err.message}`)
    if (connectFailed && obs.sentAt < 0) {
      this.fail('CONNECT_FAILED', `cannot connect to ${this.origin}: ${code || err.message}`, at)
    } else if (obs.httpStatus === null && (code.startsWith('HPE_') || err.name === 'HTTPParserError')) {
      const what = /HPE_INVALID_(STATUS|CONSTANT|VERSION)/.test(code) || /status/i.test(err.message) ? 'status line' : 'head'
      this.fail('STREAM_PROTOCOL', `the server's reply is not valid HTTP (malformed ${what}): ${err.message}`, at)
    } else if (obs.httpStatus === null) {
      this.fail('CONNECTION_CLOSED', `the server closed the connection before any response: ${code || err.message}`, at)
    } else {
      this.fail('STREAM_DROPPED', `the connection closed mid-stream: ${code || err.message}`, at)
    }
  }

  /** One SSE event's `data`, arrived at `at`: an OpenAI stream chunk, an error event or `[DONE]`. */
  onEvent(data: string, at: number): void {
    if (this.isSettled) return
    if (data === '[DONE]') {
      this.done = true
      return
    }
    const known = this.shape.textOf(data)
    if (known === null) this.onParsedEvent(data, at)
    else if (known.length > 0) this.onContent(known, at)
  }

  /** An event whose chunk is not this stream's learned text chunk: parsed whole. */
  private onParsedEvent(data: string, at: number): void {
    let chunk: ChunkShape
    try {
      chunk = JSON.parse(data) as ChunkShape
    } catch {
      this.fail('STREAM_PROTOCOL', `malformed data line (not JSON): ${data.slice(0, 80)}`, at)
      return
    }
    if (chunk === null || typeof chunk !== 'object') {
      this.fail('STREAM_PROTOCOL', `data line is not a JSON object: ${data.slice(0, 80)}`, at)
      return
    }
    if (chunk.error !== undefined || chunk.object === 'error') {
      const fromError = typeof chunk.error === 'string' ? chunk.error : chunk.error?.message
      const message = [fromError, chunk.message].find((v) => typeof v === 'string' && v.length > 0) ?? 'unknown error'
      this.fail('STREAM_ERROR_EVENT', `the server sent an error event: ${String(message)}`, at)
      return
    }
    const obs = this.obs
    const choice = chunk.choices?.[0]
    if (choice !== undefined) {
      const delta = choice.delta
      const thought = delta === undefined ? undefined : nonEmpty(delta.reasoning_content) ? delta.reasoning_content : delta.reasoning
      const reasoning = nonEmpty(thought)
      const text = delta !== undefined ? delta.content : choice.text
      const content = nonEmpty(text)
      if (reasoning) {
        if (obs.streamedText !== null) obs.streamedText += thought as string
        this.stamps.push(at)
        if (obs.firstOutputAt === null) obs.firstOutputAt = at
        obs.reasoningChunks++
      }
      if (content) this.onContent(text as string, at, !reasoning)
      if (typeof choice.finish_reason === 'string') obs.finishReason = choice.finish_reason
    }
    if (chunk.timings !== undefined && chunk.timings !== null && typeof chunk.timings === 'object') {
      const numeric: Record<string, number> = {}
      for (const [k, v] of Object.entries(chunk.timings)) if (typeof v === 'number' && Number.isFinite(v)) numeric[k] = v
      obs.engineTimings = numeric
      // llama.cpp's own count of prompt tokens its slot cache held; usage's figure, where sent, wins.
      if (this.cachedFrom !== 'usage') {
        const cacheN = cachedCount(chunk.timings['cache_n'])
        if (cacheN !== null) {
          obs.cachedPromptTokens = cacheN
          this.cachedFrom = 'timings'
        }
      }
    }
    const usage = chunk.usage
    if (usage !== undefined && usage !== null) {
      // Kept as sent, however wrong: the record's cross-check judges it. Sent but not a number is NaN.
      obs.usagePromptTokens = usageNumber(usage.prompt_tokens) ?? obs.usagePromptTokens
      obs.usageCompletionTokens = usageNumber(usage.completion_tokens) ?? obs.usageCompletionTokens
      const cached = cachedCount(usage.prompt_tokens_details?.cached_tokens)
      if (cached !== null) {
        obs.cachedPromptTokens = cached
        this.cachedFrom = 'usage'
      }
    }
    if (this.shape.learning) {
      const sole = soleText(chunk)
      if (sole !== null) this.shape.learn(data, sole, parsedSoleText)
    }
  }

  /**
   * A content delta `text` (non-empty) arrived at `at`.
   * @param stamp false where the chunk's reasoning already stamped it: one chunk, one stamp
   */
  private onContent(text: string, at: number, stamp = true): void {
    const obs = this.obs
    if (this.captureChars > 0 && !obs.contentTruncated) captureContent(obs, text, this.captureChars)
    if (obs.streamedText !== null) obs.streamedText += text
    if (stamp) {
      this.stamps.push(at)
      if (obs.firstOutputAt === null) obs.firstOutputAt = at
    }
    obs.contentChunks++
    if (obs.firstContentAt === null) obs.firstContentAt = at
  }

  /** A line past the SSE parser's cap (its STREAM_PROTOCOL error), or anything else it threw. */
  private failParser(err: unknown, at: number): void {
    if (err instanceof ServegateError) this.fail(err.code, err.message, at)
    else this.fail('INTERNAL', `the SSE parser failed: ${(err as Error).message}`, at)
  }

  /** A 2xx reply that is not an event stream: its content type and first bytes, sanitized. */
  private failNotStream(at: number): void {
    const body = Buffer.concat(this.errorBody ?? []).toString('utf8', 0, NOT_STREAM_EVIDENCE_BYTES)
    const json = /json/i.test(this.notStreamType ?? '')
    const why = json ? ' (a non-streaming reply: the server ignored "stream": true)' : ''
    this.fail(
      'RESPONSE_NOT_STREAM',
      `HTTP ${this.obs.httpStatus ?? 0} with content-type ${this.notStreamType ?? '?'}, not text/event-stream${why}; ` +
        `it starts: ${body.slice(0, 160) || '(empty body)'}`,
      at,
    )
  }

  /**
   * Fails the request at `at` (a deadline, the caller's abort, a broken stream) unless it has
   * already settled; the caller is asked to abort the exchange.
   */
  fail(code: ErrorCode, message: string, at: number): void {
    if (this.isSettled) return
    const error: ErrorInfo = { code, message: sanitizeMessage(message), httpStatus: this.obs.httpStatus, retryAfterS: this.retryAfterS }
    this.settle(at, error, new ServegateError(code, message))
  }

  private settle(at: number, error: ErrorInfo | null, abortWith: ServegateError | null): void {
    this.isSettled = true
    const obs = this.obs
    if (obs.sentAt < 0) obs.sentAt = obs.dispatchedAt
    this.digestPieces()
    obs.outputChunkAt = this.stamps.finish()
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
    this.onSettle(obs, abortWith)
  }
}
