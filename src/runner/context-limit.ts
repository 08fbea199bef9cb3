import { request } from 'undici'
import { ServegateError } from '../errors.ts'

/** A model's context length and where it was read. */
export interface ContextLimit {
  tokens: number
  source: string
}

async function getJson(url: string, timeoutMs: number): Promise<unknown> {
  try {
    const res = await request(url, { method: 'GET', signal: AbortSignal.timeout(timeoutMs) })
    const text = await res.body.text()
    return res.statusCode === 200 ? (JSON.parse(text) as unknown) : null
  } catch {
    return null
  }
}

const positiveInt = (v: unknown): number | null => (typeof v === 'number' && Number.isInteger(v) && v > 0 ? v : null)

/**
 * The served model's context length where the server reports it: `max_model_len` of its entry
 * in `GET /v1/models` (vLLM, SGLang), else `n_ctx` of llama-server's `GET /props`; null when
 * neither says (or the server is not up yet: the probe before the cell reports that).
 */
export async function contextLimit(origin: string, model: string, timeoutMs = 2000): Promise<ContextLimit | null> {
  const models = (await getJson(`${origin}/v1/models`, timeoutMs)) as { data?: Array<{ id?: unknown; max_model_len?: unknown }> } | null
  const entry = models?.data?.find((m) => m.id === model)
  const fromModels = positiveInt(entry?.max_model_len)
  if (fromModels !== null) return { tokens: fromModels, source: 'max_model_len in GET /v1/models' }
  const props = (await getJson(`${origin}/props`, timeoutMs)) as {
    n_ctx?: unknown
    default_generation_settings?: { n_ctx?: unknown }
  } | null
  const nCtx = positiveInt(props?.default_generation_settings?.n_ctx) ?? positiveInt(props?.n_ctx)
  return nCtx === null ? null : { tokens: nCtx, source: 'n_ctx in GET /props' }
}

/** How the sizes are named in a message: the CLI's flags, or a cell's option fields. */
export interface SizeNames {
  maxTokens: string
  promptTokens: string
}
const FLAG_NAMES: SizeNames = { maxTokens: '--max-tokens', promptTokens: '--prompt-tokens' }
export const OPTION_NAMES: SizeNames = { maxTokens: 'maxTokens (--max-tokens)', promptTokens: 'workload.promptTokens (--prompt-tokens)' }

/**
 * Fails before the cell when its sizes cannot fit the model's context: the engine would refuse
 * every request. `promptTokens` is null when the prompts' sizes come from a dataset.
 * @throws ServegateError CONFIG_INVALID naming the flag and the limit
 */
export function checkContextFits(limit: ContextLimit, maxTokens: number, promptTokens: number | null, names = FLAG_NAMES): void {
  const of = `the model's context of ${limit.tokens} tokens (${limit.source})`
  if (maxTokens >= limit.tokens)
    throw new ServegateError('CONFIG_INVALID', `${names.maxTokens}: ${maxTokens} does not fit ${of}; pass fewer than ${limit.tokens}`)
  if (promptTokens !== null && promptTokens + maxTokens > limit.tokens)
    throw new ServegateError(
      'CONFIG_INVALID',
      `${names.promptTokens} ${promptTokens} + ${names.maxTokens} ${maxTokens} = ${promptTokens + maxTokens} exceeds ${of}; ` +
        `pass at most ${limit.tokens - maxTokens} prompt tokens or fewer max tokens`,
    )
}
