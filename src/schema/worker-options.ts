import { z } from 'zod'
import { InconclusivePolicy } from './task-meta.ts'

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
})
export type WorkerOptions = z.infer<typeof WorkerOptions>
