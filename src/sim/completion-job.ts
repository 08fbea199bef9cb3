import type { ServerResponse } from 'node:http'
import type { CachedPrompt } from './prefix-cache.ts'
import type { EngineJob } from './scheduler.ts'
import type { EndedCompletion } from './served-tally.ts'
import { SimStream, type StreamPlan } from './sim-stream.ts'

/**
 * One accepted completion as the engine runs it: the stream it steps, its prompt against the
 * prefix cache (looked up as its prefill starts, cached as it ends, its reply cached after it as
 * the stream completes), and when its prefill ended
 * (its first step, its first token), so that its end reports the engine's own timings.
 * @example const job = new CompletionJob(res, plan, false, (ended) => tally.ended(ended)); job.stream.open(); engine.submit(job)
 */
export class CompletionJob implements EngineJob {
  readonly stream: SimStream
  readonly promptTokens: number
  readonly reservedTokens: number
  readonly #prompt: CachedPrompt | null
  readonly #openedAt = performance.now()
  #firstTokenAt: number | null = null

  /**
   * @param faulted a fault was planned for it
   * @param onEnd called once as its stream ends, however it ends
   * @param prompt its prompt against the prefix cache; null without one
   */
  constructor(
    res: ServerResponse,
    plan: StreamPlan,
    faulted: boolean,
    onEnd: (ended: EndedCompletion) => void,
    prompt: CachedPrompt | null = null,
  ) {
    this.#prompt = prompt
    this.stream = new SimStream(res, plan, (emittedTokens, complete) => {
      if (complete) this.#prompt?.generated(this.stream.content)
      const firstTokenAt = this.#firstTokenAt
      onEnd({
        emittedTokens,
        complete,
        faulted,
        promptTokens: plan.promptTokens,
        cachedTokens: this.#prompt?.cachedTokens ?? 0,
        openedAt: this.#openedAt,
        firstTokenAt,
        endedAt: performance.now(),
      })
    })
    this.promptTokens = this.stream.promptTokens
    this.reservedTokens = this.stream.reservedTokens
  }

  startPrefill(): number {
    if (this.#prompt === null) return this.promptTokens
    const cached = this.#prompt.lookup()
    this.stream.prefixCached(cached)
    return this.promptTokens - cached
  }

  step(): boolean {
    if (this.#firstTokenAt === null) {
      this.#firstTokenAt = performance.now()
      this.#prompt?.prefilled()
    }
    return this.stream.step()
  }
}
