/**
 * vLLM-shaped chat-completion stream events (`/v1/chat/completions`, `stream: true`,
 * `stream_options.include_usage`), as vLLM serializes them: a role chunk, one chunk per token,
 * the finish reason on the last token's chunk, a usage chunk with no choices, `data: [DONE]`.
 */

export const MODEL = 'meta-llama/Llama-3.1-8B-Instruct'
export const CREATED_S = 1_718_000_000
export const DONE_EVENT = 'data: [DONE]\n\n'

const WORDS = [' the', ' model', ' returns', ' one', ' token', ' per', ' chunk', ' and', ' a', ' word']

/** The text of token `k`: a common word with its leading space, one token each. */
export function word(k: number): string {
  return WORDS[k % WORDS.length] as string
}

/**
 * Everything of a chunk's JSON before `"choices"`: `data: {"id":…,"object":…,"created":…,"model":…,`.
 * @param streamIndex makes the 32-hex-digit id unique per response
 */
export function chunkHead(streamIndex: number): string {
  const id = `chatcmpl-${streamIndex.toString(16).padStart(32, '0')}`
  return `data: {"id":"${id}","object":"chat.completion.chunk","created":${CREATED_S},"model":"${MODEL}",`
}

/** vLLM's first chunk: the assistant role with empty content (not an output token). */
export function roleEvent(head: string): string {
  return `${head}"choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}\n\n`
}

/**
 * One token's chunk.
 * @param sentAtMs when set, a `"t"` field with the server's send time on the monotonic clock, ms
 */
export function tokenEvent(head: string, k: number, finishReason: string | null, sentAtMs?: number): string {
  const t = sentAtMs === undefined ? '' : `"t":${sentAtMs},`
  const finish = finishReason === null ? 'null' : `"${finishReason}"`
  return `${head}${t}"choices":[{"index":0,"delta":{"content":"${word(k)}"},"logprobs":null,"finish_reason":${finish}}]}\n\n`
}

/** The closing usage chunk (`choices: []`). */
export function usageEvent(head: string, promptTokens: number, completionTokens: number): string {
  return (
    `${head}"choices":[],"usage":{"prompt_tokens":${promptTokens},` +
    `"total_tokens":${promptTokens + completionTokens},"completion_tokens":${completionTokens}}}\n\n`
  )
}

/** A whole response body of `tokens` tokens, `max_tokens` reached. */
export function renderCompletion(streamIndex: number, tokens: number, promptTokens: number): string {
  const head = chunkHead(streamIndex)
  const parts = [roleEvent(head)]
  for (let k = 0; k < tokens; k++) parts.push(tokenEvent(head, k, k === tokens - 1 ? 'length' : null))
  parts.push(usageEvent(head, promptTokens, tokens), DONE_EVENT)
  return parts.join('')
}

/**
 * The first `bytes` bytes of a long response: one socket read as the client sees it under
 * load, ending mid-event.
 */
export function responseRead(bytes: number): Buffer {
  const body = Buffer.from(renderCompletion(1, Math.ceil(bytes / 100), 32))
  if (body.length < bytes) throw new RangeError(`responseRead: a ${body.length}-byte body is shorter than ${bytes}`)
  return body.subarray(0, bytes)
}
