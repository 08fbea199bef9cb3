import { createHash } from 'node:crypto'
import type { Api } from '../schema/run.ts'
import { createRandom, mixSeed } from '../random.ts'

/**
 * Common short English words; each is a single token in the vocabularies of the major model
 * families (with its leading space), so one word plans one token before calibration.
 */
const WORDS = (
  'the of and to in is was for on that with as by at from his her they this have had not are but ' +
  'one all were when there can an your which their said if will each about how up out them then she ' +
  'many some so these would other into has more two like him see time could no way my than been call ' +
  'who its now find long down day did get come made may part over new sound take only little work know ' +
  'place year live me back give most very after thing our just name good sentence man think say great ' +
  'where help through much before line right too mean old any same tell boy follow came want show also ' +
  'around form three small set put end does another well large must big even such because turn here why ' +
  'ask went men read need land different home us move try kind hand picture again change off play spell ' +
  'air away animal house point page letter mother answer found study still learn should world high every ' +
  'near add food between own below country plant last school father keep tree never start city earth eye'
).split(' ')

/** How a planned token count becomes text before any engine tokenizer is consulted. */
export const PROMPT_TOKENS_ESTIMATOR =
  'one common English word per planned token (uncalibrated estimate; the engine-reported usage.prompt_tokens is recorded per request)'

const INSTRUCTION = 'Summarize the following notes in a few sentences.'

export interface SyntheticPlan {
  api: Api
  promptTokens: number
  maxTokens: number
  seed: number
}

/** The prompt text of request `index`: a unique header (defeats prefix caching), then seeded words. */
export function syntheticPrompt(plan: SyntheticPlan, index: number): string {
  const random = createRandom(mixSeed(plan.seed, index))
  const header = `Request ${plan.seed}-${index}. ${INSTRUCTION}`
  const words = Math.max(1, plan.promptTokens - header.split(' ').length)
  const parts = new Array<string>(words)
  for (let i = 0; i < words; i++) parts[i] = WORDS[Math.floor(random() * WORDS.length)] as string
  return `${header} ${parts.join(' ')}`
}

/**
 * The request body of request `index` without the model name: the part that must be
 * byte-identical between arms. `bodyBytes` adds the model in front.
 */
export function requestBodyWithoutModel(plan: SyntheticPlan, index: number): string {
  const prompt = syntheticPrompt(plan, index)
  const input = plan.api === 'chat' ? { messages: [{ role: 'user', content: prompt }] } : { prompt }
  return JSON.stringify({
    ...input,
    max_tokens: plan.maxTokens,
    stream: true,
    stream_options: { include_usage: true },
  })
}

/** The exact bytes sent for a body: `{"model":…,` followed by the model-free body. */
export function bodyBytes(model: string, withoutModel: string): Buffer {
  return Buffer.from(`{"model":${JSON.stringify(model)},${withoutModel.slice(1)}`)
}

/**
 * sha256 over the ordered model-free bodies, each prefixed by its byte length, so the same
 * plan proves the same request stream on both arms.
 */
export function requestStreamSha256(bodies: readonly string[]): string {
  const hash = createHash('sha256')
  for (const body of bodies) {
    const bytes = Buffer.from(body)
    hash.update(`${bytes.length}\n`)
    hash.update(bytes)
  }
  return hash.digest('hex')
}
