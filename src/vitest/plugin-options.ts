import { z } from 'zod'
import { ServegateError } from '../errors.ts'
import { WorkerOptions } from '../schema/worker-options.ts'
import { BENCH_WORKER_NODE_FLAGS, flagsNotSetIn } from '../node-flags.ts'

// One list for the plugin's workers and the CLI, which re-executes itself under it (src/cli/start.ts).
export { BENCH_WORKER_NODE_FLAGS }

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
  /**
   * What a partial run (a file list, `-t`, `.only`, an interrupted run) does when `evidenceDir`
   * holds a complete run's evidence: `'beside'` keeps it and writes to `<evidenceDir>-partial`
   * instead; `'replace'` writes over it. Either way its evidence says it is partial, names what did
   * not run, and is not promotable; a warning says where it went.
   * @default 'beside'
   */
  partialEvidence: z.enum(['beside', 'replace']).default('beside'),
  /** Show each cell's phase while `vitest bench` runs (live lines on a terminal, a plain line every few seconds in CI). @default true */
  progress: z.boolean().default(true),
  /**
   * Node (V8) flags for `vitest bench`'s workers under the `forks` and `vmForks` pools; a flag the
   * project's own `execArgv` or `NODE_OPTIONS` already sets is left as set there. Worker threads (the
   * `threads` pools) cannot take V8 flags and get none. `[]` leaves the workers as vitest starts them.
   * @default BENCH_WORKER_NODE_FLAGS
   */
  workerNodeFlags: z
    .array(z.string().regex(/^--[a-z0-9][a-z0-9-]*(=\S+)?$/, 'a Node flag, e.g. "--max-semi-space-size=2"'))
    .default([...BENCH_WORKER_NODE_FLAGS]),
  // What the workers read: `nvidiaSmi`, `inconclusive` and `noise` (schema/worker-options.ts).
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

/**
 * The flags to add to a bench project's workers: each of `flags` whose name (the part before
 * `=`) neither the project's `execArgv` nor `NODE_OPTIONS` sets (a command-line flag would
 * override the user's `NODE_OPTIONS`). Threads pools take none (Node refuses V8 flags in a
 * worker thread's `execArgv`).
 */
export function benchWorkerFlagsToAdd(
  pool: unknown,
  execArgv: readonly string[],
  flags: readonly string[],
  nodeOptions: string = process.env.NODE_OPTIONS ?? '',
): string[] {
  if (pool !== 'forks' && pool !== 'vmForks') return []
  return flagsNotSetIn(flags, execArgv, nodeOptions)
}

/** The part of the resolved options the workers read. */
export function workerOptionsOf(options: ResolvedServegateOptions): WorkerOptions {
  return {
    ...(options.nvidiaSmi === undefined ? {} : { nvidiaSmi: options.nvidiaSmi }),
    ...(options.inconclusive === undefined ? {} : { inconclusive: options.inconclusive }),
    ...(options.noise === undefined ? {} : { noise: options.noise }),
  }
}

declare module 'vitest' {
  interface ProvidedContext {
    servegate: WorkerOptions
  }
}
