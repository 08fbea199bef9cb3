import { z } from 'zod'
import { GateName, WinGateName } from '../schema/gate.ts'
import { hasObjective, OBJECTIVE_REQUIRED, SLO_FIELDS } from '../schema/load.ts'
import { DEFAULT_RESAMPLES } from '../stats/bootstrap.ts'

/**
 * Two-sided confidence of every gate's interval unless told otherwise: each claim rests on a
 * one-sided 99% bound, so a gate claims a win (or a regression) that is not there at most 1%
 * of the time. Calibrated by `npm run bench:gate`.
 */
export const DEFAULT_CONFIDENCE = 0.98

/** Seed of the bootstrap when none is given; recorded in every decision's `effect.method`. */
export const DEFAULT_SEED = 1

/**
 * Relative standard deviation of one launch's multiplicative effect (weights placement, clocks,
 * allocator state) assumed when a gate sees one launch per arm. Per-request statistics inside one
 * launch cannot see it, so it is added in quadrature to the log-ratio's standard error
 * (2·launchNoise² for two independent launches). 2% is the variation servegate assumes by default (docs/gates.md), not a measured one; set
 * your own measured value, or `0` only when you have shown launches do not vary. Ignored when
 * the arms come with repeated launches (the launch-level test measures it).
 */
export const DEFAULT_LAUNCH_NOISE = 0.02

/** Sequential looks suggested for streaming cells; gates use all the requests at once unless given looks. */
export const SUGGESTED_LOOKS = [16, 32, 64, 128] as const

const common = {
  /** Two-sided confidence of the interval; each claim uses one side. @default 0.98 */
  confidence: z.number().gt(0.5).lt(1).default(DEFAULT_CONFIDENCE),
  /** Bootstrap seed. @default 1 */
  seed: z.int().default(DEFAULT_SEED),
  /** Bootstrap resamples. @default 2000 */
  resamples: z.int().min(100).default(DEFAULT_RESAMPLES),
  /** Relative sd of the launch effect (e.g. 0.02), see DEFAULT_LAUNCH_NOISE. @default 0.02 */
  launchNoise: z.number().min(0).max(0.5).default(DEFAULT_LAUNCH_NOISE),
}

/**
 * Per-request rate metrics a win gate compares: `throughputTokPerS` is completionTokens / e2e per
 * request; `enginePrefillTokPerS` is the engine's own prefill rate (llama-server `timings`).
 */
export const RateMetric = z.enum(['decodeTokPerS', 'effectivePrefillTokPerS', 'enginePrefillTokPerS', 'throughputTokPerS'])
export type RateMetric = z.infer<typeof RateMetric>

/**
 * Service-level metrics of a whole cell (one figure per launch): aggregate output tokens per
 * second of wall clock, and completed requests per second. `toWinThroughput` judges the first.
 */
export const ServiceMetric = z.enum(['outputThroughputTokPerS', 'requestRateReqPerS'])
export type ServiceMetric = z.infer<typeof ServiceMetric>

/** Any metric a win gate can judge. */
export const WinMetric = z.union([RateMetric, ServiceMetric])
export type WinMetric = z.infer<typeof WinMetric>

export { WinGateName }

/**
 * How a win gate summarizes the paired log-ratios: their mean (the geometric mean of the ratios,
 * BCa bootstrap) or their Hodges–Lehmann pseudo-median (Wilcoxon signed-rank interval), which a
 * stall on one arm moves by one rank rather than by its size.
 */
export const WinEstimator = z.enum(['geometric-mean', 'hodges-lehmann'])
export type WinEstimator = z.infer<typeof WinEstimator>

/**
 * Each gate's estimator unless told: the one with the best worst-case power over the noise models
 * of `npm run bench:gate` (clean, a 5% preemption tail at 0.3× decode speed, t(3) heavy tails,
 * drift within a cell) whose level holds in all of them (docs/gates.md, "Estimators chosen by
 * measured power"). That is Hodges–Lehmann for every gate: KV-cache preemption slows a few
 * requests on one arm several times over and scheduler stalls do the same to time to first
 * output; they drag a mean and widen its interval but move the pseudo-median by a rank. On clean
 * noise it gives up about a point of power. `toWinThroughput` judges the cell's aggregate figure
 * by default; its estimator applies with `metric: 'throughputTokPerS'`.
 */
export const DEFAULT_WIN_ESTIMATOR: Record<WinGateName, WinEstimator> = {
  toWinDecode: 'hodges-lehmann',
  toWinPrefill: 'hodges-lehmann',
  toWinThroughput: 'hodges-lehmann',
}

/**
 * Conversation turns a gate judges, 1-based, `to` included (open-ended without it): turn ≥ 2 is
 * where a prefix cache pays. Requests of other turns are left out of both arms alike.
 * @example { from: 2 }
 */
export const TurnRange = z
  .object({ from: z.int().min(1), to: z.int().min(1).optional() })
  .refine((r) => r.to === undefined || r.to >= r.from, { message: 'turns.to must be at least turns.from', path: ['to'] })
export type TurnRange = z.infer<typeof TurnRange>

