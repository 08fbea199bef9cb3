import { BENCH_WORKER_NODE_FLAGS, flagsNotSetIn, flagsThisNodeTakes, v8OptionsOf } from '../node-flags.ts'

/** The commands that run cells in the CLI's own process, so measure under the client's flags. */
const MEASURING_COMMANDS: ReadonlySet<string | undefined> = new Set(['run', 'capacity', 'calibrate', 'demo'])

/**
 * Set in the environment of the re-executed CLI, so it runs its command instead of
 * re-executing again; set by hand, the CLI runs under Node's defaults (as
 * `npm run bench:soak -- --node-defaults` does, to measure without the flags).
 */
export const NO_REEXEC_ENV = 'SERVEGATE_NO_REEXEC'

/**
 * The client flags the CLI's process lacks for `command`: none for a command that measures
 * nothing, none once re-executed, and none the user set in `execArgv` or `NODE_OPTIONS` (theirs
 * stay as they set them).
 */
export function cliNodeFlagsToAdd(command: string | undefined, execArgv: readonly string[], env: NodeJS.ProcessEnv): string[] {
  if (!MEASURING_COMMANDS.has(command) || env[NO_REEXEC_ENV] !== undefined) return []
  return flagsNotSetIn(BENCH_WORKER_NODE_FLAGS, execArgv, env.NODE_OPTIONS ?? '')
}

/**
 * Starts the CLI (bin/servegate.js): a command that measures first replaces this process with
 * Node under the flags the plugin gives `vitest bench`'s workers (`process.execve`: the same
 * pid, stdio, signals and exit code, no parent left waiting), so `servegate run` peaks where a
 * spec does. V8 sizes its heap spaces when the process starts: `v8.setFlagsFromString` here
 * would not shrink the young generation. Where Node has no `execve` (Windows), the command runs
 * under Node's defaults.
 */
export async function startCli(argv: string[]): Promise<number> {
  const missing = cliNodeFlagsToAdd(argv[0], process.execArgv, process.env)
  // Read once: the engines and simulators this CLI starts do not inherit it.
  delete process.env[NO_REEXEC_ENV]
  if (missing.length > 0 && process.execve !== undefined) {
    // A Node that lacks one of them would refuse to start; it runs without that one.
    const flags = flagsThisNodeTakes(missing, false, v8OptionsOf())
    const args = [process.execPath, ...process.execArgv, ...flags, ...process.argv.slice(1)]
    if (flags.length > 0) process.execve(process.execPath, args, { ...process.env, [NO_REEXEC_ENV]: '1' })
  }
  const { main } = await import('./main.ts')
  return main(argv)
}
