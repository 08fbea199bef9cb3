/**
 * A summary-only import's metrics: the distributions hold what the source summarized (its mean,
 * std, median, percentiles), nothing recomputed or invented.
 */
import { EMPTY_DISTRIBUTION } from '../metrics/distribution.ts'
import { type CellMetrics, type CompletionTokenSource, type Distribution, P99_MIN_SAMPLES, REQUEST_METRIC_NAMES } from '../schema/run.ts'

/** A source's summary of one metric (ms for times): numpy's in vLLM and SGLang, pandas' in llmperf, its own elsewhere. */
export interface NumpySummary {
  mean: number | null
  median: number | null
  /** numpy `std` (ddof 0). */
  std: number | null
  /** Keyed by percentile (0–100), numpy linear interpolation. */
  percentiles: ReadonlyMap<number, number>
  max: number | null
}

/** How a source computed its standard deviation: numpy's `std` (ddof 0) or pandas' `std` (ddof 1). */
export type StdKind = 'population' | 'sample'

/**
 * A distribution holding only what the source summarized. A population std becomes the
 * sample std (× √(n/(n−1)), n = `samples`); a sample std is kept; the median is p50; p0 and
 * p100 are min and max. The 95% interval stays null: servegate does not rebuild statistics
 * the source did not give.
 */
export function summaryDistribution(s: NumpySummary | null, samples: number, std: StdKind = 'population'): Distribution {
  if (s === null || samples <= 0) return { ...EMPTY_DISTRIBUTION }
  const p = (q: number): number | null => s.percentiles.get(q) ?? null
  const stddev = s.std === null || samples < 2 ? null : std === 'sample' ? s.std : s.std * Math.sqrt(samples / (samples - 1))
  return {
    samples,
    mean: s.mean,
    stddev,
    ci95Low: null,
    ci95High: null,
    min: p(0),
    p25: p(25),
    p50: s.median ?? p(50),
    p75: p(75),
    p90: p(90),
    p95: p(95),
    p99: p(99),
    max: p(100) ?? s.max,
  }
}

/** A mean known exactly from a total (e.g. total input tokens ÷ completed requests). */
function meanOnlyDistribution(total: number | null, samples: number): Distribution {
  if (total === null || samples <= 0) return { ...EMPTY_DISTRIBUTION }
  return { ...EMPTY_DISTRIBUTION, samples, mean: total / samples }
}

/** The per-metric summaries of a summary-only file, keyed by servegate's names. */
export interface SummaryStats {
  ttft: NumpySummary | null
  tpot: NumpySummary | null
  itl: NumpySummary | null
  e2e: NumpySummary | null
  queueDelay: NumpySummary | null
  /** Full token-count summaries, where the source kept them (else only the exact mean from the totals). */
  promptTokens?: NumpySummary | null | undefined
  completionTokens?: NumpySummary | null | undefined
}

/**
 * The gaps an ITL summary pooled, estimated as one per output token after each request's first:
 * total output tokens − completed (exact when every chunk carries one token); the completed
 * count when the total is unknown.
 */
function itlGapCount(totalOutputTokens: number | null, completed: number): number {
  if (totalOutputTokens === null || totalOutputTokens <= completed) return completed
  return totalOutputTokens - completed
}

/**
 * Cell metrics of a summary-only import: the source's figures, nothing recomputed or invented;
 * a total or a duration it never recorded stays null.
 */
export function summaryMetrics(input: {
  stats: SummaryStats
  completed: number
  totalInputTokens: number | null
  totalOutputTokens: number | null
  outputThroughput: number | null
  requestThroughput: number | null
  /** Null when the source recorded no duration. */
  wallClockMs: number | null
  tokenSource: CompletionTokenSource
  /**
   * How many gaps the ITL summary pooled; default: total output tokens − completed (one gap
   * per token after the first), else the completed count.
   */
  itlSamples?: number | null | undefined
  /** How the source computed its standard deviations. @default 'population' */
  std?: StdKind | undefined
  /** How the source computed its percentiles. @default 'linear-interpolation' (numpy, pandas) */
  percentileMethod?: CellMetrics['percentileMethod'] | undefined
}): CellMetrics {
  const n = input.completed
  const std = input.std ?? 'population'
  const itlSamples = input.itlSamples ?? itlGapCount(input.totalOutputTokens, n)
  const ttft = summaryDistribution(input.stats.ttft, n, std)
  const distributions = {
    ttftMs: ttft,
    timeToFirstOutputMs: { ...ttft },
    e2eMs: summaryDistribution(input.stats.e2e, n, std),
    generationMs: { ...EMPTY_DISTRIBUTION },
    tpotMs: summaryDistribution(input.stats.tpot, n, std),
    decodeTokPerS: { ...EMPTY_DISTRIBUTION },
    effectivePrefillTokPerS: { ...EMPTY_DISTRIBUTION },
    promptTokens: input.stats.promptTokens
      ? summaryDistribution(input.stats.promptTokens, n, std)
      : meanOnlyDistribution(input.totalInputTokens, n),
    completionTokens: input.stats.completionTokens
      ? summaryDistribution(input.stats.completionTokens, n, std)
      : meanOnlyDistribution(input.totalOutputTokens, n),
    itlMs: summaryDistribution(input.stats.itl, n > 0 ? itlSamples : 0, std),
    queueDelayMs: summaryDistribution(input.stats.queueDelay, n, std),
    sendLagMs: { ...EMPTY_DISTRIBUTION },
  } satisfies CellMetrics['distributions']
  return {
    percentileMethod: input.percentileMethod ?? 'linear-interpolation',
    p99MinSamples: P99_MIN_SAMPLES,
    p99DescriptiveOnly: REQUEST_METRIC_NAMES.filter((name) => {
      const d = distributions[name]
      return d.p99 !== null && d.samples < P99_MIN_SAMPLES
    }),
    distributions,
    totalCompletionTokens: input.totalOutputTokens,
    totalPromptTokens: input.totalInputTokens,
    totalCachedPromptTokens: null,
    cachedPromptShare: null,
    cachedPromptTokensUnknownReason: 'an imported summary: its source recorded no cached prompt tokens',
    completionTokenSources: { usage: input.tokenSource === 'usage' ? n : 0, 'client-count': input.tokenSource === 'client-count' ? n : 0 },
    outputThroughputTokPerS: n > 0 ? input.outputThroughput : null,
    requestRateReqPerS: n > 0 ? input.requestThroughput : null,
    wallClockMs: input.wallClockMs,
    canaries: null,
    outputControl: null,
    accuracy: null,
    goodput: null,
    openLoop: null,
    byTurn: null,
    specDecode: null,
  }
}
