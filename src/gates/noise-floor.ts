import { probit } from 'simple-statistics'
import type { RunRecord } from '../schema/run.ts'
import type { GateDecision } from '../schema/gate.ts'
import type { HistoryRun, LaunchSpread, NoiseFloor, NoiseProfile, Testbed } from '../schema/noise.ts'
import { formatPercent } from '../number-format.ts'
import { DEFAULT_LAUNCH_NOISE } from './gate-options.ts'

/**
 * Confidence of the upper bound a measured launch sd is used at. With 5 launches the sd itself
 * comes out below the truth about half the time, and a gate told too small a floor claims more
 * than it may: at a true 4% a launch, an A/A pair passes a decode win at margin 0 2.5-2.8% of
 * the time with the estimate, about 1% with its 80% upper bound (docs/gates.md, "Launch noise").
 */
export const NOISE_BOUND_CONFIDENCE = 0.8

/** Runs of main the history must hold before its launch noise is used. */
export const MIN_HISTORY_RUNS = 8

/** The command a reader is sent to when the floor is assumed. */
const CALIBRATE_COMMAND = 'servegate calibrate'

/**
 * The `p` quantile of the chi-square distribution on `df` degrees of freedom, by Wilson and
 * Hilferty's cube-root approximation (within 1% from 2 degrees of freedom on).
 * @example chiSquareQuantile(0.2, 4) // ≈ 1.66 (exact 1.649)
 */
export function chiSquareQuantile(p: number, df: number): number {
  const a = 2 / (9 * df)
  return df * Math.max(0, 1 - a + probit(p) * Math.sqrt(a)) ** 3
}

/** The one-sided upper confidence bound on an sd estimated with `df` degrees of freedom. */
function upperBound(sd: number, df: number, confidence: number): number {
  if (df < 1) return Infinity
  return sd * Math.sqrt(df / chiSquareQuantile(1 - confidence, df))
}

/**
 * The launch-to-launch spread of one metric from each launch's figure: the sd of their logs
 * and its upper confidence bound (chi-square on k − 1 degrees of freedom).
 * @example launchSpread([60.1, 58.2, 61.9, 59.0, 60.4]).sd // ≈ 0.024
 */
export function launchSpread(values: readonly number[], confidence = NOISE_BOUND_CONFIDENCE): LaunchSpread {
  const logs = values.filter((v) => v > 0 && Number.isFinite(v)).map(Math.log)
  const k = logs.length
  const mean = logs.reduce((a, b) => a + b, 0) / Math.max(1, k)
  const sd = k < 2 ? 0 : Math.sqrt(logs.reduce((s, x) => s + (x - mean) ** 2, 0) / (k - 1))
  return { sd, upper: k < 2 ? Infinity : upperBound(sd, k - 1, confidence), confidence, values: [...values] }
}

/**
 * The testbed a cell ran on, from its record's manifest and plan; `runner` is the user's label.
 * @example testbedOf(record, 'h100-ci').gpu // { model: 'NVIDIA H100 80GB HBM3', count: 8 }
 */
export function testbedOf(record: RunRecord, runner: string | null): Testbed {
  const m = record.manifest
  const devices = m?.gpus.status === 'ok' ? m.gpus.devices : []
  return {
    runner,
    gpu: { model: devices[0]?.name ?? null, count: devices.length },
    driver: devices[0]?.driverVersion ?? null,
    engine: { kind: m?.engine.kind ?? 'unknown', version: m?.engine.version.value ?? null },
    model: record.plan.model,
    cell: { concurrency: record.plan.concurrency, requests: record.plan.requests, maxTokens: record.plan.maxTokens },
  }
}

function shown(v: unknown): string {
  return v === null ? 'none' : typeof v === 'string' ? v : JSON.stringify(v)
}

/**
 * Why a figure measured on `measured` does not apply to a run on `run`, naming the first field
 * that differs; null when the testbeds are the same.
 * @example testbedMismatch(profile.testbed, run) // 'GPU: the profile has NVIDIA A100 ×8, this run NVIDIA H100 ×8'
 */
