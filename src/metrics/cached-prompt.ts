import type { CellMetrics, RequestRecord } from '../schema/run.ts'

/**
 * Why a cell's cached prompt tokens are unknown when none of its ok requests reported them: the
 * engine does not report them at all, or (vLLM) it leaves the figure out when it is 0.
 */
export const CACHED_PROMPT_TOKENS_UNREPORTED =
  'no ok request reported cached prompt tokens (usage.prompt_tokens_details.cached_tokens or timings.cache_n): ' +
  'the engine does not report them (vLLM reports them with --enable-prompt-tokens-details, SGLang with --enable-cache-report), ' +
  'or it leaves out a 0 (vLLM) and nothing was cached'

/** What the engine reported of its prefix cache over some requests: the cached prompt tokens and their share. */
export interface CachedPromptFigures {
  /** Ok requests counted. */
  requests: number
  /** Of them, those whose engine reported a cached-token figure. */
  reported: number
  /** Their prompt tokens. */
  promptTokens: number
  /** Their cached prompt tokens; null when none reported the figure (unknown, never 0). */
  cachedPromptTokens: number | null
  /** cachedPromptTokens ÷ promptTokens; null when unknown or there were no prompt tokens. */
  share: number | null
  /** Why cachedPromptTokens is null; null when it is known. */
  unknownReason: string | null
}

/**
 * The engine-reported cached prompt tokens of ok requests, added one at a time. Once any request
 * reported the figure, one that did not counts 0: vLLM leaves `prompt_tokens_details` out when
 * nothing was cached (its releases test the count's truth), while SGLang and llama.cpp report
 * every request. With no request reporting it the figure is unknown, with the reason.
 * @example const t = new CachedPromptTally(); for (const r of record.requests) t.add(r); t.figures().share
 */
export class CachedPromptTally {
  #requests = 0
  #reported = 0
  #promptTokens = 0
  #cachedPromptTokens = 0

  /** Counts an ok request; any other is left out, as from every figure of a cell. */
  add(r: Pick<RequestRecord, 'status' | 'promptTokens' | 'cachedPromptTokens'>): void {
    if (r.status !== 'ok') return
    this.#requests++
    this.#promptTokens += r.promptTokens ?? 0
    if (r.cachedPromptTokens === null) return
    this.#reported++
    this.#cachedPromptTokens += r.cachedPromptTokens
  }

  figures(): CachedPromptFigures {
    const known = this.#reported > 0
    const unknownReason = known ? null : this.#requests === 0 ? 'no request completed' : CACHED_PROMPT_TOKENS_UNREPORTED
    return {
      requests: this.#requests,
      reported: this.#reported,
      promptTokens: this.#promptTokens,
      cachedPromptTokens: known ? this.#cachedPromptTokens : null,
      share: known && this.#promptTokens > 0 ? this.#cachedPromptTokens / this.#promptTokens : null,
      unknownReason,
    }
  }
}

/** The cached-prompt figures of some requests (see `CachedPromptTally`). */
export function cachedPromptFigures(
  requests: Iterable<Pick<RequestRecord, 'status' | 'promptTokens' | 'cachedPromptTokens'>>,
): CachedPromptFigures {
  const tally = new CachedPromptTally()
  for (const r of requests) tally.add(r)
  return tally.figures()
}

/** A cell's cached-prompt fields of its metrics, from its figures. */
export function cachedPromptMetrics(
  f: CachedPromptFigures,
): Pick<CellMetrics, 'totalCachedPromptTokens' | 'cachedPromptShare' | 'cachedPromptTokensUnknownReason'> {
  return { totalCachedPromptTokens: f.cachedPromptTokens, cachedPromptShare: f.share, cachedPromptTokensUnknownReason: f.unknownReason }
}