export const WinGateOptions = z.object({
  gate: WinGateName,
  /**
   * The compared metric; by default the gate's own: decode tok/s, effective prefill tok/s, or the
   * cell's aggregate output tok/s (`toWinThroughput`, a service-level figure per launch).
   */
  metric: WinMetric.optional(),
  /** The win must exceed 1 + margin (0.05: at least 5% better). @default 0 */
  margin: z.number().gt(-1).default(0),
  /** The summary of the paired log-ratios; by default per gate, see DEFAULT_WIN_ESTIMATOR. */
  estimator: WinEstimator.optional(),
  /**
   * Paired-request counts at which to look, e.g. [16, 32, 64, 128]: the gate stops at the first
   * decisive look, with α spent across looks (Pocock-type Lan–DeMets). Null: one look at all
   * paired requests. @default null
   */
  looks: z.array(z.int().min(2)).min(1).nullable().default(null),
  /** Conversations: judge only these turns (not `toWinThroughput`, a cell-level figure). @default every request */
  turns: TurnRange.optional(),
  ...common,
})
export type WinGateOptions = z.input<typeof WinGateOptions>
export type ResolvedWinGateOptions = z.infer<typeof WinGateOptions>

export const LatencyMetric = z.enum(['ttft', 'tpot', 'e2e', 'itl', 'timeToFirstOutput'])
export type LatencyMetric = z.infer<typeof LatencyMetric>

export const HoldLatencyGateOptions = z
  .object({
    gate: GateName.extract(['toHoldLatency']).default('toHoldLatency'),
    metric: LatencyMetric,
    /** Nearest-rank percentile. @default 50 */
    percentile: z.union([z.literal(50), z.literal(90), z.literal(95), z.literal(99)]).default(50),
    /** Tolerated regression of candidate/baseline, percent (10: up to 10% slower passes). */
    notWorseThanPct: z.number().min(0).optional(),
    /** An absolute bound on the candidate's percentile, ms. */
    atMostMs: z.number().positive().optional(),
    /** Conversations: judge only these turns. @default every request */
    turns: TurnRange.optional(),
    ...common,
  })
  .refine((o) => (o.notWorseThanPct === undefined) !== (o.atMostMs === undefined), {
    message: 'give exactly one of `notWorseThanPct` (relative to the baseline) or `atMostMs` (absolute)',
    path: ['notWorseThanPct'],
  })
export type HoldLatencyGateOptions = z.input<typeof HoldLatencyGateOptions>
export type ResolvedHoldLatencyGateOptions = z.infer<typeof HoldLatencyGateOptions>

export const AccuracyGapGateOptions = z.object({
  gate: GateName.extract(['toStayWithinAccuracyGap']).default('toStayWithinAccuracyGap'),
  /** Accuracy drop (percentage points) that counts as a regression. @default 2 */
  points: z.number().positive().max(100).default(2),
  /** Mean output-length gap (percent) that earns a warning; never fails on its own. @default 10 */
  outputLengthPct: z.number().positive().default(10),
  /** Two-sided confidence of the difference's interval. @default 0.98 */
  confidence: z.number().gt(0.5).lt(1).default(DEFAULT_CONFIDENCE),
})
export type AccuracyGapGateOptions = z.input<typeof AccuracyGapGateOptions>
export type ResolvedAccuracyGapGateOptions = z.infer<typeof AccuracyGapGateOptions>

/**
 * Options of the SLO gate: the objectives of one request (at least one) and the share of
 * requests that must meet all of them.
 * @example { ttftMs: 500, tpotMs: 50, percentile: 95 }
 */
export const SLOGateOptions = z
  .object({
    gate: GateName.extract(['toMeetSLO', 'capacity probe']).default('toMeetSLO'),
    ...SLO_FIELDS,
    /** Percent of requests that must be good (meet every objective): 95 means at least 95%. @default 90 */
    percentile: z.number().gt(0).lt(100).default(90),
    /** Two-sided confidence of the Wilson interval; each claim uses one side. @default 0.98 */
    confidence: z.number().gt(0.5).lt(1).default(DEFAULT_CONFIDENCE),
  })
  .refine(hasObjective, OBJECTIVE_REQUIRED)
export type SLOGateOptions = z.input<typeof SLOGateOptions>
export type ResolvedSLOGateOptions = z.infer<typeof SLOGateOptions>

/**
 * Options of the prefix-cache check: the least share of prompt tokens the engine must report
 * serving from its prefix cache, on which arm, over which turns.
 * @example { atLeast: 0.5, turns: { from: 2 } }
 */
export const ReuseCacheGateOptions = z.strictObject({
  gate: GateName.extract(['toReuseCache']).default('toReuseCache'),
  /** The least cached share of prompt tokens that passes, a fraction (0.5: half of them). */
  atLeast: z.number().min(0).max(1),
  /** On a pair, judge only this arm. @default both arms */
  arm: z.enum(['baseline', 'candidate']).optional(),
  /** Conversations: judge only these turns. @default turns ≥ 2 for a conversation, every request otherwise */
  turns: TurnRange.optional(),
})
export type ReuseCacheGateOptions = z.input<typeof ReuseCacheGateOptions>

/** Options of the capacity comparison. */
export const SustainGateOptions = z.object({
  gate: GateName.extract(['toSustainMoreThan']).default('toSustainMoreThan'),
  /** The candidate must sustain at least (1 + by) × the baseline's capacity (0.1: 10% more). @default 0 */
  by: z.number().min(0).default(0),
})
export type SustainGateOptions = z.input<typeof SustainGateOptions>

/** Parses options once at the boundary; a wrong one throws a TypeError naming the gate and the fix. */
export function parseOptions<S extends z.ZodType>(gate: string, schema: S, options: unknown): z.infer<S> {
  const parsed = schema.safeParse(options)
  if (!parsed.success) throw new TypeError(`${gate}: invalid options\n${z.prettifyError(parsed.error)}`)
  return parsed.data
}