export function testbedMismatch(measured: Testbed, run: Testbed, what = 'the profile'): string | null {
  const fields: [string, unknown, unknown][] = [
    ['runner label', measured.runner, run.runner],
    ['GPU', `${measured.gpu.model ?? 'none'} ×${measured.gpu.count}`, `${run.gpu.model ?? 'none'} ×${run.gpu.count}`],
    ['driver', measured.driver, run.driver],
    ['engine', measured.engine.kind, run.engine.kind],
    ['engine version', measured.engine.version, run.engine.version],
    ['model', measured.model, run.model],
    ['cell shape', measured.cell, run.cell],
  ]
  for (const [name, a, b] of fields) {
    if (JSON.stringify(a) !== JSON.stringify(b)) return `${name}: ${what} has ${shown(a)}, this run ${shown(b)}`
  }
  return null
}

/** The history's launch noise of one cell's metric, or why there is none. */
export type HistorySpread = { runs: number; sd: number; upper: number } | { runs: number; reason: string }

/**
 * Launch noise learned from the runs of main, robust to real changes between commits: from the
 * successive differences of the cell's log figure, run to run. A change that a commit made moves
 * one difference, which the median-based scale leaves out (differences beyond 3.5 robust sds are
 * dropped). Each run's own sampling error stays in: every run sends the same prompts, so the
 * prompts' spread, which a run's `relativeSe` holds, does not vary from run to run, and taking it
 * out would take out launch noise too. The estimate errs high by the runs' sampling error, never
 * low. The bound uses two thirds of the differences as degrees of freedom, since successive
 * differences overlap.
 * @example historySpread(runs, 'decode-c8', 'decodeTokPerS', testbed) // { runs: 12, sd: 0.031, upper: 0.041 }
 */
export function historySpread(
  runs: readonly HistoryRun[],
  cell: string,
  metric: string,
  testbed: Testbed,
  confidence = NOISE_BOUND_CONFIDENCE,
): HistorySpread {
  const points: number[] = []
  for (const run of runs) {
    const c = run.cells.find((x) => x.cell === cell && testbedMismatch(x.testbed, testbed) === null)
    const figure = c?.metrics[metric]
    if (figure !== undefined) points.push(Math.log(figure.value))
  }
  const n = points.length
  if (n < MIN_HISTORY_RUNS) {
    return {
      runs: n,
      reason: `the history holds ${n} run${n === 1 ? '' : 's'} of this cell on this testbed; ${MIN_HISTORY_RUNS} are needed`,
    }
  }
  const diffs = points.slice(1).map((p, i) => p - (points[i] as number))
  const scale = 1.4826 * median(diffs.map(Math.abs))
  const kept = scale > 0 ? diffs.filter((d) => Math.abs(d) <= 3.5 * scale) : diffs
  const sd = Math.sqrt(kept.reduce((s, d) => s + d * d, 0) / (2 * kept.length))
  const df = Math.max(1, Math.floor((2 * kept.length) / 3))
  return { runs: n, sd, upper: upperBound(sd, df, confidence) }
}

function median(values: readonly number[]): number {
  const s = [...values].sort((a, b) => a - b)
  const mid = Math.floor(s.length / 2)
  return s.length === 0 ? 0 : s.length % 2 === 1 ? (s[mid] as number) : ((s[mid - 1] as number) + (s[mid] as number)) / 2
}

/** What a gate's floor is resolved from. */
export interface NoiseFloorInputs {
  /** The gate's own `launchNoise` option, when the spec set it. */
  option?: number
  /** The metric as the gate names it (`decodeTokPerS`, `ttftMs p95`…). */
  metric: string
  /** The testbed of the run the gate judges. */
  testbed: Testbed
  profile?: { path: string; profile: NoiseProfile } | null
  history?: { path: string; spread: HistorySpread } | null
  /** The floor assumed when nothing is measured. @default DEFAULT_LAUNCH_NOISE */
  assumed?: number
  /** An assumed floor may not decide a merge gate (`noise.strict`). @default false */
  strict?: boolean
}

/**
 * The launch-noise floor a gate uses, and where it came from. A spec's own `launchNoise` wins.
 * Otherwise the larger of the measured profile's bound (when its testbed is this run's), the
 * history's bound (with enough runs of main) and the assumed floor; with neither measured nor
 * learned, the floor is assumed and the text says which command measures it.
 * @example resolveNoiseFloor({ metric: 'decodeTokPerS', testbed }).source // 'assumed'
 */
