import { z } from 'zod'

const count = z.int().nonnegative()
const ms = z.number().nonnegative()

/** The measured requests of a cell so far. */
export const CellProgress = z.object({
  /** Requests that ended (answered or failed), of `total`. */
  done: count,
  total: count,
  ok: count,
  failed: count,
  /** Since the first measured request was sent, ms. */
  elapsedMs: ms,
})
export type CellProgress = z.infer<typeof CellProgress>

/**
 * Where a cell stands, tagged by `phase`, in the order a cell goes through them:
 * - `launching`: its engine is being started (a process spawned, an endpoint connected, a model loaded);
 * - `waiting`: the engine process runs but is not ready yet (its readiness path does not answer 200);
 * - `inspecting`: the engine is ready; its manifest (version, model fingerprint, GPUs) is being read;
 * - `turn`: one arm of a sequential pair waits for its turn (the arms measure their stages in turn, A B B A);
 * - `calibrating`: prompts are being sized with the engine's tokenizer;
 * - `warmup`: warm-up requests (not recorded);
 * - `requests`: measured requests, in stages for a sequential pair;
 * - `tearing-down`: the engine's process tree is being stopped;
 * - `done`: one measurement (one launch of one arm) ended, with its counts or why it failed;
 * - `stopped`: an engine shared by the file's cells was torn down after them.
 */
export const CellPhase = z.discriminatedUnion('phase', [
  z.object({ phase: z.literal('launching') }),
  z.object({
    phase: z.literal('waiting'),
    /** Since the process was spawned, ms, of `timeoutMs` (the engine's `startupTimeoutMs`). */
    elapsedMs: ms,
    timeoutMs: ms,
    /** The engine's log file (its stdout and stderr). */
    logPath: z.string(),
  }),
  z.object({ phase: z.literal('inspecting') }),
  z.object({
    phase: z.literal('turn'),
    /** The 1-based stage this arm waits to measure, of `stages`. */
    stage: z.int().positive(),
    stages: z.int().positive(),
  }),
  z.object({ phase: z.literal('calibrating') }),
  z.object({ phase: z.literal('warmup'), done: count, total: count }),
  CellProgress.extend({
    phase: z.literal('requests'),
    /** The stage being measured (1-based), for an arm of a sequential pair; null otherwise. */
    stage: z.object({ index: z.int().positive(), of: z.int().positive() }).nullable(),
  }),
  z.object({ phase: z.literal('tearing-down') }),
  z.object({
    phase: z.literal('done'),
    completed: count,
    /** Null when the record never counted its failures (an import that did not record them). */
    failed: count.nullable(),
    /** `CODE: first line of the message` when the cell failed (its engine did not start or exited). */
    failure: z.string().nullable(),
  }),
  z.object({ phase: z.literal('stopped') }),
])
export type CellPhase = z.infer<typeof CellPhase>
export type PhaseName = CellPhase['phase']

/** Told each phase of a cell as it happens; it must return at once (it runs inside the measured phase). */
export type PhaseListener = (phase: CellPhase) => void

/** Phases after which a cell's line goes away. */
export const FINAL_PHASES: ReadonlySet<PhaseName> = new Set(['done', 'stopped'])

/** A phase of a cell as a spec declared it, sent from a vitest worker to the progress reporter. */
export const ProgressEvent = z.object({
  /** The cell, pair or capacity search id; null for a shared engine torn down after the file. */
  cell: z.string().nullable(),
  /** The arm of a pair; null for a cell. */
  arm: z.enum(['baseline', 'candidate']).nullable(),
  /** The spec's name of the engine, e.g. `vllm:Qwen/Qwen3-8B`. */
  engine: z.string(),
  /** Which launch of a repeated cell, or which probe of a capacity search; null for a single measurement. */
  step: z
    .discriminatedUnion('kind', [
      z.object({ kind: z.literal('launch'), index: z.int().positive(), of: z.int().positive() }),
      z.object({
        kind: z.literal('probe'),
        index: z.int().positive(),
        value: z.number().positive(),
        axis: z.enum(['rate', 'concurrency']),
      }),
    ])
    .nullable(),
  phase: CellPhase,
  /** When the phase was reported, ms since the epoch: the reporter runs on the worker's host and adds what elapsed since. */
  atMs: z.number(),
})
export type ProgressEvent = z.infer<typeof ProgressEvent>

/** The key under which the progress reporter provides its socket to the workers (`inject`). */
export const PROGRESS_CONTEXT_KEY = 'servegateProgress'

/** What the progress reporter provides: the local socket (or Windows pipe) that takes newline-delimited events. */
export const ProgressContext = z.object({ socketPath: z.string().min(1) })
export type ProgressContext = z.infer<typeof ProgressContext>
