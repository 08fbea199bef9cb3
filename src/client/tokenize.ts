import { httpRequest } from '../http-request.ts'
import { sanitizeMessage, ServegateError } from '../errors.ts'

/** A chat message as the tokenizer sees it (text only; images are not counted here). */
export interface ChatText {
  role: 'user' | 'system'
  content: string
}

/**
 * The engine's own tokenizer, reached over HTTP. `countChat` returns what the engine will
 * report as `usage.prompt_tokens` for a chat request of these messages (template included);
 * `countText` what it reports for a completions request of this prompt.
 */
export interface EngineTokenizer {
  /** e.g. `POST /tokenize (vLLM shape, chat template applied by the engine)`. */
  readonly description: string
  countText(prompt: string): Promise<number>
  countChat(messages: readonly ChatText[]): Promise<number>
}

type Json = Record<string, unknown>

async function postJson(origin: string, path: string, body: Json, timeoutMs: number): Promise<{ status: number; json: Json | null }> {
  const res = await httpRequest(`${origin}${path}`, {
    method: 'POST',
    body: JSON.stringify(body),
    headers: { 'content-type': 'application/json' },
    signal: AbortSignal.timeout(timeoutMs),
  })
  const text = res.text
  try {
    const json = JSON.parse(text) as unknown
    return { status: res.statusCode, json: json !== null && typeof json === 'object' ? (json as Json) : null }
  } catch {
    return { status: res.statusCode, json: null }
  }
}

/** Token count of a `/tokenize` answer: vLLM/SGLang `count`, llama.cpp `tokens.length`. */
function countOf(answer: { status: number; json: Json | null }): number | null {
  if (answer.status !== 200 || answer.json === null) return null
  if (typeof answer.json.count === 'number') return answer.json.count
  return Array.isArray(answer.json.tokens) ? answer.json.tokens.length : null
}

/** The error of a tokenizer endpoint that answered the probe but not a later call: its status, or its shape. */
function stoppedAnswering(what: string, answer: { status: number }): ServegateError {
  return answer.status === 200
    ? new ServegateError('STREAM_PROTOCOL', `${what} stopped answering: a 200 without a token count`)
    : new ServegateError('HTTP_STATUS', `${what} stopped answering: status ${answer.status}`)
}

/**
 * A probe's count of the sample text: an endpoint that ignores the body's shape answers 200
 * with no tokens (llama.cpp given `prompt` instead of `content`), which is no answer at all.
 */
function sampleCount(answer: { status: number; json: Json | null }): number | null {
  const n = countOf(answer)
  return n !== null && n > 0 ? n : null
}

export interface TokenizerProbe {
  tokenizer: EngineTokenizer | null
  /** Why there is none (or why chat counts are approximate); null when exact. */
  warning: string | null
}

/**
 * Finds the engine's tokenizer endpoint: vLLM's `POST /tokenize` with `messages` (the chat
 * template applied by the engine), else `{ model, prompt }` (vLLM, SGLang), else llama.cpp's
 * `{ content }` with `/apply-template` for chat. Where chat messages cannot be tokenized
 * through the template, the template's cost is measured once with `measureChatOverhead`
 * (a one-token chat request whose `usage.prompt_tokens` is compared with the text count).
 * `chatTemplateKwargs` (e.g. `{ enable_thinking: false }`) goes with every templated call, as the
 * chat requests send it: a thinking template renders a different prompt with it (vLLM's
 * `/tokenize` and llama.cpp's `/apply-template` take the field).
 * Never throws: no tokenizer is a warning, and the caller estimates.
 */
export async function probeTokenizer(
  origin: string,
  model: string,
  measureChatOverhead: (contentTokens: (text: string) => Promise<number>) => Promise<number | null>,
  timeoutMs = 10_000,
  chatTemplateKwargs: Readonly<Record<string, unknown>> | null = null,
): Promise<TokenizerProbe> {
  const sample = 'Hello there, tokenizer.'
  const post = (path: string, body: Json) => postJson(origin, path, body, timeoutMs)
  const templated = (body: Json): Json => (chatTemplateKwargs === null ? body : { ...body, chat_template_kwargs: chatTemplateKwargs })
  try {
    const chatCount = sampleCount(
      await post('/tokenize', templated({ model, messages: [{ role: 'user', content: sample }], add_generation_prompt: true })),
    )
    const textCount = sampleCount(await post('/tokenize', { model, prompt: sample, add_special_tokens: true }))
    if (textCount !== null) {
      const countText = async (prompt: string): Promise<number> => {
        const answer = await post('/tokenize', { model, prompt, add_special_tokens: true })
        const n = countOf(answer)
        if (n === null) throw stoppedAnswering('POST /tokenize', answer)
        return n
      }
      if (chatCount !== null) {
        return {
          tokenizer: {
            description: 'POST /tokenize (vLLM shape; chat template applied by the engine)',
            countText,
            async countChat(messages) {
              const answer = await post('/tokenize', templated({ model, messages, add_generation_prompt: true }))
              const n = countOf(answer)
              if (n === null) throw stoppedAnswering('POST /tokenize (messages)', answer)
              return n
            },
          },
          warning: null,
        }
      }
      return withMeasuredOverhead('POST /tokenize {model, prompt} (SGLang/vLLM shape)', countText, measureChatOverhead)
    }
    const llama = sampleCount(await post('/tokenize', { content: sample, add_special: true }))
    if (llama !== null) {
      const countText = async (content: string): Promise<number> => {
        const answer = await post('/tokenize', { content, add_special: true })
        const n = countOf(answer)
        if (n === null) throw stoppedAnswering('POST /tokenize', answer)
        return n
      }
      const applied = await post('/apply-template', templated({ messages: [{ role: 'user', content: sample }] }))
      if (applied.status === 200 && typeof applied.json?.prompt === 'string') {
        return {
          tokenizer: {
            description: 'POST /apply-template then POST /tokenize (llama.cpp server shape)',
            countText,
            async countChat(messages) {
              const answer = await post('/apply-template', templated({ messages }))
              if (typeof answer.json?.prompt !== 'string') throw stoppedAnswering('POST /apply-template', answer)
              return countText(answer.json.prompt)
            },
          },
          warning: null,
        }
      }
      return withMeasuredOverhead('POST /tokenize {content} (llama.cpp server shape)', countText, measureChatOverhead)
    }
    return { tokenizer: null, warning: `the engine at ${origin} exposes no usable POST /tokenize; prompt sizes are estimated` }
  } catch (err) {
    return {
      tokenizer: null,
      warning: `the engine's tokenizer endpoint failed (${sanitizeMessage((err as Error).message, 120)}); prompt sizes are estimated`,
    }
  }
}

async function withMeasuredOverhead(
  description: string,
  countText: (text: string) => Promise<number>,
  measureChatOverhead: (contentTokens: (text: string) => Promise<number>) => Promise<number | null>,
): Promise<TokenizerProbe> {
  const overhead = await measureChatOverhead(countText)
  const sum = async (messages: readonly ChatText[]): Promise<number> => {
    let total = 0
    for (const m of messages) total += await countText(m.content)
    return total
  }
  if (overhead === null) {
    return {
      tokenizer: { description: `${description}; chat template cost unknown`, countText, countChat: sum },
      warning: 'the chat template cost could not be measured; chat prompt sizes exclude it',
    }
  }
  return {
    tokenizer: {
      description: `${description}; chat template cost ${overhead} tokens, measured from usage of a one-token request`,
      countText,
      countChat: async (messages) => (await sum(messages)) + overhead,
    },
    warning: null,
  }
}
