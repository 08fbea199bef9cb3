import type { ChatText, EngineTokenizer, TokenizerProbe } from '../client/tokenize.ts'
import { ServegateError } from '../errors.ts'
import type { Api } from '../schema/run.ts'
import { groupSystemText } from './prefix-groups.ts'
import { ESTIMATED_TOKENS_PER_WORD, type PromptLayout, sharedText } from './prompt-layout.ts'
import type { ResolvedWorkloadSpec } from './workload-spec.ts'

/** ±0.5% or ±8 tokens, whichever is larger. */
export function calibrationTolerance(target: number): number {
  return Math.max(8, Math.ceil(target * 0.005))
}

interface Fit {
  pieces: number
  tokens: number
}

/**
 * Finds the number of text pieces whose prompt the engine counts closest to `target` tokens:
 * secant steps on a monotone count, stopping at the exact count or when a step would revisit
 * a size already tried (a handful of tokenizer calls per request). The caller judges the
 * result against its tolerance.
 */
export async function fitPieces(count: (pieces: number) => Promise<number>, target: number, start: number): Promise<Fit> {
  const tried = new Map<number, number>()
  const measure = async (pieces: number): Promise<Fit> => {
    const tokens = tried.get(pieces) ?? (await count(pieces))
    tried.set(pieces, tokens)
    return { pieces, tokens }
  }
  let fit = await measure(Math.max(1, start))
  let best = fit
  let previous: Fit | null = null
  for (let i = 0; i < 24 && fit.tokens !== target; i++) {
    const slope =
      previous !== null && previous.pieces !== fit.pieces
        ? (fit.tokens - previous.tokens) / (fit.pieces - previous.pieces)
        : fit.tokens / fit.pieces
    const bounded = Math.min(8, Math.max(0.2, Number.isFinite(slope) ? slope : 1))
    let step = Math.round((target - fit.tokens) / bounded)
    if (step === 0) step = Math.sign(target - fit.tokens)
    const pieces = Math.max(1, fit.pieces + step)
    if (tried.has(pieces)) {
      // Converged to a bracket: the closest neighbour one piece away is the last candidate.
      const neighbour = Math.max(1, fit.pieces + Math.sign(target - fit.tokens))
      if (tried.has(neighbour)) break
      previous = fit
      fit = await measure(neighbour)
    } else {
      previous = fit
      fit = await measure(pieces)
    }
    if (Math.abs(fit.tokens - target) < Math.abs(best.tokens - target)) best = fit
  }
  return best
}

/** The calibrated size of every request: its pieces of text and the engine's count of its prompt. */
export interface FittedSizes {
  /** Per request, the pieces of generated text (0 for a dataset row). */
  pieces: Int32Array
  /** Per request, the prompt tokens the engine counted; NaN where it did not count. */
  tokens: Float64Array
  /** Requests whose calibrated count missed the tolerance. */
  outsideTolerance: number
}

/**
 * Fits prompts to their planned sizes with the engine's own tokenizer, when one was probed. A
 * tokenizer that fails stops being used from that request on: the sizes after it are estimated,
 * and `warning` says so (never a silent wrong size).
 * @example const calibrator = new PromptCalibrator(probe, 'chat'); const shared = await calibrator.fitShared(spec, 512)
 */
export class PromptCalibrator {
  readonly tokenizer: EngineTokenizer | null
  readonly #api: Api
  #usable: boolean
  #warning: string | null

  constructor(probe: TokenizerProbe | null, api: Api) {
    this.tokenizer = probe?.tokenizer ?? null
    this.#api = api
    this.#usable = this.tokenizer !== null
    this.#warning = probe?.warning ?? (this.tokenizer === null ? 'no tokenizer was probed; prompt sizes are estimated' : null)
  }

  /** Why sizes are estimated, or the probe's own warning; null when the tokenizer sized every prompt. */
  get warning(): string | null {
    return this.#warning
  }

  /** The shared block of about `sharedTokens` tokens: its text, and its calibrated size (null when estimated). */
  async fitShared(spec: ResolvedWorkloadSpec, sharedTokens: number): Promise<{ text: string; tokens: number | null }> {
    return this.#fitBlock((p) => sharedText(spec, p), sharedTokens, Math.round(sharedTokens / ESTIMATED_TOKENS_PER_WORD))
  }

