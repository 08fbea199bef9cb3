import { ServegateError } from '../errors.ts'
import { type Calibration, calibrate as calibrateLaunches, DEFAULT_LAUNCHES, DEFAULT_PROFILE_PATH } from '../runner/calibration.ts'
import { type CellPlan, resolveCellPlan } from '../runner/cell-options.ts'
import { readDeclaredFiles } from '../runner/declared-files.ts'
import { seededLaunch } from '../sim/sim-engine.ts'
import { RUNNER_ENV } from '../schema/worker-options.ts'
import { workerOptions } from '../worker/provided-options.ts'
import { declareCell, tracked } from '../worker/cell-registry.ts'
import { engineField, lazy, type Lazy, named, planId } from './cell-declarations.ts'
import { declaring } from './declaration-errors.ts'
import type { EngineHandle } from './engine-handles.ts'
import { registerTeardown, workerRunner } from './worker-environment.ts'

/** A calibration in a spec: the cell the gates will judge, the engine, and how many launches. */
export interface CalibrateSpec extends CellPlan {
  engine: EngineHandle
  /** Launches, each a fresh engine measuring the whole cell (at least 2). @default 5 */
  launches?: number
  /** Where the profile is written. @default the plugin's `noise.profile`, else 'servegate-noise.json' */
  out?: string
  /** The runner's label, part of the profile's testbed. @default the plugin's `noise.runner`, else $SERVEGATE_RUNNER, else none */
  runner?: string
  /** Shown in evidence; defaults to `<engine>-<workload>-ctx<prompt>-calibrate`. */
  id?: string
}

function invalid(where: string, message: string): never {
  throw new ServegateError('CONFIG_INVALID', `invalid ${where} options: ${message}`)
}

/**
 * Declares a calibration of the runner's launch noise: the engine launched `launches` times, one
 * after another, each a fresh process measuring the whole cell, then the noise profile
 * (`servegate.noise-profile/v1`, what `servegate calibrate` writes) written to `out`. Checked
 * and resolved here, before any engine starts; runs once, when a test first awaits it. Calibrate
 * the cell shape the gates judge: a profile applies to runs of the same testbed only.
 * @throws ServegateError CONFIG_INVALID for a bad option
 * @example
 * const noise = calibrate({ engine: candidate, launches: 5, concurrency: 8, requests: 64, out: 'servegate-noise.json' })
 * bench('launch noise on this runner', async () => void (await noise))
 */
export function calibrate(spec: CalibrateSpec): Lazy<Calibration> {
  return declaring(() => {
    const { engine: h, launches: k, out: o, runner: r, id, ...options } = spec
    const where = named('calibrate', id)
    const engine = engineField(where, 'engine', h)
    if (k !== undefined && !(Number.isInteger(k) && k >= 2 && k <= 100)) {
      invalid(where, `${where}.launches: an integer from 2 to 100 (fresh launches of the engine), got ${JSON.stringify(k)}`)
    }
    if (o !== undefined && (typeof o !== 'string' || o === '')) invalid(where, `${where}.out: a file path, e.g. 'servegate-noise.json'`)
    if (r !== undefined && (typeof r !== 'string' || r.trim() === ''))
      invalid(where, `${where}.runner: a label such as 'h100-ci', or leave it out`)
    const plan = resolveCellPlan(options, where)
    readDeclaredFiles(plan, where)
    const launches = k ?? DEFAULT_LAUNCHES
    const name = id ?? `${planId(engine.name, plan)}-calibrate`
    registerTeardown()
    declareCell({ id: name, kind: 'cell', required: false, ladder: null, engines: { cell: engine.name } })
    const work = (): Promise<Calibration> => {
      const noise = workerOptions().noise
      const runner = r ?? noise?.runner ?? process.env[RUNNER_ENV] ?? null
      const out = o ?? noise?.profile ?? DEFAULT_PROFILE_PATH
      const engineFor = (i: number) => ({ ...engine, id: `${engine.id}-launch${i}`, config: seededLaunch(engine.config, i) })
      return calibrateLaunches(workerRunner(), { id: name, engineFor, plan, launches, runner, out })
    }
    return lazy(() => tracked(name, work, (result) => ({ cell: [...result.records] })))
  })
}
