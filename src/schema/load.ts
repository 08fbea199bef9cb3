import { z } from 'zod'

/**
 * Latency objectives of one request. A request is **good** when it finished ok and meets every
 * objective given: ttft, tpot and e2e at most their bound, and the `itlPercentile` of its own
 * inter-chunk gaps at most `itlMs`. Unset objectives (null) are not checked.
 * @example { ttftMs: 500, tpotMs: 50 }
 */
export const SLO_FIELDS = {
  /** Time to the first content token, ms. */
  ttftMs: z.number().positive().nullable().default(null),
  /** Time per output token after the first, ms. */
  tpotMs: z.number().positive().nullable().default(null),
  /** Whole request, ms. */
  e2eMs: z.number().positive().nullable().default(null),
  /** Bound on the request's own `itlPercentile` inter-chunk gap, ms. */
  itlMs: z.number().positive().nullable().default(null),
  /** Nearest-rank percentile of a request's gaps held to `itlMs`. @default 99 */
  itlPercentile: z.number().gt(0).max(100).default(99),
}

/** True when at least one objective is set. */
export function hasObjective(s: { ttftMs?: number | null; tpotMs?: number | null; e2eMs?: number | null; itlMs?: number | null }): boolean {
  return [s.ttftMs, s.tpotMs, s.e2eMs, s.itlMs].some((v) => v !== null && v !== undefined)
}

/** The refinement every SLO-carrying schema shares. */
export const OBJECTIVE_REQUIRED = { message: 'give at least one objective: ttftMs, tpotMs, e2eMs or itlMs (ms)', path: ['ttftMs'] }

export const SLO = z.object(SLO_FIELDS).refine(hasObjective, OBJECTIVE_REQUIRED)
export type SLO = z.input<typeof SLO>
export type ResolvedSLO = z.infer<typeof SLO>

/** The objectives a request can miss, as counted in `Goodput.missed`. */
export const SLO_OBJECTIVES = ['ttftMs', 'tpotMs', 'e2eMs', 'itlMs'] as const
export type SLOObjective = (typeof SLO_OBJECTIVES)[number]

/** Goodput of a cell under an SLO: the good requests, their share with its interval, and their rate. */
export const Goodput = z.object({
  slo: SLO,
  /** Measured requests judged: ok and failed (a failed request is never good). */
  samples: z.int().nonnegative(),
  good: z.int().nonnegative(),
  /** good / samples; null without samples. */
  fraction: z.number().min(0).max(1).nullable(),
  /** Wilson 95% interval of the fraction. */
  wilson95Low: z.number().min(0).max(1).nullable(),
  wilson95High: z.number().min(0).max(1).nullable(),
  /** Good requests per second of the cell's wall clock; null when it has none. */
  goodputReqPerS: z.number().nonnegative().nullable(),
  /** Ok requests that missed each objective (one request may miss several), and failed requests. */
  missed: z.object({
    ttftMs: z.int().nonnegative(),
    tpotMs: z.int().nonnegative(),
    e2eMs: z.int().nonnegative(),
    itlMs: z.int().nonnegative(),
    failed: z.int().nonnegative(),
  }),
})
export type Goodput = z.infer<typeof Goodput>

/** How the requests of an open-loop cell were scheduled; null in a record means the closed loop. */
export const ArrivalPlan = z.object({
  /** `constant`, `poisson` or `gamma` inter-arrival times, or offsets replayed from a trace. */
  kind: z.enum(['constant', 'poisson', 'gamma', 'trace']),
  /** Target rate after any ramp-up, requests/s; null for a trace. */
  ratePerS: z.number().positive().nullable(),
  /** Gamma shape: 1 is Poisson, below 1 burstier, above 1 more regular; null unless gamma. */
  burstiness: z.number().positive().nullable(),
  /** Seed of the inter-arrival draws; null when nothing was drawn (constant, trace). */
  seed: z.int().nullable(),
  /** Linear ramp of the rate from `fromRatePerS` to `ratePerS` over the first `durationS`. */
  rampUp: z.object({ durationS: z.number().positive(), fromRatePerS: z.number().nonnegative() }).nullable(),
  /** Cap on requests in flight; a request due at the cap waits (its queueDelayMs). Null: none. */
  maxInFlight: z.int().positive().nullable(),
  /** The replayed trace: its file, sha256, rows in the file and replayed, the time scale applied, and its block size. */
  trace: z
    .object({
      path: z.string(),
      sha256: z.string(),
      rows: z.int().positive(),
      replayed: z.int().positive(),
      timeScale: z.number().positive(),
      /** Tokens per `hash_ids` block the prompts were built with; null in records from before it was kept. */
      blockTokens: z.int().positive().nullable().default(null),
    })
    .nullable(),
  /**
   * The replayed trace's own reuse share: Σ over requests of `blockTokens ×` the leading run of its
   * `hash_ids` seen in earlier requests (capped at its prompt tokens) over Σ prompt tokens, the
   * share a prefix cache holding every block serves. Null without `hash_ids` (or a rate process).
   */
  reuseShare: z.number().min(0).max(1).nullable().default(null),
  /** sha256 of the scheduled offsets (µs, decimal, one per line): equal on both arms of a matched pair. */
  scheduleSha256: z.string(),
  /** The last scheduled offset, ms from the start of the measured phase. */
  scheduledSpanMs: z.number().nonnegative(),
  /** Requests per second the schedule offers: (n − 1) / span; null for one request. */
  offeredRatePerS: z.number().positive().nullable(),
})
export type ArrivalPlan = z.infer<typeof ArrivalPlan>

/** What an open-loop cell measured about its own dispatch. */
export const OpenLoopStats = z.object({
  /** The most requests in flight at once. */
  inFlightMax: z.int().nonnegative(),
  /** Requests that were due while the in-flight cap was reached and waited for a free place. */
  cappedRequests: z.int().nonnegative(),
})
export type OpenLoopStats = z.infer<typeof OpenLoopStats>