  /**
   * Each group's own system prompt of about `systemTokens` tokens, group 0 first: its text and its
   * calibrated size (null when estimated). Each group after the first starts from the fit before it.
   * @throws ServegateError REQUEST_ABORTED when `signal` aborts
   */
  async fitGroups(
    seed: number,
    groups: number,
    systemTokens: number,
    signal?: AbortSignal,
  ): Promise<{ texts: string[]; tokens: Array<number | null> }> {
    const texts: string[] = []
    const tokens: Array<number | null> = []
    let start = Math.round(systemTokens / ESTIMATED_TOKENS_PER_WORD)
    for (let g = 0; g < groups; g++) {
      if (signal?.aborted === true) throw new ServegateError('REQUEST_ABORTED', `calibration aborted at group ${g} of ${groups}`)
      const fit = await this.#fitBlock((p) => groupSystemText(seed, g, p), systemTokens, start)
      texts.push(fit.text)
      tokens.push(fit.tokens)
      start = fit.pieces
    }
    return { texts, tokens }
  }

  /** A block of `text(pieces)` fitted to about `target` tokens (no chat template): the tokenizer's count, null when estimated. */
  async #fitBlock(
    text: (pieces: number) => string,
    target: number,
    start: number,
  ): Promise<{ text: string; pieces: number; tokens: number | null }> {
    const tokenizer = this.tokenizer
    if (this.#usable && tokenizer !== null) {
      try {
        const fit = await fitPieces(async (p) => tokenizer.countText(text(p)), target, start)
        return { text: text(fit.pieces), pieces: fit.pieces, tokens: fit.tokens }
      } catch (err) {
        this.#usable = false
        this.#warning = `the engine's tokenizer failed during calibration (${(err as Error).message}); prompt sizes are estimated`
      }
    }
    return { text: text(start), pieces: start, tokens: null }
  }

  /**
   * Fits every request of the layout before anything is sent (the tokenizer is the engine's, and
   * must not share it with the load); null when no tokenizer is used, each size then estimated
   * from its index alone. `signal` stops it between requests.
   * @throws ServegateError REQUEST_ABORTED when `signal` aborts
   */
  async fitRequests(layout: PromptLayout, signal?: AbortSignal): Promise<FittedSizes | null> {
    const tokenizer = this.tokenizer
    if (!this.#usable || tokenizer === null) return null
    const total = layout.total
    const fitted: FittedSizes = { pieces: new Int32Array(total), tokens: new Float64Array(total).fill(Number.NaN), outsideTolerance: 0 }
    let last: { pieces: number; target: number } | null = null
    for (let index = 0; index < total; index++) {
      if (signal?.aborted === true) throw new ServegateError('REQUEST_ABORTED', `calibration aborted at request ${index} of ${total}`)
      const row = layout.row(index)
      if (row !== null) {
        if (this.#usable) fitted.tokens[index] = (await this.#countOrNull(tokenizer, layout.text(index, 0, row))) ?? Number.NaN
        continue
      }
      const size = layout.size(index)
      const estimate = layout.estimate(index, size)
      // The previous request's fit is the best start, moved by the difference of the targets (a trace's or drawn sizes).
      let pieces =
        last === null ? estimate : Math.max(1, last.pieces + Math.round((size.promptTokens - last.target) / ESTIMATED_TOKENS_PER_WORD))
      if (this.#usable) {
        try {
          const fit = await fitPieces((p) => this.#count(tokenizer, layout.text(index, p, null)), size.promptTokens, pieces)
          pieces = fit.pieces
          fitted.tokens[index] = fit.tokens
          last = { pieces: fit.pieces, target: size.promptTokens }
          if (Math.abs(fit.tokens - size.promptTokens) > calibrationTolerance(size.promptTokens)) fitted.outsideTolerance++
        } catch (err) {
          this.#usable = false
          pieces = estimate
          this.#warning =
            `the engine's tokenizer failed during calibration (${(err as Error).message}); ` +
            `prompt sizes are estimated from request ${index} on`
        }
      }
      fitted.pieces[index] = pieces
    }
    return fitted
  }

  /** The engine's count of a prompt as the API sends it (chat: one user message, template included). */
  async #count(tokenizer: EngineTokenizer, prompt: string): Promise<number> {
    const messages: ChatText[] = [{ role: 'user', content: prompt }]
    return this.#api === 'chat' ? tokenizer.countChat(messages) : tokenizer.countText(prompt)
  }

  /** A dataset row's prompt is not resized: a count that fails leaves it uncounted, the tokenizer still used. */
  async #countOrNull(tokenizer: EngineTokenizer, prompt: string): Promise<number | null> {
    try {
      return await this.#count(tokenizer, prompt)
    } catch {
      return null
    }
  }
}
