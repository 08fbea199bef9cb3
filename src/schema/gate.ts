import { z } from 'zod'
import { NoiseFloor } from './noise.ts'

/** The three outcomes of every gate: decided either way, or not enough evidence yet. */
export const GateOutcome = z.enum(['pass', 'fail', 'inconclusive'])
export type GateOutcome = z.infer<typeof GateOutcome>

/**
 * Every gate's name, as its decisions carry it: the matcher that asked (e.g. `toWinDecode`), or
 * `capacity probe` for the SLO check of one probe of a capacity search.
 */
export const GateName = z.enum([
  'toWinDecode',
  'toWinPrefill',
  'toWinThroughput',
  'toHoldLatency',
  'toStayWithinAccuracyGap',
  'toMeetSLO',
  'toSustainMoreThan',
  'toReuseCache',
  'capacity probe',
])
export type GateName = z.infer<typeof GateName>

/** The superiority gates on a rate metric (decode, prefill, throughput), which `winGate` decides. */
export const WinGateName = GateName.extract(['toWinDecode', 'toWinPrefill', 'toWinThroughput'])
export type WinGateName = z.infer<typeof WinGateName>

/** The yes/no checks a matcher records on a cell, with what it found. */
export const CheckName = z.enum(['toBeMatchedPair', 'toPassCanaries', 'toReachConcurrency'])
export type CheckName = z.infer<typeof CheckName>

/** One arm's accuracy on the questions an accuracy gate paired, with its interval, as fractions in [0, 1]. */
export const ArmAccuracy = z.object({
  /** Right answers: requests right, or (questions asked more than once) the sum over questions of each one's share right. */
  correct: z.number().nonnegative(),
  /** The units scored: paired requests, or distinct questions. */
  scored: z.int().nonnegative(),
  /** correct ÷ scored; null when nothing was scored. */
  rate: z.number().min(0).max(1).nullable(),
  low: z.number().min(0).max(1).nullable(),
  high: z.number().min(0).max(1).nullable(),
})
export type ArmAccuracy = z.infer<typeof ArmAccuracy>

/**
 * What an accuracy gate adds to its decision: each arm's accuracy with its interval, whether the
 * candidate is confidently better, and how many questions would settle an inconclusive verdict.
 */
export const AccuracyDetail = z.object({
  /** `request`: each paired request is one question; `question`: questions repeat, each distinct question is one unit. */
  unit: z.enum(['request', 'question']),
  /** Two-sided confidence of each arm's interval (the gate's). */
  confidence: z.number().gt(0).lt(1),
  /** How each arm's interval was computed. */
  method: z.string(),
  baseline: ArmAccuracy,
  candidate: ArmAccuracy,
  /** True when the interval of candidate − baseline lies above 0: the candidate is confidently more accurate. */
  improved: z.boolean(),
  /**
   * Inconclusive only: the distinct questions (scored on both arms) that would likely decide the
   * gate if the observed effect and spread held; null when decided, or when no number would (the
   * estimate sits on the margin).
   */
  questionsNeeded: z.int().positive().nullable(),
})
export type AccuracyDetail = z.infer<typeof AccuracyDetail>

/**
 * The cell options an undecided gate names, each with the value that would likely decide it:
 * `requests` (per arm), `repeats` (launches per arm), or a harness setting when the client was the
 * bottleneck. Spread into the cell's options as is.
 */
export const DecideSettings = z.object({
  requests: z.int().positive().optional(),
  repeats: z.int().positive().optional(),
  sendLagLimitMs: z.number().positive().optional(),
  eventLoopDelayLimitMs: z.number().positive().optional(),
  clientWorkers: z.int().positive().optional(),
})
export type DecideSettings = z.infer<typeof DecideSettings>

/** What would likely decide an undecided gate: the settings, and the same in words with the figures behind each. */
export const DecideHint = z.object({
  set: DecideSettings,
  /** One line, as every renderer shows it, e.g. `to decide it, set sendLagLimitMs: 20 (…) and requests: 49 (…)`. */
  text: z.string(),
})
export type DecideHint = z.infer<typeof DecideHint>

