import { z } from 'zod'
import { InconclusivePolicy } from './task-meta.ts'

/** The environment variable that labels the runner where no label is given (`noise.runner`, `servegate calibrate --runner`). */
export const RUNNER_ENV = 'SERVEGATE_RUNNER'

/** The plugin's `noise` option. Paths are relative to the directory vitest runs in. */
export const NoiseOptions = z.object({
  /** The profile `servegate calibrate` wrote, committed or kept as a CI artifact; a missing file is an error. */
  profile: z.string().min(1).optional(),
  /** The history store: a JSONL file a run on `historyBranch` appends to; a missing file is an empty history. */
  history: z.string().min(1).optional(),
  /** Runs on this branch append to `history` (the branch from GITHUB_REF_NAME, CI_COMMIT_BRANCH, or git). @default 'main' */
  historyBranch: z.string().min(1).default('main'),
  /** The runner's label, part of the testbed; else the SERVEGATE_RUNNER environment variable; else none. */
  runner: z.string().min(1).optional(),
  /** An assumed floor (nothing measured on this testbed) makes a merge gate inconclusive instead of deciding it. @default false */
  strict: z.boolean().default(false),
})
export type NoiseOptions = z.infer<typeof NoiseOptions>

/**
 * What the plugin provides the workers (vitest's `provide`, read with `inject('servegate')`): the
 * GPU probe's nvidia-smi and the inconclusive policy, both options of `servegate()`. Both absent
 * without the plugin.
 */
export const WorkerOptions = z.object({
  /** nvidia-smi to query and sample. @default 'nvidia-smi' */
  nvidiaSmi: z.string().min(1).optional(),
  /**
   * What an inconclusive gate outcome does to its assertion in every spec: `'pass'` or `'fail'`.
   * A gate's own `inconclusive` option overrides it; unset, each kind keeps its default (a
   * superiority claim fails, a non-regression claim passes with a warning). The matcher message
   * and the evidence name the policy that decided. @default per kind
   */
  inconclusive: InconclusivePolicy.optional(),
  /**
   * Where the gates' launch-noise floor comes from (docs/gates.md, "Launch noise"): the profile
   * `servegate calibrate` wrote, the history of main, the runner's label, and whether an assumed
   * floor may decide a gate. Unset, every gate assumes 2% a launch and says so.
   */
  noise: NoiseOptions.optional(),
})
export type WorkerOptions = z.infer<typeof WorkerOptions>
