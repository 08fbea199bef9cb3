/**
 * The launch-noise floor of a gate matcher: resolved where the matcher is called, from the spec's
 * own `launchNoise`, the profile `servegate calibrate` wrote, the history of main, or the 2%
 * servegate assumes, as the plugin's `noise` option names them (docs/gates.md, "Launch noise").
 */
import { readFileSync } from 'node:fs'
import { z } from 'zod'
import { ServegateError } from '../errors.ts'
import { historySpread, resolveNoiseFloor, testbedOf } from '../gates/noise-floor.ts'
import { historyCellKey, parseHistory } from '../record/history-store.ts'
import { type HistoryRun, NoiseProfile, type NoiseFloor } from '../schema/noise.ts'
import type { PairResult } from '../schema/results.ts'
import { type NoiseOptions, RUNNER_ENV } from '../schema/worker-options.ts'
import { workerOptions } from '../worker/provided-options.ts'

const profiles = new Map<string, NoiseProfile>()
const histories = new Map<string, HistoryRun[]>()

/** The profile at `path`, read once a process. A missing or malformed file is an error naming the option and the fix. */
function profileAt(path: string): NoiseProfile {
  const cached = profiles.get(path)
  if (cached !== undefined) return cached
  let text: string
  try {
    text = readFileSync(path, 'utf8')
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code ?? 'error'
    throw new ServegateError(
      'CONFIG_INVALID',
      `servegate({ noise: { profile } }): cannot read ${path} (${code}); run \`servegate calibrate --out ${path}\` on this runner, or remove the option`,
      { cause: error },
    )
  }
  let parsed: ReturnType<typeof NoiseProfile.safeParse>
  try {
    parsed = NoiseProfile.safeParse(JSON.parse(text))
  } catch (error) {
    throw new ServegateError(
      'CONFIG_INVALID',
      `servegate({ noise: { profile } }): ${path} is not JSON; write it with servegate calibrate`,
      {
        cause: error,
      },
    )
  }
  if (!parsed.success) {
    throw new ServegateError(
      'CONFIG_INVALID',
      `servegate({ noise: { profile } }): ${path} is not a servegate.noise-profile/v1 file (${z.prettifyError(parsed.error)}); write it with servegate calibrate`,
    )
  }
  profiles.set(path, parsed.data)
  return parsed.data
}

/** The history at `path`, read once a process; a missing file is an empty history. */
function historyAt(path: string): HistoryRun[] {
  const cached = histories.get(path)
  if (cached !== undefined) return cached
  let text = ''
  try {
    text = readFileSync(path, 'utf8')
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') {
      throw new ServegateError('CONFIG_INVALID', `servegate({ noise: { history } }): cannot read ${path}: ${(error as Error).message}`, {
        cause: error,
      })
    }
  }
  const runs = parseHistory(text, path)
  histories.set(path, runs)
  return runs
}

/** A gate matcher's options with the floor it is to use, and the floor to record beside its decision. */
export interface FlooredOptions<O> {
  options: O
  /** Null when the arms come with repeated launches: the launch-level test measures the noise itself. */
  floor: NoiseFloor | null
}

/**
 * Resolves the launch-noise floor of a gate on `pair` for `metric` (the decision's metric name):
 * the spec's own `launchNoise` when it set one, else what the plugin's `noise` option names.
 * @example const floored = noiseFloorOf(pair, options, o, 'decodeTokPerS')
 */
export function noiseFloorOf<O extends { launchNoise: number }>(
  pair: PairResult,
  given: object,
  o: O,
  metric: string,
  noise: NoiseOptions | undefined = workerOptions().noise,
): FlooredOptions<O> {
  // Repeated launches: the gate judges launch against launch, and the floor is not used.
  if (pair.baseline.length > 1 && pair.candidate.length > 1) return { options: o, floor: null }
  const record = pair.candidate[0] ?? pair.baseline[0]
  if (record === undefined) return { options: o, floor: null }
  const label = noise?.runner ?? process.env[RUNNER_ENV] ?? null
  const runner = label === '' ? null : label
  const testbed = testbedOf(record, runner)
  const profile = noise?.profile === undefined ? null : { path: noise.profile, profile: profileAt(noise.profile) }
  let history: { path: string; spread: ReturnType<typeof historySpread> } | null = null
  if (noise?.history !== undefined) {
    const runs = historyAt(noise.history)
    // Either arm's runs of main tell the runner's launch noise, each on its own testbed (the arms
    // may run different engine versions); the larger is the safer.
    const spreads = (['baseline', 'candidate'] as const).map((arm) => {
      const first = pair[arm][0]
      return historySpread(runs, historyCellKey(pair.id, arm), metric, first === undefined ? testbed : testbedOf(first, runner))
    })
    const measured = spreads.filter((s) => !('reason' in s)) as { runs: number; sd: number; upper: number }[]
    const spread = measured.length === 0 ? (spreads[0] as ReturnType<typeof historySpread>) : measured.sort((a, b) => b.upper - a.upper)[0]
    history = { path: noise.history, spread: spread as ReturnType<typeof historySpread> }
  }
  const option = 'launchNoise' in given && typeof given.launchNoise === 'number' ? given.launchNoise : undefined
  const strict = noise?.strict ?? false
  const floor = resolveNoiseFloor({ metric, testbed, profile, history, strict, ...(option === undefined ? {} : { option }) })
  return { options: { ...o, launchNoise: floor.value }, floor }
}
