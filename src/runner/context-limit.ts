import { httpRequest } from '../http-request.ts'
import { ServegateError } from '../errors.ts'
import { RequestSizes } from '../workload/request-sizes.ts'
import type { ResolvedCellPlan } from './cell-options.ts'

/** A model's context length and where it was read. */
export interface ContextLimit {
  tokens: number
  source: string
}

async function getJson(url: string, timeoutMs: number): Promise<unknown> {
  try {
    const res = await httpRequest(url, { signal: AbortSignal.timeout(timeoutMs) })
    const text = res.text
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

/** What the context check reads of a cell's plan. */
type PlanSizes = Pick<ResolvedCellPlan, 'api' | 'maxTokens' | 'requests' | 'warmupRequests' | 'workload' | 'arrival'>

/**
 * Fails before the cell when a request it plans cannot fit the model's context: its sizes as
 * declared (shared-prefix groups: systemTokens + questionTokens), or, where a size is drawn from
 * a distribution, every request's draws (they are drawn here exactly as the workload will draw
 * them): the largest `max_tokens`, and the largest prompt + `max_tokens` of one request. A
 * dataset's or a trace's prompts are not checked (their sizes come from the rows).
 * @throws ServegateError CONFIG_INVALID naming the option, the request and the limit
 */
export function checkCellFits(limit: ContextLimit, plan: PlanSizes, names = FLAG_NAMES): void {
  const fromRows = plan.workload.kind === 'dataset' || plan.arrival?.kind === 'trace'
  const { api, maxTokens, requests, warmupRequests } = plan
  const sizes = new RequestSizes(plan.workload, { api, maxTokens, requests, warmupRequests })
  if (sizes.prompt === null && sizes.max === null) {
    checkContextFits(limit, sizes.maxTokens, fromRows ? null : sizes.targetPromptTokens, names)
    return
  }
  const of = `the model's context of ${limit.tokens} tokens (${limit.source})`
  let largestMax = { index: 0, tokens: 0 }
  let largest = { index: 0, promptTokens: 0, maxTokens: 0 }
  for (let index = 0; index < requests + warmupRequests; index++) {
    const size = sizes.size(index)
    if (size.maxTokens > largestMax.tokens) largestMax = { index, tokens: size.maxTokens }
    if (size.promptTokens + size.maxTokens > largest.promptTokens + largest.maxTokens) largest = { index, ...size }
  }
  const drawn = (index: number): string => (index < requests ? `request ${index}` : `warm-up request ${index - requests}`)
  if (largestMax.tokens >= limit.tokens) {
    throw new ServegateError(
      'CONFIG_INVALID',
      `${names.maxTokens}: ${drawn(largestMax.index)} draws ${largestMax.tokens}, which does not fit ${of}; ` +
        `draw fewer than ${limit.tokens} (a narrower distribution, or another seed)`,
    )
  }
  const total = largest.promptTokens + largest.maxTokens
  if (!fromRows && total > limit.tokens) {
    throw new ServegateError(
      'CONFIG_INVALID',
      `${drawn(largest.index)} draws ${names.promptTokens} ${largest.promptTokens} + ${names.maxTokens} ${largest.maxTokens} = ` +
        `${total}, which exceeds ${of}; draw smaller sizes (a narrower distribution, or another seed)`,
    )
  }
}

/**
 * Fails before the cell when its sizes cannot fit the model's context: the engine would refuse
 * every request. `promptTokens` is null when the prompts' sizes come from a dataset.
 * @throws ServegateError CONFIG_INVALID naming the flag and the limit
 */
function checkContextFits(limit: ContextLimit, maxTokens: number, promptTokens: number | null, names = FLAG_NAMES): void {
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
