/**
 * Speculative decoding's draft acceptance, from whichever source the engine offers: its Prometheus
 * counters (vLLM, llama.cpp), its gauges (SGLang), or its per-reply timings (llama-server). One
 * definition for all: acceptance rate = accepted ÷ draft tokens; mean acceptance length = 1 +
 * accepted tokens ÷ drafts, the bonus token of each verification step counted (vLLM's
 * `SpecDecodingLogging`, SGLang's `spec_accept_length`).
 */
import type { SpecDecodeMetrics } from '../schema/run.ts'

/** Counter deltas of one cell's measured phase. */
export interface DraftCounts {
  /** Verification steps that checked a draft; null where the engine does not count them. */
  drafts: number | null
  draftTokens: number
  acceptedTokens: number
  /** Accepted tokens per draft position (0-based); null where not exported. */
  acceptedByPosition: readonly number[] | null
}

/** The figures of a cell from counter deltas (or summed timings); null when nothing was drafted. Pure. */
export function specDecodeFromCounts(counts: DraftCounts, source: SpecDecodeMetrics['source']): SpecDecodeMetrics | null {
  const { drafts, draftTokens, acceptedTokens, acceptedByPosition } = counts
  if (draftTokens === 0 && (drafts === null || drafts === 0)) return null
  const countsDrafts = drafts !== null && drafts > 0
  return {
    source,
    drafts,
    draftTokens,
    acceptedTokens,
    acceptanceRate: draftTokens > 0 ? acceptedTokens / draftTokens : null,
    meanAcceptanceLength: countsDrafts ? 1 + acceptedTokens / drafts : null,
    acceptanceRateByPosition: countsDrafts && acceptedByPosition !== null ? acceptedByPosition.map((n) => n / drafts) : null,
    note:
      drafts === null
        ? "the source counts no drafts (verification steps), so the mean acceptance length is not known; read the engine's /metrics for it"
        : null,
  }
}

/**
 * SGLang's figures: `sglang:spec_accept_length` (mean acceptance length) and, in later releases,
 * `sglang:spec_accept_rate`, gauges of the scheduler's last logging window, read at the cell's end.
 * Null when it exports neither. Pure.
 */
export function specDecodeFromGauges(acceptLength: number | null, acceptRate: number | null): SpecDecodeMetrics | null {
  if (acceptLength === null && acceptRate === null) return null
  return {
    source: 'prometheus-gauges',
    drafts: null,
    draftTokens: null,
    acceptedTokens: null,
    acceptanceRate: acceptRate,
    meanAcceptanceLength: acceptLength,
    acceptanceRateByPosition: null,
    note:
      "SGLang's gauges cover its last logging window (--decode-log-interval decode steps) before the cell's end, not every request; " +
      'it exports no draft counters' +
      (acceptRate === null ? ', and this release no sglang:spec_accept_rate' : ''),
  }
}

/**
 * llama-server's per-reply `timings.draft_n` (draft tokens) and `timings.draft_n_accepted`, summed
 * over the replies that carry them (a server without a draft model sends neither).
 * @example const drafts = new ReplyDraftTally(); drafts.add(record.engineTimings); drafts.metrics()
 */
export class ReplyDraftTally {
  #draftTokens = 0
  #acceptedTokens = 0
  #replies = 0

  add(timings: Readonly<Record<string, number>> | null): void {
    const drafted = timings?.['draft_n']
    const accepted = timings?.['draft_n_accepted']
    if (drafted === undefined || accepted === undefined) return
    this.#draftTokens += drafted
    this.#acceptedTokens += accepted
    this.#replies++
  }

  /** The cell's figures from the replies' timings; null when no reply carried any. */
  metrics(): SpecDecodeMetrics | null {
    if (this.#replies === 0) return null
    return specDecodeFromCounts(
      { drafts: null, draftTokens: this.#draftTokens, acceptedTokens: this.#acceptedTokens, acceptedByPosition: null },
      'response-timings',
    )
  }
}
