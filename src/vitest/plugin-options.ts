import { z } from 'zod'
import { ServegateError } from '../errors.ts'
import { InconclusivePolicy } from '../schema/task-meta.ts'

/** Options of the servegate vitest plugin. */
export const ServegateOptions = z.object({
  /** Where the reporter writes evidence. @default 'evidence' */
  evidenceDir: z.string().min(1).default('evidence'),
  /** Benchmark spec files run by `vitest bench`. @default ['benchmarks/**\/*.bench.ts'] */
  benchInclude: z.array(z.string().min(1)).min(1).default(['benchmarks/**/*.bench.ts']),
  /** Per-test and per-hook timeout under `vitest bench`, ms (cells launch engines). @default 3600000 */
  benchTimeoutMs: z.int().positive().default(3_600_000),
  /** Replace URLs and this machine's host name in the evidence (run records and index). @default false */
  redact: z.boolean().default(false),
  /** Show each cell's phase while `vitest bench` runs (live lines on a terminal, a plain line every few seconds in CI). @default true */
  progress: z.boolean().default(true),
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
export type ServegateOptions = z.input<typeof ServegateOptions>
export type ResolvedServegateOptions = z.infer<typeof ServegateOptions>

/** Validates the plugin options; the error names the field and the fix. */
export function resolveServegateOptions(input: unknown): ResolvedServegateOptions {
  const result = ServegateOptions.safeParse(input ?? {})
  if (!result.success) {
    const issues = result.error.issues.map((i) => `servegate(options).${i.path.join('.') || '(options)'}: ${i.message}`)
    throw new ServegateError('CONFIG_INVALID', `invalid servegate plugin options: ${issues.join('; ')}`)
  }
  return result.data
}

/**
 * What the plugin provides the workers (vitest's `provide`, read with `inject('servegate')`): the
 * GPU probe's nvidia-smi and the inconclusive policy. Both absent without the plugin.
 */
export const WorkerOptions = ServegateOptions.pick({ nvidiaSmi: true, inconclusive: true })
export type WorkerOptions = z.infer<typeof WorkerOptions>

/** The part of the resolved options the workers read. */
export function workerOptionsOf(options: ResolvedServegateOptions): WorkerOptions {
  return {
    ...(options.nvidiaSmi === undefined ? {} : { nvidiaSmi: options.nvidiaSmi }),
    ...(options.inconclusive === undefined ? {} : { inconclusive: options.inconclusive }),
  }
}

declare module 'vitest' {
  interface ProvidedContext {
    servegate: WorkerOptions
  }
}
