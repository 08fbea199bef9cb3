import { scrubSecrets, scrubSecretsAndCutEnd } from './secrets.ts'

/**
 * Stable error codes. A code never changes meaning once released: evidence files and
 * dashboards group failures by it.
 */
export const ERROR_CODES = [
  /** The server answered with a non-2xx status (other than 429). */
  'HTTP_STATUS',
  /** The server answered 429 Too Many Requests; `Retry-After` is kept when present. */
  'HTTP_RATE_LIMITED',
  /** The connection could not be opened (refused, unreachable, DNS). */
  'CONNECT_FAILED',
  /** The connection closed before the stream finished (no `[DONE]`, no clean end). */
  'STREAM_DROPPED',
  /** The server closed the connection before any response (a reused keep-alive connection it dropped). */
  'CONNECTION_CLOSED',
  /**
   * A `data:` line was not valid JSON or not an OpenAI stream chunk, a line exceeded the SSE
   * parser's cap, or the HTTP response itself was malformed (e.g. its status line).
   */
  'STREAM_PROTOCOL',
  /** A 2xx reply that is not an event stream (an HTML page, a non-streaming JSON body): its content type and first bytes. */
  'RESPONSE_NOT_STREAM',
  /** The server sent an `error` object inside the stream. */
  'STREAM_ERROR_EVENT',
  /** The request did not finish before its per-request deadline. */
  'REQUEST_DEADLINE',
  /** The request was cancelled by the caller's AbortSignal. */
  'REQUEST_ABORTED',
  /** The stream finished without a single non-empty delta. */
  'EMPTY_COMPLETION',
  /** The response broke the request's contract (e.g. a canary marker missing or foreign). */
  'CONTRACT_INVALID',
  /**
   * The server's `usage` is not a non-negative integer, or disagrees with what it streamed (the
   * engine's tokenizer's count of the streamed text, or the tokens-per-chunk bound).
   */
  'USAGE_INVALID',
  /** The engine's executable was not found. */
  'ENGINE_NOT_FOUND',
  /** The engine did not become ready before its start-up deadline. */
  'ENGINE_START_TIMEOUT',
  /** The engine process exited (during start-up or mid-cell); the message has its code and log tail. */
  'ENGINE_EXITED',
  /**
   * kubectl or helm could not apply, install or roll out a Kubernetes deployment (`kind:
   * 'kubernetes'`); the message has the command and the tail of its stderr.
   */
  'ENGINE_DEPLOY_FAILED',
  /**
   * After a cell that cancelled requests, the engine's running or waiting requests did not return
   * to 0, or its KV usage to its pre-cell level, within the bound: it leaks on abort. The message
   * has the figures.
   */
  'ENGINE_NOT_DRAINED',
  /** Bad configuration or arguments; the message names the field and the fix. */
  'CONFIG_INVALID',
  /** A file could not be read or parsed. */
  'FILE_INVALID',
  /** Anything else; the message says what. */
  'INTERNAL',
] as const

export type ErrorCode = (typeof ERROR_CODES)[number]

/**
 * The one error class of servegate. `code` is stable; `message` says what failed, on what,
 * why, then the evidence. Messages must already be sanitized (no secrets).
 */
export class ServegateError extends Error {
  readonly code: ErrorCode
  constructor(code: ErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options)
    this.name = 'ServegateError'
    this.code = code
  }
}

const SECRET_PATTERNS: Array<[RegExp, string]> = [
  [/(authorization["']?\s*[:=]\s*["']?)(?:bearer\s+|basic\s+)?[^\s,;"']+/gi, '$1[redacted]'],
  [/(api[-_]?key["']?\s*[:=]\s*["']?)[^\s,;"'&]+/gi, '$1[redacted]'],
  [/\bBearer\s+[A-Za-z0-9._~+/=-]{8,}/g, 'Bearer [redacted]'],
  [/\bsk-[A-Za-z0-9_-]{8,}/g, '[redacted]'],
]

/**
 * Removes the registered secrets (src/secrets.ts, in every form) and anything else that looks like
 * a credential (an `authorization:` or `api_key=` value, a `Bearer` token, an `sk-` key) from a
 * message and bounds its length, so a server's error body can be kept as evidence.
 * @example sanitizeMessage('401: invalid api_key=sk-abc123456789') // '401: invalid api_key=[redacted]'
 */
export function sanitizeMessage(text: string, maxChars = 300): string {
  let out = scrubCredentials(scrubSecretsAndCutEnd(text))
  out = out.replace(/\s+/g, ' ').trim()
  return out.length > maxChars ? `${out.slice(0, maxChars - 1)}…` : out
}

/**
 * {@link sanitizeMessage} without the whitespace folding and the bound: for a text kept whole (an
 * engine log line, a reply kept for rescoring).
 * @example scrubCredentials('authorization: Bearer abc.def.ghi') // 'authorization: [redacted]'
 */
export function scrubCredentials(text: string): string {
  let out = scrubSecrets(text)
  for (const [pattern, replacement] of SECRET_PATTERNS) out = out.replace(pattern, replacement)
  return out
}
