/** Which OpenAI API a stream answers: chat chunks carry `delta`, completion chunks `text`. */
export type SimApi = 'chat' | 'completions'

/** What every chunk of one stream repeats. */
export interface ChunkHeader {
  api: SimApi
  /** `chatcmpl-…` or `cmpl-…`. */
  id: string
  /** Unix time, seconds. */
  created: number
  model: string
}

/** One chat delta, in vLLM's field names. */
export type ChatDelta = { role: 'assistant'; content: '' } | { reasoning_content: string } | { content: string } | Record<string, never>

/** Token counts of a stream's `usage` chunk. */
export interface Usage {
  prompt_tokens: number
  completion_tokens: number
  total_tokens: number
  /** The prompt tokens served from the prefix cache, where reported (vLLM with `--enable-prompt-tokens-details`). */
  prompt_tokens_details?: { cached_tokens: number }
}

/** Line ending of the SSE stream: `\n`, or `\r\n` with the `crlf` option. */
export type Eol = '\n' | '\r\n'

/** One `data:` event carrying `json`, terminated by a blank line. */
export function dataEvent(json: string, eol: Eol): string {
  return `data: ${json}${eol}${eol}`
}

/** The stream terminator. */
export function doneEvent(eol: Eol): string {
  return dataEvent('[DONE]', eol)
}

/** An SSE comment; clients ignore it, proxies see traffic. */
export function keepaliveEvent(eol: Eol): string {
  return `: keep-alive${eol}${eol}`
}

/** The invalid data line of the `malformed` fault. */
export function malformedEvent(eol: Eol): string {
  return dataEvent('{"choices": [', eol)
}

/**
 * A chat chunk exactly as vLLM serializes it.
 * @example chatChunk(header, { content: ' the' }, null)
 * // {"id":"chatcmpl-…","object":"chat.completion.chunk","created":…,"model":"sim-model","choices":[{"index":0,"delta":{"content":"
 * the"},"logprobs":null,"finish_reason":null}]}
 */
export function chatChunk(header: ChunkHeader, delta: ChatDelta, finishReason: string | null): string {
  return JSON.stringify({
    id: header.id,
    object: 'chat.completion.chunk',
    created: header.created,
    model: header.model,
    choices: [{ index: 0, delta, logprobs: null, finish_reason: finishReason }],
  })
}

/** A completions chunk exactly as vLLM serializes it. */
export function completionChunk(header: ChunkHeader, text: string, finishReason: string | null): string {
  return JSON.stringify({
    id: header.id,
    object: 'text_completion',
    created: header.created,
    model: header.model,
    choices: [{ index: 0, text, logprobs: null, finish_reason: finishReason }],
  })
}

/** The final `choices: []` chunk sent when the request set `stream_options.include_usage`. */
export function usageChunk(header: ChunkHeader, usage: Usage): string {
  return JSON.stringify({
    id: header.id,
    object: header.api === 'chat' ? 'chat.completion.chunk' : 'text_completion',
    created: header.created,
    model: header.model,
    choices: [],
    usage,
  })
}

/** An OpenAI-style error body, with vLLM's `type` names and numeric `code`. */
export function errorBody(status: number, message: string, param: string | null = null): string {
  return JSON.stringify({ error: { message, type: ERROR_TYPES[status] ?? 'Error', param, code: status } })
}

const ERROR_TYPES: Record<number, string> = {
  400: 'BadRequestError',
  404: 'NotFoundError',
  405: 'MethodNotAllowedError',
  413: 'BadRequestError',
  429: 'RateLimitError',
  500: 'InternalServerError',
}
