import { ServegateError } from '../errors.ts'
import { noiseProfile } from '../gates/launch-figures.ts'
import { writeNoiseProfile } from '../record/noise-profile-file.ts'
import type { NoiseProfile } from '../schema/noise.ts'
import type { RunRecord } from '../schema/run.ts'
import type { ResolvedCellPlan } from './cell-options.ts'
import type { EngineCellHooks, EngineRef } from './engine-lifecycle.ts'
import type { Runner } from './runner.ts'

/** Launches calibrate makes unless told. */
export const DEFAULT_LAUNCHES = 5

/** Where calibrate writes its profile unless told. */
export const DEFAULT_PROFILE_PATH = 'servegate-noise.json'

/** A calibration as the runner measures it: one engine config launched k times, one full cell each. */
export interface CalibrationRun {
  id: string
  /**
   * The engine of launch i (0-based): the same config every time. A simulated engine's launch
   * seed moves on by i (`seededLaunch`), so each launch draws anew.
   */
  engineFor: (launch: number) => EngineRef
  plan: ResolvedCellPlan
  launches: number
  /** The runner's label, part of the testbed; null when none was given. */
  runner: string | null
  /** Where the profile is written once every launch measured. */
  out: string
}

/** What a calibration measured: every launch's record, the profile made of them, and where it was written. */
export interface Calibration {
  profile: NoiseProfile
  records: RunRecord[]
  /** The absolute path of the profile. */
  path: string
}

/**
 * Launches the engine `launches` times, one after another, each a fresh process measuring the
 * whole cell, then writes the noise profile of the launches (`noiseProfile`) to `out`. A launch whose cell
 * failed, or measured nothing, stops the calibration: its spread would be the failure's.
 * @throws ServegateError with the failed launch's code, naming the launch
 */
export async function calibrate(
  runner: Runner,
  run: CalibrationRun,
  hooks: Pick<EngineCellHooks, 'signal' | 'onPhase'> & { onLaunch?: (launch: number, record: RunRecord) => void } = {},
): Promise<Calibration> {
  const records: RunRecord[] = []
  const feed = runner.feed({ cell: run.id, arm: null, engine: run.engineFor(0).name, step: null })
  for (let i = 0; i < run.launches; i++) {
    const at = feed.at({ kind: 'launch', index: i + 1, of: run.launches })
    const onPhase: EngineCellHooks['onPhase'] = (p) => {
      at.phase(p)
      hooks.onPhase?.(p)
    }
    const record = await at.measuring(() => runner.measure(run.engineFor(i), run.plan, 'fresh', { onPhase, signal: hooks.signal }))
    // Interrupted: the launch is cut short, and a profile of cut launches would say nothing.
    if (hooks.signal?.aborted === true) throw hooks.signal.reason
    const failure = record.cellFailure
    if (failure !== null) {
      throw new ServegateError(failure.code, `calibration launch ${i + 1} of ${run.launches} failed: ${failure.message}`)
    }
    if (record.completed === 0) {
      throw new ServegateError('INTERNAL', `calibration launch ${i + 1} of ${run.launches} measured nothing: every request failed`)
    }
    records.push(record)
    hooks.onLaunch?.(i, record)
  }
  const profile = noiseProfile(records, { runner: run.runner, measuredAt: new Date().toISOString() })
  return { profile, records, path: await writeNoiseProfile(run.out, profile) }
}
