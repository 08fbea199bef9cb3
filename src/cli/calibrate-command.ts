import { ServegateError } from '../errors.ts'
import { type ResolvedEngineConfig, resolveEngineConfig } from '../engines/config.ts'
import { PLANNED_POWER, type ProfileReading, readProfile } from '../gates/detectable-change.ts'
import { DEFAULT_CONFIDENCE } from '../gates/gate-options.ts'
import { launchFigures } from '../gates/launch-figures.ts'
import { formatPercent } from '../number-format.ts'
import { calibrate, DEFAULT_LAUNCHES, DEFAULT_PROFILE_PATH } from '../runner/calibration.ts'
import { resolveCellPlan } from '../runner/cell-options.ts'
import { Runner } from '../runner/runner.ts'
import type { NoiseProfile } from '../schema/noise.ts'
import { RUNNER_ENV } from '../schema/worker-options.ts'
import { seededLaunch, simCommandConfig } from '../sim/sim-engine.ts'
import {
  cellFromFlags,
  checkInputFiles,
  environmentFromFlags,
  ARRIVAL_FLAGS,
  LOAD_FLAGS,
  numberFlag,
  readEngineConfig,
  WORKLOAD_FLAGS,
} from './cell-flags.ts'
import type { CliIo } from './cli-io.ts'
import { intFlag, parseFlags } from './flags.ts'
import { interruption } from './interrupt.ts'
import { checkWritableFile } from './path-flags.ts'
import { progressLine } from './progress-line.ts'
import { checkDeclaredFiles, loadFlags } from './run-command.ts'

/** The most launches one calibration makes. */
const MAX_LAUNCHES = 100

const CALIBRATE_HELP =
  "servegate calibrate — measure this runner's launch-to-launch noise: launch one engine config k times, " +
  'a full cell each, and write the noise profile the gates take their floor from (docs/gates.md, "Launch noise")' +
  `

  --engine FILE             JSON engine config to launch each time (as servegate run --engine)
  --sim JSON                or servegate's simulated engine with these options (servegate sim's, camelCase),
                            e.g. '{"decodeTokPerS":120,"launchNoise":0.04}'; a launchSeed moves on by 1 each launch
  --model NAME              with --sim: the served model name, default sim-model
  --launches K              launches, each a fresh engine measuring the whole cell, default ${DEFAULT_LAUNCHES}
  --runner LABEL            the runner's label, part of the profile's testbed (default $${RUNNER_ENV}, else none)
  --target X                the relative change to plan for (0.05: 5%), default 0.05
  --out FILE                the profile, default ${DEFAULT_PROFILE_PATH} (checked before the first launch)
  --json                    print the profile as JSON instead of the table
  the cell flags of servegate run: --concurrency, --rate, --requests, --max-tokens, --prompt-tokens, --workload, …
                            (servegate run --help); calibrate the cell shape the gates will judge

The profile applies to runs on the same testbed only: GPU model and count, driver, engine and version,
model, cell shape (concurrency, requests, max_tokens) and runner label.

exit codes: 0 written; 1 a launch failed (nothing written); 2 bad flags or paths, before anything runs;
130 Ctrl-C, 143 SIGTERM, 129 SIGHUP`

const FLAGS = {
  engine: { type: 'string' },
  sim: { type: 'string' },
  model: { type: 'string' },
  'api-key-env': { type: 'string' },
  'nvidia-smi': { type: 'string' },
  ...WORKLOAD_FLAGS,
  ...LOAD_FLAGS,
  ...ARRIVAL_FLAGS,
  launches: { type: 'string' },
  runner: { type: 'string' },
  target: { type: 'string' },
  out: { type: 'string' },
  json: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
} as const

type CalibrateFlags = ReturnType<typeof parseFlags<typeof FLAGS>>['values']

