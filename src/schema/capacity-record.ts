import { z } from 'zod'
import { GateOutcome } from './gate.ts'
import { SLO } from './load.ts'
import { RunRecord } from './run.ts'

/** Schema id of a servegate capacity search. Bump only with a migration. */
export const CAPACITY_SCHEMA_ID = 'servegate.capacity/v1'

/**
 * How a capacity search ended:
 * - `bracketed`: a probe on each side, within the resolution;
 * - `unresolved`: a probe on each side, but the probes ran out before the resolution;
 * - `unbracketed`: the probes ran out with only one side found;
 * - `above-max`: even the highest value probed met the SLO (the capacity is at least `max`);
 * - `below-min`: even the lowest value probed did not (the capacity is below `min`);
 * - `harness-limited`: a probe's client could not send on time, so it says nothing about the engine;
 * - `cell-failed`: a probe's cell failed (the engine did not start or exited);
 * - `interrupted`: the search was cancelled (Ctrl-C); the probes before it stand.
 */
export const CapacityStatus = z.enum([
  'bracketed',
  'unresolved',
  'unbracketed',
  'above-max',
  'below-min',
  'harness-limited',
  'cell-failed',
  'interrupted',
])
export type CapacityStatus = z.infer<typeof CapacityStatus>

/** One probe cell of a search: the value, the SLO gate's verdict there, and the evidence. */
export const CapacityProbe = z.object({
  /** Requests/s (rate axis) or streams (concurrency axis). */
  value: z.number().positive(),
  outcome: GateOutcome,
  /** Measured requests judged, and the good ones among them. */
  samples: z.int().nonnegative(),
  good: z.int().nonnegative(),
  /** The good share and its Wilson interval at the search's confidence. */
  fraction: z.number().min(0).max(1).nullable(),
  low: z.number().min(0).max(1).nullable(),
  high: z.number().min(0).max(1).nullable(),
  sendLagP99Ms: z.number().nonnegative().nullable(),
  /** Why the probe says nothing about the engine; null when it does. */
  invalid: z.string().nullable(),
  /** The probe's run record, in `records`. */
  runId: z.string(),
})
export type CapacityProbe = z.infer<typeof CapacityProbe>

/** A capacity search: the highest rate (or concurrency) at which an arm met its SLO, bracketed, with every probe kept. */
export const CapacitySearch = z.object({
  schema: z.literal(CAPACITY_SCHEMA_ID),
  /** e.g. `candidate-synthetic-summary-ctx1024-capacity-rate`. */
  id: z.string(),
  axis: z.enum(['rate', 'concurrency']),
  slo: SLO,
  /** The share of requests that had to be good at a probe (percentile / 100). */
  requiredFraction: z.number().gt(0).lt(1),
  /** Two-sided confidence of each probe's Wilson interval. */
  confidence: z.number().gt(0.5).lt(1),
  search: z.object({
    start: z.number().positive(),
    min: z.number().positive(),
    max: z.number().positive(),
    maxProbes: z.int().positive(),
    resolution: z.number().positive(),
    /** Requests per probe; with `probeSeconds`, at least this many and at least rate × seconds. */
    requestsPerProbe: z.int().positive(),
    /** Rate probes: each lasts about this long (rate × seconds requests); null when not set. */
    probeSeconds: z.number().positive().nullable(),
  }),
  probes: z.array(CapacityProbe),
  /**
   * `low`: the highest value shown to meet the SLO (null: none); `high`: the lowest value not shown
   * to (failed or inconclusive; null: none). The capacity lies in [low, high).
   */
  bracket: z.object({ low: z.number().positive().nullable(), high: z.number().positive().nullable() }),
  status: CapacityStatus,
  /** One line: the bracket, its width, how the search ended. */
  summary: z.string(),
  /**
   * Rate searches with a ttft or e2e bound: the relative overload ε a probe of its length cannot
   * see (≈ bound / (share × seconds)), so the rate meeting the SLO over a probe lies within
   * [sustainable, sustainable × (1 + ε)]; null otherwise.
   */
  overloadTolerance: z.number().nonnegative().nullable(),
  /**
   * What the bracket cannot show, e.g. that a D-second rate probe passes overloads below about
   * bound / (share × D), so the bracket may sit that far above the sustainable rate.
   */
  warnings: z.array(z.string()),
  /** The run record of every probe, in probe order. */
  records: z.array(RunRecord),
})
export type CapacitySearch = z.infer<typeof CapacitySearch>
