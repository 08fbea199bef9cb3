import { z } from 'zod'

/**
 * Speculative decoding as the simulated engine's counters report it: each verification step
 * drafts `draftTokens` tokens and accepts a share of them (accepted ÷ drafted over the steps is
 * `acceptanceRate`), emitting the accepted ones and a bonus token. Decode timing is not changed:
 * only the counters an engine exports are modelled.
 * @example { draftTokens: 3, acceptanceRate: 0.7 }
 */
export const SimSpeculative = z.strictObject({
  /** Draft tokens per verification step (vLLM's `num_speculative_tokens`, llama.cpp's `--spec-draft-n-max`). */
  draftTokens: z.int().min(1).max(64),
  /** Accepted ÷ drafted tokens over the steps, 0…1. */
  acceptanceRate: z.number().min(0).max(1),
})
export type SimSpeculative = z.infer<typeof SimSpeculative>

/** The speculative decoding counters so far, as the engine exports them. */
export interface SimSpecCounters {
  /** Verification steps. */
  drafts: number
  draftTokens: number
  acceptedTokens: number
  /** Accepted tokens per draft position (0-based). */
  acceptedPerPosition: number[]
}

/**
 * Counts each completion's verification steps: after its first token (from the prefill), steps
 * that accept a deterministic share of their draft (a running remainder keeps the accepted share
 * at `acceptanceRate`, a prefix of the draft positions) plus a bonus token, until its tokens are out.
 * @example const spec = new SimSpecDecode({ draftTokens: 3, acceptanceRate: 0.5 }); spec.add(40); spec.counters()
 */
export class SimSpecDecode {
  readonly #spec: SimSpeculative
  readonly #counters: SimSpecCounters
  #remainder = 0

  constructor(spec: SimSpeculative) {
    this.#spec = spec
    this.#counters = {
      drafts: 0,
      draftTokens: 0,
      acceptedTokens: 0,
      acceptedPerPosition: Array.from({ length: spec.draftTokens }, () => 0),
    }
  }

  /** A completion emitted `tokens` tokens: its verification steps are counted. */
  add(tokens: number): void {
    const k = this.#spec.draftTokens
    for (let left = tokens - 1; left > 0;) {
      this.#remainder += this.#spec.acceptanceRate * k
      const planned = Math.min(k, Math.floor(this.#remainder))
      this.#remainder -= planned
      // The last step can accept only what is left to emit, the bonus token included.
      const accepted = Math.min(planned, left - 1)
      this.#counters.drafts++
      this.#counters.draftTokens += k
      this.#counters.acceptedTokens += accepted
      for (let p = 0; p < accepted; p++) this.#counters.acceptedPerPosition[p] = (this.#counters.acceptedPerPosition[p] as number) + 1
      left -= accepted + 1
    }
  }

  /** The counters so far (a copy). */
  counters(): SimSpecCounters {
    return { ...this.#counters, acceptedPerPosition: [...this.#counters.acceptedPerPosition] }
  }
}