/** One arm's preemptions (SGLang: retractions) over the measured phases of the launches a gate read. */
export const ArmPreemptions = z.object({
  /** Summed over the arm's launches; null when a launch's engine reported none (see `reason`). */
  count: z.number().nonnegative().nullable(),
  /** Requests the arm's launches sent (ok and failed): what `perRequest` is a share of. */
  requests: z.int().nonnegative(),
  /** count ÷ requests; null with `count` or without requests. */
  perRequest: z.number().nonnegative().nullable(),
  /** Why `count` is null; null when it is not. */
  reason: z.string().nullable(),
})
export type ArmPreemptions = z.infer<typeof ArmPreemptions>

/**
 * What win and hold gates show beside their verdict: each arm's preemptions, read from the
 * engine's counter (`telemetry.engine.occupancy.preemptions` of each record), and whether the arms
 * preempted very differently (the rule in docs/gates.md), which the decision's warnings then say.
 */
export const PreemptionFacts = z.object({
  baseline: ArmPreemptions,
  candidate: ArmPreemptions,
  /** One arm preempted in more than 5% of its requests, more than 2× the other's count and by at least 5. */
  uneven: z.boolean(),
})
export type PreemptionFacts = z.infer<typeof PreemptionFacts>

/**
 * One gate decision, JSON-safe so it crosses from a vitest worker to the reporter: the effect
 * with its interval, the samples it rests on, the rule that decided, and what would settle an
 * inconclusive one.
 */
export const GateDecision = z.object({
  /** The matcher or gate name, e.g. `toWinDecode`. */
  gate: GateName,
  outcome: GateOutcome,
  /** superiority: must be proven; non-regression: fails only on a confident regression; check: a yes/no fact. */
  kind: z.enum(['superiority', 'non-regression', 'check']),
  /** What was compared, e.g. `decodeTokPerS` or `ttftMs p95`. */
  metric: z.string(),
  effect: z.object({
    /** candidate ÷ baseline for ratios, candidate − baseline for differences; null when not estimable. */
    estimate: z.number().nullable(),
    low: z.number().nullable(),
    high: z.number().nullable(),
    unit: z.enum(['ratio', 'ms', 'points', 'fraction', 'count']),
    /** Two-sided confidence of the interval, after any multiplicity or sequential adjustment. */
    confidence: z.number().gt(0).lt(1).nullable(),
    /** How the interval was computed, e.g. `paired log-ratio, BCa bootstrap (2000, seed 1)`. */
    method: z.string(),
  }),
  samples: z.object({ baseline: z.int().nonnegative(), candidate: z.int().nonnegative(), paired: z.int().nonnegative() }),
  /** The decision rule in words, with its thresholds. */
  rule: z.string(),
  /** For an inconclusive superiority claim: paired requests per arm that would likely decide it. */
  moreRequestsHint: z.int().positive().nullable(),
  /**
   * For an inconclusive (or not judged) decision: the smallest change of the cell's options that
   * would likely decide it; null when decided, or when no option would (the estimate sits on the
   * threshold). Absent in evidence written before it was kept.
   */
  decideHint: DecideHint.nullable().default(null),
  /** Annotations for the reviewer (an inconclusive non-regression passes with one). */
  warnings: z.array(z.string()),
  /** Accuracy gates only: each arm's accuracy and what would settle the gate; absent on every other gate. */
  accuracy: AccuracyDetail.optional(),
  /** Win and hold gates only: each arm's preemptions beside the verdict; absent on other gates and in evidence written before. */
  preemptions: PreemptionFacts.optional(),
  /**
   * The launch-noise floor a matcher gave the gate and where it came from (the spec's option,
   * measured by calibrate, learned from main's history, or assumed). Absent when the arms had
   * repeated launches (the launch-level test measures the noise), for a gate that takes no floor
   * or is called directly, and in evidence written before it was kept.
   */
  noiseFloor: NoiseFloor.optional(),
})
export type GateDecision = z.infer<typeof GateDecision>
