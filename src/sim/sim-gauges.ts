import type { EngineHooks } from './scheduler.ts'
import type { ResolvedSimOptions } from './sim-options.ts'

/** The load gauges a `/metrics` scrape reads. */
export interface SimGaugeValues {
  /** Jobs in the decode batch. */
  running: number
  /** Streams open but not in the batch. */
  waiting: number
  /** Fraction of the KV budget in use, 0..1. */
  kvUsage: number
}

/** Where the gauges are read from: the engine's scheduler and the server's open streams. */
export interface GaugeSource {
  running(): number
  /** Jobs an abort leaked (`leakKvOnAbort`): they count as running and hold their KV. */
  leaked(): number
  reservedTokens(): number
  /** Streams open now. */
  openStreams(): number
}

/**
 * The sim's load gauges as its dialect's engine publishes them. Most read them live at each
 * scrape; SGLang's scheduler publishes them at a prefill (counting the batch already decoding)
 * and every `decodeLogInterval` decode steps, and a scrape between reads the last values: the
 * engine's `hooks` publish them then.
 * @example const gauges = new SimGauges(opts, source); const engine = new SimEngine(opts, undefined, gauges.hooks); gauges.read()
 */
export class SimGauges {
  /** The scheduler's observers that publish the gauges; none where they are read live. */
  readonly hooks: EngineHooks
  readonly #published: SimGaugeValues | null
  readonly #kvBudgetTokens: number | null
  readonly #source: GaugeSource

  constructor(opts: Pick<ResolvedSimOptions, 'dialect' | 'decodeLogInterval' | 'kvBudgetTokens'>, source: GaugeSource) {
    this.#kvBudgetTokens = opts.kvBudgetTokens
    this.#source = source
    this.#published = opts.dialect === 'sglang' ? { running: 0, waiting: 0, kvUsage: 0 } : null
    this.hooks =
      this.#published === null
        ? {}
        : {
            onPrefill: (running) => this.#publish(running),
            onStep: (step, batchSize) => {
              if (step % opts.decodeLogInterval === 0) this.#publish(batchSize)
            },
          }
  }

  /** The gauges a scrape reads now. */
  read(): SimGaugeValues {
    if (this.#published !== null) return { ...this.#published }
    const running = this.#source.running()
    return { running: running + this.#source.leaked(), waiting: this.#source.openStreams() - running, kvUsage: this.#kvUsage() }
  }

  #publish(running: number): void {
    const published = this.#published as SimGaugeValues
    published.running = running + this.#source.leaked()
    published.waiting = Math.max(0, this.#source.openStreams() - this.#source.running())
    published.kvUsage = this.#kvUsage()
  }

  /** Without a KV budget, the batch's share of 64 seats (leaked jobs' included). */
  #kvUsage(): number {
    const kvBudget = this.#kvBudgetTokens
    return kvBudget === null ? Math.min(1, (this.#source.running() + this.#source.leaked()) / 64) : this.#source.reservedTokens() / kvBudget
  }
}
