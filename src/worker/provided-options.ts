/**
 * The plugin's options as a vitest worker reads them (vitest's `inject`): the one place workers
 * read what the plugin provided, so the runner and the matchers see the same options.
 */
import { inject } from 'vitest'
import { ServegateError } from '../errors.ts'
import { WorkerOptions } from '../schema/worker-options.ts'

/** What vitest provided under `key`, or undefined outside vitest or without the plugin. */
export function provided(key: string): unknown {
  try {
    return (inject as (key: string) => unknown)(key)
  } catch {
    return undefined
  }
}

/**
 * The plugin options provided to this worker (`nvidiaSmi`, `inconclusive`); empty outside vitest
 * or without the plugin.
 * @throws ServegateError CONFIG_INVALID when what was provided is not what this servegate provides
 */
export function workerOptions(): WorkerOptions {
  const raw = provided('servegate')
  if (raw === undefined) return {}
  const parsed = WorkerOptions.safeParse(raw)
  if (!parsed.success)
    throw new ServegateError(
      'CONFIG_INVALID',
      `the servegate plugin provided options this worker cannot read (${parsed.error.issues.map((i) => i.path.join('.')).join(', ')}); ` +
        'the plugin in vitest.config and the servegate the specs import must be the same install',
    )
  return parsed.data
}
