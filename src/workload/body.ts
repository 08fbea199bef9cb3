import type { Api } from '../schema/run.ts'
import type { OutputControl, Sampling } from './workload-spec.ts'

/** OpenAI chat content: a string, or parts (images as data URIs, then text). */
export type ChatContent = string | Array<{ type: 'text'; text: string } | { type: 'image_url'; image_url: { url: string } }>

/** How one sampling parameter was handled: what the plan asked, whether and where it was sent. */
interface SamplingEntry {
  requested: string | number | null
  sent: boolean
  /** The request body field that carried it; null when not sent. */
  field: string | null
  /** The value in effect for the request: the sent value, or null for the engine's (unknown) default. */
  effective: string | number | boolean | null
  note: string | null
}

/** The extra body fields of a plan's sampling and output control, and the record of each. */
export interface BodyExtras {
  fields: Record<string, unknown>
  sampling: Record<keyof Sampling, SamplingEntry>
  /** The body field that controls output length, e.g. `ignore_eos`; null when none. */
  outputKnobField: string | null
}

function entry(requested: string | number | undefined, field: string | null, value: unknown, note: string | null = null): SamplingEntry {
  const sent = requested !== undefined && field !== null
  return {
    requested: requested ?? null,
    sent,
    field: sent ? field : null,
    effective: sent ? (value as string | number | boolean) : null,
    note: requested !== undefined && field === null ? note : null,
  }
}

/**
 * Turns a plan's sampling and output control into request body fields, in a fixed order so the
 * bytes are stable, and records requested / sent / effective for each parameter.
 */
export function bodyExtras(api: Api, maxTokens: number, sampling: Sampling, output: OutputControl): BodyExtras {
  const fields: Record<string, unknown> = {}
  let outputKnobField: string | null = null
  if (output.mode !== 'none') {
    if (output.knob === 'ignore_eos') fields.ignore_eos = true
    else fields.min_tokens = maxTokens
    outputKnobField = output.knob
  }
  if (sampling.temperature !== undefined) fields.temperature = sampling.temperature
  if (sampling.topP !== undefined) fields.top_p = sampling.topP
  if (sampling.seed !== undefined) fields.seed = sampling.seed
  const chat = api === 'chat'
  if (chat && sampling.reasoningEffort !== undefined) fields.reasoning_effort = sampling.reasoningEffort
  const thinking = sampling.thinking === undefined ? undefined : sampling.thinking === 'enabled'
  if (chat && thinking !== undefined) fields.chat_template_kwargs = { enable_thinking: thinking }
  const chatOnly = 'the completions API has no such field; not sent'
  return {
    fields,
    outputKnobField,
    sampling: {
      temperature: entry(sampling.temperature, 'temperature', sampling.temperature),
      topP: entry(sampling.topP, 'top_p', sampling.topP),
      seed: entry(sampling.seed, 'seed', sampling.seed),
      reasoningEffort: entry(sampling.reasoningEffort, chat ? 'reasoning_effort' : null, sampling.reasoningEffort, chatOnly),
      thinking: entry(sampling.thinking, chat ? 'chat_template_kwargs.enable_thinking' : null, thinking, chatOnly),
    },
  }
}

/** One message of a chat conversation, as sent. */
export interface ChatMessage {
  role: 'system' | 'user' | 'assistant'
  content: string
}

/** The JSON body of a chat request of these messages without the model name, its fields in the order `requestJson` writes them. */
export function chatJson(messages: readonly ChatMessage[], maxTokens: number, extras: BodyExtras): string {
  return JSON.stringify({ messages, max_tokens: maxTokens, ...extras.fields, stream: true, stream_options: { include_usage: true } })
}

/**
 * The JSON body of one request without the model name: the bytes both arms must receive.
 * `bodyBytes` (bytes.ts) puts the model in front.
 */
export function requestJson(api: Api, input: ChatContent, maxTokens: number, extras: BodyExtras): string {
  const head = api === 'chat' ? { messages: [{ role: 'user', content: input }] } : { prompt: typeof input === 'string' ? input : '' }
  return JSON.stringify({ ...head, max_tokens: maxTokens, ...extras.fields, stream: true, stream_options: { include_usage: true } })
}
