/**
 * An import's methodology, written from the facts of its source and of the run: what the
 * source defined (read from its code), whether it kept every request, how its failed count was
 * known, what was read. Every importer says the shared parts in the same words.
 */
import { type CellMetrics, PERCENTILE_METHOD, P99_MIN_SAMPLES, UNRECORDED_KEY } from '../schema/run.ts'
import type { StdKind } from './summary-metrics.ts'

/** How a summary-only import knows its failed count: the source's figure and where it came from, or never recorded. */
export type FailedCount = { count: number; from: string } | { count: null; why: string }

/** What an import measured: every request, or only the source's summary (and its failed count). */
export type MeasureShape = { perRequest: true } | { perRequest: false; failed: FailedCount }

/** The facts an import's methodology is written from. */
export interface ImportFacts {
  /** The tool as prose names it: `vLLM`, `SGLang`, `AIPerf`, `GuideLLM`, `llmperf`, `anvil`. */
  tool: string
  /** What was read, e.g. `a vLLM --save-result file written without --save-detailed (line 2)`. */
  read: string
  /** Clauses about the run that follow it in the import line: its traffic, the key spellings mapped… */
  notes?: readonly string[] | undefined
  /** The source's own definitions (clock, ttft, e2e…), each read from its code; they replace servegate's. */
  definitions: Readonly<Record<string, string>>
  /** Per request: when the source's request counts as failed; without it servegate's rule stands. */
  failureRule?: string | undefined
  /** Per request: how the source's values became servegate's. @default 'per-request values converted seconds → ms' */
  conversion?: string | undefined
  /** Summary-only: how the source computed its standard deviations. @default 'population' */
  std?: StdKind | undefined
  /** Summary-only: how to import the run per request instead, where the source can. */
  perRequestHint?: string | undefined
}

/** The methodology strings a summary-only import replaces: what its distributions hold. */
function summaryOnlyMethodology(tool: string, std: StdKind = 'population'): Record<string, string> {
  const stdNote =
    std === 'population'
      ? "stddev is the source's population std (numpy ddof 0) × √(n/(n−1)) with n = samples"
      : "stddev is the source's own sample std (pandas ddof 1), kept as is"
  return {
    distributions:
      `summary-only: each distribution holds only what ${tool} summarized — mean, stddev, p50 (its median) and the ` +
      'pNN keys it wrote; min and max only from p0/p100 (or min/max) keys; ci95, and p25/p75 unless written, are null. ' +
      `The percentiles are the source's linear interpolation, not servegate's ${PERCENTILE_METHOD} (percentileMethod says so). ` +
      `${stdNote}. ` +
      'samples = completed requests: exact for ttft and e2e, ' +
      'an upper bound for tpot (only requests with more than one output token have one); ' +
      'for itl samples is the gap count, total output tokens − completed (one gap per token after the first; ' +
      'exact when every chunk carries one token, an upper bound when chunks carry several), and its stddev is rescaled by that count. ' +
      'promptTokens and completionTokens hold only their exact mean (total ÷ completed). ' +
      'generation, decode and effective prefill have no summary and stay empty',
    p99: `descriptive only below ${P99_MIN_SAMPLES} samples; in a summary-only import it is ${tool}'s interpolated p99`,
  }
}

/** The methodology of an import: servegate's own strings are replaced where these say otherwise. */
export function methodologyOf(facts: ImportFacts, measure: MeasureShape): Record<string, string> {
  const notes = facts.notes === undefined || facts.notes.length === 0 ? '' : `; ${facts.notes.join('; ')}`
  if (measure.perRequest) {
    const conversion = facts.conversion ?? 'per-request values converted seconds → ms'
    return {
      ...facts.definitions,
      ...(facts.failureRule === undefined ? {} : { failures: facts.failureRule }),
      import: `imported from ${facts.read}${notes}; ${conversion}, distributions recomputed by servegate's rules over the ok requests`,
    }
  }
  const hint = facts.perRequestHint === undefined ? '' : `; ${facts.perRequestHint}`
  return {
    ...summaryOnlyMethodology(facts.tool, facts.std),
    ...facts.definitions,
    failures: 'failure codes are unknown in a summary-only import, so failures is empty',
    failedCount:
      measure.failed.count === null
        ? `not recorded: ${measure.failed.why}, so failed is null`
        : `${measure.failed.from} (${measure.failed.count})`,
    import: `summary-only import of ${facts.read}${notes}; requests is empty and nothing per-request is invented${hint}`,
  }
}

/** The figures of a record that a source may leave unrecorded: each is then null, never 0. */
const RECORDABLE_FIGURES = ['totalPromptTokens', 'totalCompletionTokens', 'wallClockMs'] as const

/**
 * The methodology note naming the figures an import's source never recorded (each null in its
 * metrics); none when it recorded them all.
 * @example unrecordedNote('AIPerf', metrics) // { unrecorded: 'not recorded by AIPerf, so null (unknown, never 0): wallClockMs' }
 */
export function unrecordedNote(tool: string, metrics: Pick<CellMetrics, (typeof RECORDABLE_FIGURES)[number]>): Record<string, string> {
  const unknown = RECORDABLE_FIGURES.filter((name) => metrics[name] === null)
  return unknown.length === 0 ? {} : { [UNRECORDED_KEY]: `not recorded by ${tool}, so null (unknown, never 0): ${unknown.join(', ')}` }
}
