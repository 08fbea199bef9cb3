import { execFileSync } from 'node:child_process'
import { ServegateError } from './errors.ts'

/**
 * The V8 flags a measuring client runs under: what the plugin gives `vitest bench`'s forked
 * workers and what `servegate run` (and `capacity`, `demo`) re-executes itself with, so a cell
 * peaks at the same memory in a spec and on the command line. The client's memory figures in
 * `npm run bench:client` and `npm run bench:soak` are measured under them
 * (docs/client-benchmark.md).
 * - `--max-semi-space-size=2`: V8 grows its young generation to 16 MB a semi-space (three of
 *   them resident) under a streaming client's allocation rate; 2 MB holds a cell's garbage as
 *   well, and a cell of hundreds of streams peaks far lower, at no cost shown to ingest or to
 *   ITL precision.
 * - `--wasm-tiering-budget=2000000000`: keeps WebAssembly on V8's baseline compiler. Set for
 *   undici's HTTP parser (llhttp), whose tier-up a few thousand reads into the first cell set a
 *   C = 1 cell's peak; the streaming client now parses HTTP/1.1 itself, and the flag stays for a
 *   spec's own `fetch` or undici.
 * - `--heap-growing-percent=50`: the old generation may grow by half between full GCs, not by
 *   V8's up-to-4× under a fast allocator. The socket reads of a thousand streams wait in the C
 *   allocator for the GC that frees them; collected sooner, such a cell peaks lower for a little
 *   more client CPU.
 * - `--no-memory-reducer`: V8's memory reducer starts full collections once a process has
 *   allocated slowly for a while (8 s after start, then again), to hand memory back. A C = 1 cell
 *   allocates slowly, so they fell in its measured requests: two a run, each a 4–10 ms pause and
 *   20 ms of marking steps on the measuring thread, for 0.3 MB back. Its ITL error p99 read
 *   1.6–3.0 ms with them and 0.17–0.81 ms without, in 3 alternated pairs of 20 × 100 chunks.
 * The figures behind each are in docs/client-benchmark.md, "Where the memory goes".
 */
export const BENCH_WORKER_NODE_FLAGS: readonly string[] = [
  '--max-semi-space-size=2',
  '--wasm-tiering-budget=2000000000',
  '--heap-growing-percent=50',
  '--no-memory-reducer',
]

/** A flag's name: the part before `=`, without a `no-` prefix (`--no-foo` and `--foo=1` set the same flag). */
function flagName(flag: string): string {
  return (flag.split('=', 1)[0] as string).replace(/^--no-/, '--')
}

/**
 * Each of `flags` whose name neither `execArgv` nor `nodeOptions` sets: a flag the user chose
 * stays as chosen (a command-line flag would override the user's `NODE_OPTIONS`).
 * @example
 * flagsNotSetIn(['--max-semi-space-size=2', '--no-memory-reducer'], [], '--max-semi-space-size=8 --memory-reducer')
 * // []
 */
export function flagsNotSetIn(flags: readonly string[], execArgv: readonly string[], nodeOptions: string): string[] {
  const set = new Set([...execArgv, ...nodeOptions.split(/\s+/)].map(flagName))
  return flags.filter((f) => !set.has(flagName(f)))
}

/** `node --v8-options` of this Node, or null where it cannot be read (the check is then skipped). */
export function v8OptionsOf(execPath: string = process.execPath): string | null {
  try {
    return execFileSync(execPath, ['--v8-options'], { encoding: 'utf8', timeout: 10_000, stdio: ['ignore', 'pipe', 'ignore'] })
  } catch {
    return null
  }
}

/** The flag's name without its value or a `no-` prefix: `--no-foo=1` is `foo`. */
function bareName(flag: string): string {
  return (flag.split('=', 1)[0] as string).replace(/^--(no-)?/, '')
}

/** Whether this Node takes `flag`: one of Node's own options, or a V8 option of `v8Options`. */
export function nodeTakesFlag(flag: string, v8Options: string): boolean {
  const name = flag.split('=', 1)[0] as string
  if (process.allowedNodeEnvironmentFlags.has(name)) return true
  const bare = bareName(flag)
  // V8 lists each flag as `  --name (description)`, with dashes (older builds: underscores).
  return new RegExp(`^\\s+--(${bare}|${bare.replaceAll('-', '_')})\\s`, 'm').test(v8Options)
}

/**
 * The worker flags this Node takes. A Node that does not know a flag refuses to start ("bad
 * option"), and every bench worker with it, so: a flag the project chose is an error that names
 * it; one of servegate's defaults is left out (it only saves memory).
 * @param chosen whether the project set `workerNodeFlags` itself
 */
export function flagsThisNodeTakes(flags: readonly string[], chosen: boolean, v8Options: string | null): string[] {
  if (v8Options === null) return [...flags]
  const unknown = flags.filter((f) => !nodeTakesFlag(f, v8Options))
  if (chosen && unknown.length > 0) {
    throw new ServegateError(
      'CONFIG_INVALID',
      `servegate(options).workerNodeFlags: ${unknown.join(', ')} is not an option of this Node (${process.version}); ` +
        'remove it, or see `node --v8-options` for the flags it takes',
    )
  }
  return flags.filter((f) => !unknown.includes(f))
}
