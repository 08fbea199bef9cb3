import { z } from 'zod'
import { ServegateError } from '../errors.ts'
import { WorkerOptions } from '../schema/worker-options.ts'

/**
 * The V8 flags the plugin gives `vitest bench`'s forked workers, where cells measure: what the
 * client's memory figures in `npm run bench:client` are measured under (docs/client-benchmark.md).
 * - `--max-semi-space-size=2`: V8 grows its young generation to 16 MB a semi-space (three of
 *   them resident) under a streaming client's allocation rate; 2 MB holds a cell's garbage as
 *   well, at a peak RSS 60 to 130 MB lower at C = 256 and C = 1024, with no measured cost to
 *   ingest or to ITL precision.
 * - `--wasm-tiering-budget=2000000000`: keeps undici's HTTP parser (llhttp, WebAssembly) on
 *   V8's baseline compiler. Its tier-up to the optimizing compiler comes a few thousand reads
 *   into the first cell and takes 20 MB for the compile, which was the whole gap between a
 *   C = 1 cell and 100 MB; the baseline code parses as fast here.
 * - `--heap-growing-percent=50`: the old generation may grow by half between full GCs, not by
 *   V8's up-to-4× under a fast allocator. The socket reads of a thousand streams wait in the C
 *   allocator for the GC that frees them; collected sooner, C = 1024 × 200 peaks 30 to 50 MB
 *   lower, for a few percent more client CPU.
 */
export const BENCH_WORKER_NODE_FLAGS: readonly string[] = [
  '--max-semi-space-size=2',
  '--wasm-tiering-budget=2000000000',
  '--heap-growing-percent=50',
]

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
  /**
   * Node (V8) flags for `vitest bench`'s workers under the `forks` and `vmForks` pools; a flag the
   * project's own `execArgv` or `NODE_OPTIONS` already sets is left as set there. Worker threads (the
   * `threads` pools) cannot take V8 flags and get none. `[]` leaves the workers as vitest starts them.
   * @default BENCH_WORKER_NODE_FLAGS
   */
  workerNodeFlags: z
    .array(z.string().regex(/^--[a-z0-9][a-z0-9-]*(=\S+)?$/, 'a Node flag, e.g. "--max-semi-space-size=2"'))
    .default([...BENCH_WORKER_NODE_FLAGS]),
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
  const nameOf = (flag: string): string => flag.split('=', 1)[0] as string
  const set = new Set([...execArgv, ...nodeOptions.split(/\s+/)].map(nameOf))
  return flags.filter((f) => !set.has(nameOf(f)))
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
