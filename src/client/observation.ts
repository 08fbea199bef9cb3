import type { ErrorInfo } from '../schema/run.ts'
import type { SentDigest } from './sent-digest.ts'

/** The chunk times of a request that saw none; shared, as nothing writes into an empty array. */
const NO_CHUNKS = new Float64Array(0)

/** What the client saw of one request, monotonic ms (`monoMs()`, process-wide), before any derivation. */
export interface StreamObservation {
  /** When `dispatch` was called. */
  dispatchedAt: number
  /** When the request bytes were fully handed to the socket (falls back to `dispatchedAt`). */
  sentAt: number
  firstOutputAt: number | null
  firstContentAt: number | null
  endAt: number | null
  /**
   * Arrival time of each chunk carrying a non-empty delta (reasoning or content): a typed array
   * (8 bytes a chunk, no object per chunk), exactly as long as the chunks once the request ends.
   */
  outputChunkAt: Float64Array
  reasoningChunks: number
  contentChunks: number
  /** `usage.prompt_tokens` as sent, any number; NaN when sent but not a number; null when not sent. */
  usagePromptTokens: number | null
  /** `usage.completion_tokens` as sent, any number; NaN when sent but not a number; null when not sent. */
  usageCompletionTokens: number | null
  /**
   * Prompt tokens the engine says it served from its prefix cache: `usage.prompt_tokens_details.cached_tokens`
   * (vLLM, SGLang, llama.cpp), else llama.cpp's `timings.cache_n`; null when it sent neither as a whole number ≥ 0.
   */
  cachedPromptTokens: number | null
  finishReason: string | null
  httpStatus: number | null
  /** The first `captureChars` characters of content (reasoning excluded). */
  content: string
  /** True when the content was longer than the capture. */
  contentTruncated: boolean
  /** Every streamed delta's text, reasoning and content, when the request kept it (the usage cross-check); else null. */
  streamedText: string | null
  /** What was handed to the socket, as lengths and hashes (the bytes themselves are not kept); null when nothing was. */
  sent: SentDigest | null
  /** The engine's own timings, where its stream carries them (llama-server's `timings`). */
  engineTimings: Record<string, number> | null
  /** 2 when the first attempt's connection was closed by the server before any response. */
  attempts: number
  /** Null when the request succeeded. */
  error: ErrorInfo | null
}

/**
 * The observation of a request that has seen nothing yet: no status, no output, no error, one
 * attempt. Every producer of observations starts from it, so they all share one shape.
 * @param dispatchedAt when the request was dispatched, monotonic ms
 * @param sentAt when its bytes were handed over, monotonic ms; @default dispatchedAt
 * @example
 * const obs = emptyObservation(monoMs())
 * obs.sent = digestSent([body], model)
 */
export function emptyObservation(dispatchedAt: number, sentAt = dispatchedAt): StreamObservation {
  return {
    dispatchedAt,
    sentAt,
    firstOutputAt: null,
    firstContentAt: null,
    endAt: null,
    outputChunkAt: NO_CHUNKS,
    reasoningChunks: 0,
    contentChunks: 0,
    usagePromptTokens: null,
    usageCompletionTokens: null,
    cachedPromptTokens: null,
    finishReason: null,
    httpStatus: null,
    content: '',
    contentTruncated: false,
    streamedText: null,
    sent: null,
    engineTimings: null,
    attempts: 1,
    error: null,
  }
}

/** What of a reply's text a request keeps. */
export interface TextCapture {
  /** Characters of content (never reasoning) kept for canaries and scoring; 0 keeps none. */
  contentChars: number
  /** Keep every streamed delta's text, reasoning and content, in `streamedText` (the usage cross-check). */
  streamed: boolean
}

/** Keeps nothing of the reply's text. */
export const NO_TEXT: TextCapture = { contentChars: 0, streamed: false }

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

/**
 * Chunk arrival times as they come: a Float64Array that doubles when full, so a stream of any
 * length costs 8 bytes a chunk and no allocation per chunk; `finish` hands over an exact copy.
 */
export class ChunkStamps {
  #times = new Float64Array(64)
  #count = 0

  /** Chunks stamped so far. */
  get count(): number {
    return this.#count
  }

  push(at: number): void {
    if (this.#count === this.#times.length) {
      const grown = new Float64Array(this.#times.length * 2)
      grown.set(this.#times)
      this.#times = grown
    }
    this.#times[this.#count++] = at
  }

  /** The stamps, exactly as many as were pushed (a copy: the growing buffer is dropped with this). */
  finish(): Float64Array {
    return this.#count === 0 ? NO_CHUNKS : this.#times.slice(0, this.#count)
  }
}