export function resolveNoiseFloor(inputs: NoiseFloorInputs): NoiseFloor {
  const assumed = inputs.assumed ?? DEFAULT_LAUNCH_NOISE
  const strict = inputs.strict ?? false
  const notUsed: string[] = []
  let measured: NoiseFloor['measured'] = null
  const profile = inputs.profile ?? null
  if (profile !== null) {
    const mismatch = testbedMismatch(profile.profile.testbed, inputs.testbed)
    const spread = profile.profile.metrics[inputs.metric]
    if (mismatch !== null) notUsed.push(`profile ${profile.path} is for another testbed (${mismatch})`)
    else if (spread === undefined) notUsed.push(`profile ${profile.path} has no figure for ${inputs.metric}`)
    else {
      const { measuredAt, launches } = profile.profile
      measured = { path: profile.path, measuredAt, launches, sd: spread.sd, upper: spread.upper }
    }
  }
  let history: NoiseFloor['history'] = null
  const learned = inputs.history ?? null
  if (learned !== null) {
    if ('reason' in learned.spread) notUsed.push(`history ${learned.path}: ${learned.spread.reason}`)
    else history = { path: learned.path, runs: learned.spread.runs, sd: learned.spread.sd, upper: learned.spread.upper }
  }
  if (inputs.option !== undefined) {
    const text = `launch noise ${formatPercent(inputs.option)} a launch, set by the spec's launchNoise option`
    return { value: inputs.option, source: 'option', measured, history, assumed, notUsed, text, strict }
  }
  if (measured === null && history === null) {
    const text =
      `launch noise assumed at ${formatPercent(assumed)} a launch, not measured on this runner` +
      (notUsed.length > 0 ? ` (${notUsed.join('; ')})` : '') +
      `; run \`${CALIBRATE_COMMAND}\` to measure it`
    return { value: assumed, source: 'assumed', measured, history, assumed, notUsed, text, strict }
  }
  const fromProfile = measured?.upper ?? 0
  const fromHistory = history?.upper ?? 0
  const source = fromProfile >= fromHistory ? 'measured' : 'history'
  const value = Math.max(fromProfile, fromHistory, assumed)
  const basis =
    source === 'measured' && measured !== null
      ? `measured by ${CALIBRATE_COMMAND} on ${measured.measuredAt.slice(0, 10)} with ${measured.launches} launches (sd ${formatPercent(measured.sd)}, ${Math.round(NOISE_BOUND_CONFIDENCE * 100)}% bound ${formatPercent(measured.upper)})`
      : `learned from ${history?.runs ?? 0} runs of main (sd ${formatPercent(history?.sd ?? 0)}, ${Math.round(NOISE_BOUND_CONFIDENCE * 100)}% bound ${formatPercent(history?.upper ?? 0)})`
  const floored = value > Math.max(fromProfile, fromHistory) ? `; the ${formatPercent(assumed)} floor is larger and is used` : ''
  const text = `launch noise ${formatPercent(value)} a launch, ${basis}${floored}`
  return { value, source, measured, history, assumed, notUsed, text, strict }
}

/**
 * The decision with its floor beside it. An assumed floor adds its warning (it names the command
 * that measures one); under `noise.strict` it makes a decided merge gate inconclusive. `verify`
 * applies it again from the recorded floor.
 */
export function withNoiseFloor(decision: GateDecision, floor: NoiseFloor | null): GateDecision {
  if (floor === null) return decision
  const warnings = [...decision.warnings]
  if (floor.source === 'assumed') warnings.push(floor.text)
  if (floor.source === 'assumed' && floor.strict && decision.outcome !== 'inconclusive') {
    warnings.push(
      `strict noise: the ${decision.outcome} is not taken, since the launch-noise floor is assumed, not measured on this runner ` +
        '(servegate({ noise: { strict: true } }))',
    )
    return { ...decision, outcome: 'inconclusive', warnings, noiseFloor: floor }
  }
  return { ...decision, warnings, noiseFloor: floor }
}
