import type { ErrorInfo } from '../schema/run.ts'

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

/**
 * The observation of a request that has seen nothing yet: no status, no output, no error, one
 * attempt. Every producer of observations starts from it, so they all share one shape.
 * @param dispatchedAt when the request was dispatched, monotonic ms
 * @param sentAt when its bytes were handed over, monotonic ms; @default dispatchedAt
 * @example
 * const obs = emptyObservation(performance.now())
 * obs.sentChunks.push(body)
 */
export function emptyObservation(dispatchedAt: number, sentAt = dispatchedAt): StreamObservation {
  return {
    dispatchedAt,
    sentAt,
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
