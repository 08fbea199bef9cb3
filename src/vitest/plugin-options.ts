import { z } from 'zod'
import { ServegateError } from '../errors.ts'
import { WorkerOptions } from '../schema/worker-options.ts'

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
  // What the workers read: `nvidiaSmi` and `inconclusive` (schema/worker-options.ts).
  ...WorkerOptions.shape,
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
