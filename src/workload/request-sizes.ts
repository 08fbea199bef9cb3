import type { LengthsPlan } from '../schema/lengths.ts'
import {
  type Drawn,
  drawLengths,
  drawnLengthsRecord,
  MAX_TOKENS_STREAM,
  MIN_MAX_TOKENS,
  MIN_PROMPT_TOKENS,
  PROMPT_TOKENS_STREAM,
} from './lengths.ts'
import type { PlannedSize, PreparePlan } from './prepare.ts'
import type { ResolvedWorkloadSpec } from './workload-spec.ts'

/**
 * Each request's planned prompt tokens and `max_tokens`, by index: a replayed trace's own sizes,
 * else each drawn from its distribution at planning time (seeded by the workload's seed, so both
 * arms get the same), else the declared size. A shared-prefix workload with groups plans
 * `systemTokens + questionTokens`. Drawn sizes cost 4 bytes a request.
 * @example new RequestSizes(spec, { api: 'chat', maxTokens: { uniform: [16, 64] }, requests: 8, warmupRequests: 0 }).size(3)
 */
export class RequestSizes {
  /** Prompt sizes drawn for every request (measured, then warm-up); null when declared as one number. */
  readonly prompt: Drawn | null
  /** `max_tokens` drawn for every request; null when declared as one number. */
  readonly max: Drawn | null
  readonly #measured: number
  readonly #fixedPrompt: number
  readonly #fixedMax: number
  readonly #trace: readonly PlannedSize[] | null

  constructor(spec: ResolvedWorkloadSpec, plan: PreparePlan) {
    const total = plan.requests + plan.warmupRequests
    this.#measured = plan.requests
    this.#trace = plan.sizes ?? null
    const groups = spec.kind === 'shared-prefix' && spec.groups !== undefined
    const declared = groups ? (spec.systemTokens ?? 0) + (spec.questionTokens ?? 0) : spec.promptTokens
    this.prompt = drawLengths(declared, MIN_PROMPT_TOKENS, spec.seed, PROMPT_TOKENS_STREAM, total, 'workload.promptTokens')
    this.max = drawLengths(plan.maxTokens, MIN_MAX_TOKENS, spec.seed, MAX_TOKENS_STREAM, total, 'maxTokens')
    this.#fixedPrompt = typeof declared === 'number' ? declared : this.#mean(this.prompt)
    this.#fixedMax = typeof plan.maxTokens === 'number' ? plan.maxTokens : this.#mean(this.max)
  }

  /** The mean of the measured requests' draws, rounded. */
  #mean(drawn: Drawn | null): number {
    const tokens = (drawn as Drawn).tokens.subarray(0, this.#measured)
    return Math.round(tokens.reduce((s, t) => s + t, 0) / Math.max(1, tokens.length))
  }

  /** Request `index`'s planned prompt tokens and `max_tokens`. */
  size(index: number): PlannedSize {
    const traced = this.#trace?.[index]
    if (traced !== undefined) return traced
    return {
      promptTokens: this.prompt === null ? this.#fixedPrompt : (this.prompt.tokens[index] as number),
      maxTokens: this.max === null ? this.#fixedMax : (this.max.tokens[index] as number),
    }
  }

  /** The plan's `max_tokens`: the declared one, or the rounded mean of the measured requests' draws. */
  get maxTokens(): number {
    return this.#fixedMax
  }

  /** The planned prompt size the record states: the declared one, else the mean of the measured requests' sizes (a trace's, or drawn). */
  get targetPromptTokens(): number {
    const trace = this.#trace
    if (trace === null) return this.#fixedPrompt
    return Math.round(trace.reduce((s, x) => s + x.promptTokens, 0) / Math.max(1, trace.length))
  }

  /** The smallest drawn prompt, else the declared one (a shared block must leave room in it). */
  get smallestPromptTokens(): number {
    return this.prompt === null ? this.#fixedPrompt : this.prompt.tokens.reduce((m, t) => Math.min(m, t), Infinity)
  }

  /** What was drawn, as the record keeps it; null when nothing was. */
  record(): LengthsPlan | null {
    if (this.prompt === null && this.max === null) return null
    return {
      promptTokens: this.prompt === null ? null : drawnLengthsRecord(this.prompt, this.#measured),
      maxTokens: this.max === null ? null : drawnLengthsRecord(this.max, this.#measured),
    }
  }
}
