import type { SimCounters, SimTimings } from './metrics.ts'
import type { PrefixCacheCounters } from './prefix-cache.ts'
import type { SimEngine } from './scheduler.ts'
import { FAULT_KINDS, type FaultKind } from './sim-options.ts'

/**
 * Whether the request at arrival `index` is one of the `share` preempted, spread evenly: with 0.05,
 * requests 19, 39, 59… Pure.
 * @example preemptedAt(19, 0.05) // true
 */
export function preemptedAt(index: number, share: number): boolean {
  return Math.floor((index + 1) * share) > Math.floor(index * share)
}

/** Counters of a running simulated engine. */
export interface SimStats {
  /** `POST /tokenize` calls answered. */
  tokenizeRequests: number
  /** Completion requests accepted for serving (valid body, right model), faulted ones included. */
  requests: number
  /** Streams open now (queued, prefilling, decoding or stalled). */
  active: number
  /** The most streams open at once. */
  maxActive: number
  /** TCP connections the server has accepted so far. */
  connectionsAccepted: number
  /** The most streams in the decode batch at once. */
  maxRunning: number
  /** Streams waiting for admission now (capacity model: a seat or KV room). */
  queued: number
  /** The most streams that waited for admission at once. */
  maxQueued: number
  /** Faults injected so far, by kind. */
  faultsInjected: Record<FaultKind, number>
  /** Streams without a fault that the server wrote to the end (`[DONE]` included): each one a client must count as ok. */
  cleanCompletions: number
}

/** A completion stream that ended, as the engine's own counters and timing sums take it. */
export interface EndedCompletion {
  /** Tokens it wrote. */
  emittedTokens: number
  /** Written to the end, `[DONE]` included. */
  complete: boolean
  /** A fault was planned for it. */
  faulted: boolean
  promptTokens: number
  /** Of its prompt tokens, those the prefix cache held (not computed by its prefill). */
  cachedTokens: number
  /** When it was accepted, `performance.now()` ms. */
  openedAt: number
  /** When its prefill ended (its first token); null when it never did. */
  firstTokenAt: number | null
  /** When it ended. */
  endedAt: number
}

/**
 * What a simulated engine has served so far, counted as it happens: connections, tokenize calls,
 * completions accepted (and their faults), opened and ended, with the engine's own token counts
 * and timing sums that its `/metrics` reports.
 * @example const tally = new ServedTally(50_000); const index = tally.accepted(null); tally.opened(32, 1)
 */
export class ServedTally {
  readonly #prefillTokPerS: number
  readonly #timings: SimTimings = { count: 0, ttftSecondsSum: 0, prefillSecondsSum: 0, decodeSecondsSum: 0 }
  readonly #faultsInjected = Object.fromEntries(FAULT_KINDS.map((kind) => [kind, 0])) as Record<FaultKind, number>
  #requests = 0
  #promptTokens = 0
  #generationTokens = 0
  #requestsFinished = 0
  #cleanCompletions = 0
  #tokenizeRequests = 0
  #preemptions = 0
  #maxActive = 0
  #connectionsAccepted = 0

  /** @param prefillTokPerS the modelled prefill rate the prefill-time sum is counted at */
  constructor(prefillTokPerS: number) {
    this.#prefillTokPerS = prefillTokPerS
  }

  /** The timing sums of the completions that produced output; the tally's own object, read by `/metrics`. */
  get timings(): Readonly<SimTimings> {
    return this.#timings
  }

  /** Completion requests accepted so far: the next one's arrival index. */
  get requests(): number {
    return this.#requests
  }

  /** A TCP connection was accepted. */
  connected(): void {
    this.#connectionsAccepted++
  }

  /** A `/tokenize` call is answered. */
  tokenized(): void {
    this.#tokenizeRequests++
  }

  /** A completion request was accepted for serving, with the fault planned for it; returns its arrival index. */
  accepted(fault: FaultKind | null): number {
    if (fault) this.#faultsInjected[fault]++
    return this.#requests++
  }

  /** An accepted completion opened its stream; `active` streams are open now, this one included. */
  opened(promptTokens: number, active: number): void {
    this.#promptTokens += promptTokens
    this.#maxActive = Math.max(this.#maxActive, active)
  }

  /** The engine preempted a request (SGLang: retracted it); counted on `/metrics`. */
  preempted(): void {
    this.#preemptions++
  }

  /** A completion's stream ended. */
  ended(c: EndedCompletion): void {
    if (c.complete && !c.faulted) this.#cleanCompletions++
    this.#generationTokens += c.emittedTokens
    this.#requestsFinished++
    if (c.emittedTokens === 0 || c.firstTokenAt === null) return
    this.#timings.count++
    this.#timings.ttftSecondsSum += (c.firstTokenAt - c.openedAt) / 1000
    this.#timings.prefillSecondsSum += (c.promptTokens - c.cachedTokens) / this.#prefillTokPerS
    this.#timings.decodeSecondsSum += (c.endedAt - c.firstTokenAt) / 1000
  }

  /** The counters `/metrics` renders, with the gauges read now and the prefix cache's counters. */
  counters(gauges: Pick<SimCounters, 'running' | 'waiting' | 'kvUsage'>, cache: PrefixCacheCounters): SimCounters {
    const { running, waiting, kvUsage } = gauges
    return {
      running,
      waiting,
      kvUsage,
      promptTokens: this.#promptTokens,
      generationTokens: this.#generationTokens,
      requestsFinished: this.#requestsFinished,
      preemptions: this.#preemptions,
      prefixCacheQueries: cache.queriedTokens,
      prefixCacheHits: cache.hitTokens,
      prefixCacheHitRate: cache.queriedTokens === 0 ? 0 : cache.hitTokens / cache.queriedTokens,
    }
  }

  /** The counters so far; `active` streams are open now. */
  stats(active: number, engine: Pick<SimEngine, 'maxRunning' | 'queued' | 'maxQueued'>): SimStats {
    return {
      requests: this.#requests,
      tokenizeRequests: this.#tokenizeRequests,
      active,
      maxActive: this.#maxActive,
      connectionsAccepted: this.#connectionsAccepted,
      maxRunning: engine.maxRunning(),
      queued: engine.queued(),
      maxQueued: engine.maxQueued(),
      faultsInjected: { ...this.#faultsInjected },
      cleanCompletions: this.#cleanCompletions,
    }
  }
}
