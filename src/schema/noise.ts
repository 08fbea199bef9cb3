import { z } from 'zod'

/**
 * The runner a launch-noise figure belongs to. Launch-to-launch variation is a property of the
 * machine, the engine and the cell shape together: a figure measured on one testbed says nothing
 * about another. Two testbeds are the same when every field is equal (`testbedMismatch`).
 */
export const Testbed = z.object({
  /** The label the user gives the runner (e.g. `h100-ci-pool`); null when none was given. */
  runner: z.string().min(1).nullable(),
  /** GPU model as nvidia-smi names it (null without a GPU), and how many the cell saw. */
  gpu: z.object({ model: z.string().nullable(), count: z.int().nonnegative() }),
  /** NVIDIA driver version; null without a GPU. */
  driver: z.string().nullable(),
  engine: z.object({ kind: z.string(), version: z.string().nullable() }),
  model: z.string(),
  /** The cell's shape: closed-loop concurrency and measured requests, and max_tokens (null: drawn per request). */
  cell: z.object({ concurrency: z.int().positive(), requests: z.int().positive(), maxTokens: z.int().positive().nullable() }),
})
export type Testbed = z.infer<typeof Testbed>

/** One gated metric's launch-to-launch spread, as a relative sd (the sd of the log of a launch's figure). */
export const LaunchSpread = z.object({
  /** The sd of the launches' log figures: 0.03 is 3% a launch. */
  sd: z.number().nonnegative(),
  /** One-sided upper confidence bound on `sd` at `confidence` (chi-square on `launches − 1` degrees of freedom). */
  upper: z.number().nonnegative(),
  confidence: z.number().gt(0).lt(1),
  /** Each launch's figure (the metric's geometric mean over its requests, or the cell's aggregate), in launch order. */
  values: z.array(z.number()),
})
export type LaunchSpread = z.infer<typeof LaunchSpread>

export const NOISE_PROFILE_SCHEMA_ID = 'servegate.noise-profile/v1'

/** What `servegate calibrate` writes: one engine config launched k times on a testbed, the spread of each gated metric. */
export const NoiseProfile = z.object({
  schema: z.literal(NOISE_PROFILE_SCHEMA_ID),
  servegateVersion: z.string(),
  /** When the launches ran, ISO 8601. */
  measuredAt: z.iso.datetime(),
  testbed: Testbed,
  /** Full cells launched (each a fresh engine). */
  launches: z.int().min(2),
  /** By metric name (`decodeTokPerS`, `ttftP95Ms`, …): the launch-to-launch spread. */
  metrics: z.record(z.string(), LaunchSpread),
})
export type NoiseProfile = z.infer<typeof NoiseProfile>

export const HISTORY_SCHEMA_ID = 'servegate.history/v1'

/** One cell's gated figures in one run: each metric's location (log scale is taken by readers) and its own standard error. */
export const HistoryCell = z.object({
  /** The cell's id as the spec names it. */
  cell: z.string(),
  testbed: Testbed,
  /** By metric name: the cell's figure, and the relative standard error of that figure within the run (null when unknown). */
  metrics: z.record(z.string(), z.object({ value: z.number().positive(), relativeSe: z.number().nonnegative().nullable() })),
})
export type HistoryCell = z.infer<typeof HistoryCell>

/** One line of the history store (JSONL): one run of the suite on the main branch. */
export const HistoryRun = z.object({
  schema: z.literal(HISTORY_SCHEMA_ID),
  /** The commit measured; null when unknown. */
  commit: z.string().nullable(),
  branch: z.string().nullable(),
  /** When the run finished, ISO 8601. */
  at: z.iso.datetime(),
  cells: z.array(HistoryCell),
})
export type HistoryRun = z.infer<typeof HistoryRun>

/** Where a gate's launch-noise floor came from. */
const NoiseFloorSource = z.enum(['option', 'measured', 'history', 'assumed'])

/**
 * The launch-noise floor a gate used, and where it came from: the gate's own `launchNoise`
 * option; measured by `servegate calibrate`; learned from the history of main; or assumed (the
 * default 2%), with a warning naming the command to measure it. The value is the largest of what
 * applied (measured, learned, the default); sources that did not apply say why in `notUsed`.
 */
export const NoiseFloor = z.object({
  /** The relative sd a launch used by the gate. */
  value: z.number().nonnegative(),
  source: NoiseFloorSource,
  /** The profile's figure when one applied: its file, date, launches, estimate and the bound used. */
  measured: z.object({ path: z.string(), measuredAt: z.string(), launches: z.int(), sd: z.number(), upper: z.number() }).nullable(),
  /** The history's figure when it applied: runs of main it rests on, estimate and the bound used. */
  history: z.object({ path: z.string(), runs: z.int(), sd: z.number(), upper: z.number() }).nullable(),
  /** The floor servegate assumes when nothing is measured (DEFAULT_LAUNCH_NOISE). */
  assumed: z.number().nonnegative(),
  /** Why a profile or history was not used (another testbed, too few runs, no figure for the metric…). */
  notUsed: z.array(z.string()),
  /** One sentence a reader sees beside the verdict: "measured by servegate calibrate on …", "assumed: …". */
  text: z.string(),
  /** `noise.strict` was set: an assumed floor makes a decided merge gate inconclusive. */
  strict: z.boolean(),
})
export type NoiseFloor = z.infer<typeof NoiseFloor>
