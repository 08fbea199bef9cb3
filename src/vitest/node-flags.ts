import { execFileSync } from 'node:child_process'
import { ServegateError } from '../errors.ts'

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