/** The engine config of the flags: `--engine FILE` or `--sim JSON`, exactly one. */
async function engineFromFlags(values: CalibrateFlags): Promise<ResolvedEngineConfig> {
  if ((values.engine === undefined) === (values.sim === undefined)) {
    throw new ServegateError(
      'CONFIG_INVALID',
      values.engine === undefined
        ? '--engine FILE or --sim JSON is required: calibrate launches the engine itself, e.g. --sim \'{"launchNoise":0.04}\''
        : '--engine and --sim are exclusive; pass one engine to launch',
    )
  }
  if (values.engine !== undefined) {
    if (values.model !== undefined) throw new ServegateError('CONFIG_INVALID', '--model: the engine file names its model; drop --model')
    return resolveEngineConfig(await readEngineConfig(values.engine))
  }
  let sim: unknown
  try {
    sim = JSON.parse(values.sim as string)
  } catch (error) {
    throw new ServegateError(
      'CONFIG_INVALID',
      '--sim: not JSON; pass one JSON object of sim options, e.g. --sim \'{"decodeTokPerS":120}\'',
      {
        cause: error,
      },
    )
  }
  if (sim === null || typeof sim !== 'object' || Array.isArray(sim)) {
    throw new ServegateError('CONFIG_INVALID', '--sim: must be a JSON object of sim options, e.g. {"decodeTokPerS":120}')
  }
  try {
    return resolveEngineConfig(simCommandConfig({ model: { id: values.model ?? 'sim-model' }, sim }))
  } catch (error) {
    if (error instanceof ServegateError) throw new ServegateError(error.code, `--sim: ${error.message}`, { cause: error })
    throw error
  }
}

/** `--runner`, else $SERVEGATE_RUNNER, else none. */
function runnerLabel(values: CalibrateFlags): string | null {
  const label = values.runner ?? process.env[RUNNER_ENV]
  if (label === undefined) return null
  if (label.trim() === '')
    throw new ServegateError('CONFIG_INVALID', `--runner: an empty label; pass a name such as h100-ci, or unset ${RUNNER_ENV}`)
  return label
}

/** One launch's line: its decode and TTFT p95 figures where it has them. */
function launchLine(index: number, of: number, profileValues: Record<string, number>): string {
  const decode = profileValues.decodeTokPerS
  const ttft = profileValues['ttftMs p95']
  const parts = [
    decode === undefined ? null : `decode ${decode.toFixed(2)} tok/s (geometric mean)`,
    ttft === undefined ? null : `TTFT p95 ${ttft.toFixed(1)} ms`,
  ].filter((p) => p !== null)
  return `launch ${index + 1}/${of}: ${parts.length > 0 ? parts.join(', ') : 'measured'}`
}

/** The profile's table: each metric's sd, its bound, and the floor a gate on this testbed uses. */
function profileTable(readings: readonly ProfileReading[], confidence: number): string[] {
  const bound = `${Math.round(confidence * 100)}% bound`
  const rows = [`${'metric'.padEnd(26)}  ${'sd'.padStart(7)}  ${bound.padStart(9)}  floor a gate uses`]
  for (const r of readings) {
    const floor = `${formatPercent(r.floor.value)}${r.floor.value > r.upper ? ' (the assumed floor is larger)' : ''}`
    rows.push(`${r.metric.padEnd(26)}  ${formatPercent(r.sd).padStart(7)}  ${formatPercent(r.upper).padStart(9)}  ${floor}`)
  }
  return rows
}

/** What a gate on `what` can detect at this cell, and what a target change needs. */
function meaningLine(what: string, r: ProfileReading | undefined): string | null {
  const c = r?.change ?? null
  if (r === undefined || c === null) return null
  const target = formatPercent(c.target)
  const requests =
    c.requestsForTarget === null
      ? `no cell size with one launch per arm (the ${formatPercent(c.launchNoise)} floor alone hides it)`
      : `${c.requestsForTarget} paired requests per arm with one launch each`
  const launches =
    c.launchesForTarget === null ? 'more than 64 launches per arm' : `${c.launchesForTarget} launches per arm of ${c.requests} requests`
  return (
    `  ${what} (${r.metric}): detects a change of ${formatPercent(c.detectable)} or more at ${c.requests} paired requests per arm; ` +
    `a ${target} change needs ${requests}, or ${launches}`
  )
}

