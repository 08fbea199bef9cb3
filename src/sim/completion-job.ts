import type { ServerResponse } from 'node:http'
import type { EngineJob } from './scheduler.ts'
import type { EndedCompletion } from './served-tally.ts'
import { SimStream, type StreamPlan } from './sim-stream.ts'

/**
 * One accepted completion as the engine runs it: the stream it steps, and when its prefill ended
 * (its first step, its first token), so that its end reports the engine's own timings.
 * @example const job = new CompletionJob(res, plan, false, (ended) => tally.ended(ended)); job.stream.open(); engine.submit(job)
 */
export class CompletionJob implements EngineJob {
  readonly stream: SimStream
  readonly promptTokens: number
  readonly reservedTokens: number
  readonly #openedAt = performance.now()
  #firstTokenAt: number | null = null

  /**
   * @param faulted a fault was planned for it
   * @param onEnd called once as its stream ends, however it ends
   */
  constructor(res: ServerResponse, plan: StreamPlan, faulted: boolean, onEnd: (ended: EndedCompletion) => void) {
    this.stream = new SimStream(res, plan, (emittedTokens, complete) => {
      const firstTokenAt = this.#firstTokenAt
      onEnd({
        emittedTokens,
        complete,
        faulted,
        promptTokens: plan.promptTokens,
        openedAt: this.#openedAt,
        firstTokenAt,
        endedAt: performance.now(),
      })
    })
    this.promptTokens = this.stream.promptTokens
    this.reservedTokens = this.stream.reservedTokens
  }

  step(): boolean {
    this.#firstTokenAt ??= performance.now()
    return this.stream.step()
  }
}
