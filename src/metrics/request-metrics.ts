import type { CompletionTokenSource } from '../schema/run.ts'

/** Raw client-side observations of one request, monotonic ms (`monoMs()`, process-wide). */
export interface RequestTimings {
  /** When the request bytes were handed to the socket. */
  sentAt: number
  /** Arrival of the read holding the first non-empty delta (reasoning or content). */
  firstOutputAt: number | null
  /** Arrival of the read holding the first non-empty content delta. */
  firstContentAt: number | null
  /** Arrival of the read that ended the stream, or of the failure. */
  endAt: number | null
  /** Arrival time of every chunk that carried a non-empty delta. */
  outputChunkAt: ArrayLike<number>
  /** `usage.prompt_tokens` when the server sent usage. */
  usagePromptTokens: number | null
  /** `usage.completion_tokens` when the server sent usage. */
  usageCompletionTokens: number | null
}

export interface RequestMetrics {
  ttftMs: number | null
  timeToFirstOutputMs: number | null
  e2eMs: number | null
  generationMs: number | null
  tpotMs: number | null
  decodeTokPerS: number | null
  effectivePrefillTokPerS: number | null
  promptTokens: number | null
  completionTokens: number | null
  completionTokenSource: CompletionTokenSource | null
  itlMs: number[]
}

/**
 * Derives the per-request metrics (docs/metrics.md) from raw timings:
 * ttft / time to first output / e2e from the send; generation = e2e − time to first output;
 * tpot = generation / (completion tokens − 1); decode tok/s its inverse in seconds;
 * effective prefill tok/s = prompt tokens / time to first output (queueing included).
 * Completion tokens come from `usage`, else from counting output chunks (source recorded).
 */
export function deriveRequestMetrics(t: RequestTimings): RequestMetrics {
  const since = (at: number | null): number | null => (at === null ? null : at - t.sentAt)
  const ttftMs = since(t.firstContentAt)
  const timeToFirstOutputMs = since(t.firstOutputAt)
  const e2eMs = since(t.endAt)
  const generationMs = e2eMs !== null && timeToFirstOutputMs !== null ? e2eMs - timeToFirstOutputMs : null

  let completionTokens: number | null = null
  let completionTokenSource: CompletionTokenSource | null = null
  if (t.usageCompletionTokens !== null) {
    completionTokens = t.usageCompletionTokens
    completionTokenSource = 'usage'
  } else if (t.outputChunkAt.length > 0) {
    completionTokens = t.outputChunkAt.length
    completionTokenSource = 'client-count'
  }

  const decodable = completionTokens !== null && completionTokens > 1 && generationMs !== null && generationMs > 0
  const tpotMs = decodable ? (generationMs as number) / ((completionTokens as number) - 1) : null
  const decodeTokPerS = decodable ? ((completionTokens as number) - 1) / ((generationMs as number) / 1000) : null
  const effectivePrefillTokPerS =
    t.usagePromptTokens !== null && timeToFirstOutputMs !== null && timeToFirstOutputMs > 0
      ? t.usagePromptTokens / (timeToFirstOutputMs / 1000)
      : null

  const itlMs: number[] = []
  for (let i = 1; i < t.outputChunkAt.length; i++) {
    itlMs.push((t.outputChunkAt[i] as number) - (t.outputChunkAt[i - 1] as number))
  }
  return {
    ttftMs,
    timeToFirstOutputMs,
    e2eMs,
    generationMs,
    tpotMs,
    decodeTokPerS,
    effectivePrefillTokPerS,
    promptTokens: t.usagePromptTokens,
    completionTokens,
    completionTokenSource,
    itlMs,
  }
}

/** The fields of a run record's request that come straight from the derived metrics. */
export function requestMetricFields(m: RequestMetrics) {
  return {
    ttftMs: m.ttftMs,
    timeToFirstOutputMs: m.timeToFirstOutputMs,
    e2eMs: m.e2eMs,
    generationMs: m.generationMs,
    tpotMs: m.tpotMs,
    decodeTokPerS: m.decodeTokPerS,
    effectivePrefillTokPerS: m.effectivePrefillTokPerS,
    promptTokens: m.promptTokens,
    completionTokens: m.completionTokens,
    completionTokenSource: m.completionTokenSource,
  }
}
