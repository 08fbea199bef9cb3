import { z } from 'zod'
import type { SimApi } from './chunks.ts'
import { type ChatMessageText, chatTokenIds, countChatTokens, countTokens, tokenIds } from './tokens.ts'

const TextPart = z.object({ type: z.literal('text'), text: z.string() })
// Other parts (image_url, input_audio) are accepted and cost no tokens: the sim reads no media.
const ContentPart = z.union([TextPart, z.object({ type: z.string() })])

const Message = z.object({
  role: z.string(),
  content: z.union([z.string(), z.array(ContentPart)]).nullish(),
})

const common = {
  model: z.string().nullish(),
  stream: z.boolean().nullish(),
  stream_options: z.object({ include_usage: z.boolean().nullish() }).nullish(),
  max_tokens: z.int().positive().nullish(),
  seed: z.int().nullish(),
  /** vLLM sampling extras that control output length. */
  ignore_eos: z.boolean().nullish(),
  min_tokens: z.int().nonnegative().nullish(),
  n: z.literal(1).nullish(),
}

const ChatBody = z.object({
  ...common,
  messages: z.array(Message).min(1),
  max_completion_tokens: z.int().positive().nullish(),
})

const CompletionBody = z.object({
  ...common,
  prompt: z.union([z.string(), z.array(z.int().nonnegative())]),
})

/** A completion request reduced to what the sim uses. */
export interface SimRequest {
  api: SimApi
  /** Null when the request named no model (vLLM then uses the served one). */
  model: string | null
  stream: boolean
  includeUsage: boolean
  promptTokens: number
  /** The prompt's text (chat: every message's text, joined by newlines); what the sim "reads". */
  promptText: string
  /** The prompt as sent: chat messages, a text, or token ids; its token ids are `promptTokenIds(request)`. */
  prompt: readonly ChatMessageText[] | string | readonly number[]
  /** `max_tokens` (or `max_completion_tokens`); null when unset. */
  maxTokens: number | null
  minTokens: number
  ignoreEos: boolean
  seed: number | null
}

/** A parse result: the request, or the 400 message naming the field. */
export type ParsedRequest = { ok: true; request: SimRequest } | { ok: false; message: string }

function messageTexts(messages: Array<z.infer<typeof Message>>): ChatMessageText[] {
  return messages.map(({ role, content }) => ({
    role,
    text:
      typeof content === 'string'
        ? content
        : (content ?? []).map((part) => ('text' in part && typeof part.text === 'string' ? part.text : '')).join(' '),
  }))
}

/** The token ids of a request's prompt as the sim sees it (chat: after its chat template); as many as `promptTokens`. */
export function promptTokenIds(request: Pick<SimRequest, 'prompt'>): readonly number[] {
  const { prompt } = request
  if (typeof prompt === 'string') return tokenIds(prompt)
  // Chat requests hold at least one message; an empty list is a completion prompt of no tokens.
  if (prompt.length === 0 || typeof prompt[0] === 'number') return prompt as readonly number[]
  return chatTokenIds(prompt as readonly ChatMessageText[])
}

function invalid(error: z.ZodError): { ok: false; message: string } {
  const issue = error.issues[0]
  const where = issue?.path.join('.') || 'body'
  return { ok: false, message: `${where}: ${issue?.message ?? 'invalid request'}` }
}

/**
 * Validates a parsed JSON body of `/v1/chat/completions` or `/v1/completions` and counts its
 * prompt tokens with the sim's tokenizer (chat: every message's text plus the chat template's
 * own tokens, as an engine's usage.prompt_tokens counts them).
 */
export function parseCompletionRequest(api: SimApi, body: unknown): ParsedRequest {
  const rest = (b: z.infer<typeof CompletionBody> | z.infer<typeof ChatBody>) => ({
    model: b.model ?? null,
    stream: b.stream === true,
    includeUsage: b.stream_options?.include_usage === true,
    minTokens: b.min_tokens ?? 0,
    ignoreEos: b.ignore_eos === true,
    seed: b.seed ?? null,
  })
  if (api === 'chat') {
    const parsed = ChatBody.safeParse(body)
    if (!parsed.success) return invalid(parsed.error)
    const b = parsed.data
    const maxTokens = b.max_completion_tokens ?? b.max_tokens ?? null
    const messages = messageTexts(b.messages)
    const texts = messages.map((m) => m.text)
    return {
      ok: true,
      request: { api, promptTokens: countChatTokens(texts), promptText: texts.join('\n'), prompt: messages, maxTokens, ...rest(b) },
    }
  }
  const parsed = CompletionBody.safeParse(body)
  if (!parsed.success) return invalid(parsed.error)
  const b = parsed.data
  const promptTokens = typeof b.prompt === 'string' ? countTokens(b.prompt) : b.prompt.length
  const promptText = typeof b.prompt === 'string' ? b.prompt : ''
  return { ok: true, request: { api, promptTokens, promptText, prompt: b.prompt, maxTokens: b.max_tokens ?? null, ...rest(b) } }
}

const TokenizeBody = z.union([
  z.object({ model: z.string().nullish(), prompt: z.string() }),
  z.object({ model: z.string().nullish(), messages: z.array(Message).min(1) }),
])

/**
 * Parses a vLLM-style `/tokenize` body into the sim's token ids: `prompt` is tokenized as is;
 * `messages` through the chat template (`chatTokenIds`), so its count equals the prompt_tokens a
 * chat completion of those messages reports.
 */
export function parseTokenizeRequest(body: unknown): { ok: true; model: string | null; tokens: number[] } | { ok: false; message: string } {
  const parsed = TokenizeBody.safeParse(body)
  if (!parsed.success) return invalid(parsed.error)
  const b = parsed.data
  if ('prompt' in b) return { ok: true, model: b.model ?? null, tokens: tokenIds(b.prompt) }
  return { ok: true, model: b.model ?? null, tokens: chatTokenIds(messageTexts(b.messages)) }
}