function summary(profile: NoiseProfile, readings: readonly ProfileReading[], out: string): string {
  const level = `one-sided ${formatPercent(1 - (1 - DEFAULT_CONFIDENCE) / 2)}, ${formatPercent(PLANNED_POWER)} power`
  const t = profile.testbed
  const lines = [
    ...profileTable(readings, profile.metrics.decodeTokPerS?.confidence ?? 0.8),
    '',
    `What it means at this cell, one launch per arm (default level: ${level}; request part from the launches, launch part 2·floor²):`,
    meaningLine(
      'decode',
      readings.find((r) => r.metric === 'decodeTokPerS'),
    ),
    meaningLine(
      'TTFT p95',
      readings.find((r) => r.metric === 'ttftMs p95'),
    ),
    '',
    `testbed: runner ${t.runner ?? 'none'}, GPU ${t.gpu.model ?? 'none'} ×${t.gpu.count}, driver ${t.driver ?? 'none'}, ` +
      `engine ${t.engine.kind} ${t.engine.version ?? ''}`.trimEnd() +
      `, model ${t.model}, cell c${t.cell.concurrency} × ${t.cell.requests} requests, max_tokens ${t.cell.maxTokens ?? 'drawn'}`,
    `noise profile: ${out} (${profile.launches} launches); point servegate({ noise: { profile } }) at it`,
  ]
  return lines.filter((l): l is string => l !== null).join('\n')
}

/** `servegate calibrate`: k launches of one engine config, one cell each; writes the noise profile and says what it means. */
export async function calibrateCommand(argv: string[], io: CliIo, signal?: AbortSignal): Promise<number> {
  const { values } = parseFlags('calibrate', argv, FLAGS)
  if (values.help === true) {
    io.stdout.write(`${CALIBRATE_HELP}\n`)
    return 0
  }
  const launches = intFlag('--launches', values.launches, 2, MAX_LAUNCHES) ?? DEFAULT_LAUNCHES
  const target = numberFlag('--target', values.target, { above: 0 }, 10) ?? 0.05
  const runner = runnerLabel(values)
  const config = await engineFromFlags(values)
  const cell = { ...cellFromFlags(values), ...loadFlags(values) }
  const outPath = values.out ?? DEFAULT_PROFILE_PATH
  await checkWritableFile('--out', outPath)
  const rows = await checkInputFiles(values)
  if (rows !== null && cell.requests === undefined) cell.requests = rows
  checkDeclaredFiles(cell, config, values.engine)
  const plan = resolveCellPlan(cell)
  const name = `${config.kind}:${config.model.id}`
  const env = environmentFromFlags(values)
  const result = await calibrate(
    new Runner(env),
    {
      id: 'calibrate',
      engineFor: (i) => ({ id: `calibrate-${i}`, name, config: seededLaunch(config, i) }),
      plan,
      launches,
      runner,
      out: outPath,
    },
    {
      signal,
      onPhase: progressLine(io, name),
      onLaunch: (i, record) => {
        if (values.json !== true) io.stdout.write(`${launchLine(i, launches, launchFigures(record))}\n`)
      },
    },
  ).catch((error: unknown) => {
    if (signal?.aborted === true) return null
    throw error
  })
  if (result === null || signal?.aborted === true) {
    const stop = interruption(signal as AbortSignal)
    io.stderr.write(`servegate: ${stop.message}; calibration stopped, no profile written\n`)
    return stop.exitCode
  }
  const out = result.path
  if (values.json === true) io.stdout.write(`${JSON.stringify({ ...result.profile, path: out }, null, 2)}\n`)
  else io.stdout.write(`${summary(result.profile, readProfile(result.profile, result.records, target), out)}\n`)
  return 0
}
