import { fileURLToPath } from 'node:url'
import { ServegateError } from '../errors.ts'
import { resolveSimOptions, type SimOptions } from './sim-options.ts'

/** servegate's own CLI (the compiled one where the package is installed), which serves the sim as `servegate sim`. */
const SERVEGATE_BIN = fileURLToPath(new URL('../../bin/servegate.js', import.meta.url))

/** The simulated engine as a spec (`engine.sim`) or an `--engine` file (`"kind": "sim"`) declares it. */
export interface SimEngineConfig {
  /** Spec-facing name of the arm's engine. @default 'sim:<model id>' */
  name?: string
  /** The served model name. @default { id: 'sim-model' } */
  model?: { id: string; revision?: string | null }
  /** The simulated engine's speed, batching, faults… (`servegate sim --help`); host, port and model are set by the cell. */
  sim?: Omit<SimOptions, 'host' | 'port' | 'model'>
  /** Deadline for the simulated engine to answer `/health`, ms. @default 30000 */
  startupTimeoutMs?: number
}

/**
 * The command engine that runs servegate's simulated engine in a child process (`servegate sim`
 * on the port the cell picks), its options checked here.
 * @throws ServegateError CONFIG_INVALID for a bad sim option, or one the cell sets itself
 * @example simCommandConfig({ model: { id: 'sim-model' }, sim: { decodeTokPerS: 120 } }).argv[2] // 'sim'
 */
export function simCommandConfig(c: SimEngineConfig = {}): {
  kind: 'command'
  name: string
  argv: string[]
  model: { id: string; revision: string | null }
  startupTimeoutMs: number
} {
  const model = { id: c.model?.id ?? 'sim-model', revision: c.model?.revision ?? null }
  const options = { ...(c.sim ?? {}) }
  for (const key of ['host', 'port', 'model'] as const) {
    if (key in options)
      throw new ServegateError('CONFIG_INVALID', `engine.sim: sim.${key} is set by the cell; remove it (the model name goes in model.id)`)
  }
  resolveSimOptions({ ...options, model: model.id })
  return {
    kind: 'command',
    name: c.name ?? `sim:${model.id}`,
    argv: [process.execPath, SERVEGATE_BIN, 'sim', '--port', '{port}', '--model', '{modelId}', '--options', JSON.stringify(options)],
    model,
    startupTimeoutMs: c.startupTimeoutMs ?? 30_000,
  }
}

/**
 * Launch `launch` (0-based) of an engine config: a simulated engine's (`simCommandConfig`) with its
 * `launchSeed` moved on by `launch`, so that repeated launches draw anew yet repeatably; any other
 * config, or a sim without a launch seed (it draws at random), as it is.
 * @example seededLaunch(simCommandConfig({ sim: { launchNoise: 0.04, launchSeed: 7 } }), 2) // the sim of launchSeed 9
 */
export function seededLaunch<C extends { kind: string }>(config: C, launch: number): C {
  const argv = (config as { argv?: unknown }).argv
  if (config.kind !== 'command' || !Array.isArray(argv) || argv[1] !== SERVEGATE_BIN || argv[2] !== 'sim') return config
  const at = argv.indexOf('--options')
  if (at < 0 || launch === 0) return config
  const options = JSON.parse(String(argv[at + 1])) as SimOptions
  if (options.launchSeed === undefined || options.launchSeed === null) return config
  const next = [...(argv as string[])]
  next[at + 1] = JSON.stringify({ ...options, launchSeed: options.launchSeed + launch })
  return { ...config, argv: next }
}
