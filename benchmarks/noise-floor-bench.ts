/**
 * `npm run bench:noise-floor [-- --trials N] [-- --json FILE]`: the launch-noise floor through the
 * profile path. With a true launch sd of 4%, each trial calibrates (k = 5 simulated launches →
 * `profileMetrics` → a NoiseProfile → `resolveNoiseFloor`), then the real `winGate` judges a
 * fresh A/A pair (64 requests, one launch per arm, each arm's launch effect sd 4%) at margin 0
 * with that floor. Counted: the false-pass rate with the measured floor, with the 2% floor
 * assumed, and with a profile of another testbed (not used: the floor is assumed and the
 * decision warns); and how often the profile's 80% bound covers the injected sd. Never fails on a
 * figure (it is a measurement); docs/gates.md, "Launch noise", quotes it.
 */
import { writeFile } from 'node:fs/promises'
import { parseArgs } from 'node:util'
import { pathToFileURL } from 'node:url'
import { profileMetrics } from '../src/gates/launch-figures.ts'
import { resolveNoiseFloor } from '../src/gates/noise-floor.ts'
import { winGate } from '../src/gates/win.ts'
import { mixSeed } from '../src/random.ts'
import { NOISE_PROFILE_SCHEMA_ID, type NoiseFloor, type NoiseProfile, type Testbed } from '../src/schema/noise.ts'
import { clopperPearson } from '../src/stats/tests.ts'
import { DEFAULT_NOISE, simulatePair } from './gate/simulate.ts'

/** The seed of the whole bench; every figure is reproducible from it. */
const NOISE_FLOOR_SEED = 20_261_204

/** The runner the profiles are measured on, and the one a mismatched run comes from. */
const TESTBED: Testbed = {
  runner: 'bench',
  gpu: { model: 'NVIDIA H100 80GB HBM3', count: 1 },
  driver: '550.54.15',
  engine: { kind: 'vllm', version: '0.11.0' },
  model: 'bench-model',
  cell: { concurrency: 8, requests: 64, maxTokens: 256 },
}
const OTHER_TESTBED: Testbed = { ...TESTBED, gpu: { model: 'NVIDIA A100-SXM4-80GB', count: 1 } }

/** What one run of the bench is: the injected sd, the calibration's launches, the A/A cell. */
export interface NoiseFloorPlan {
  trials: number
  launchSd: number
  launches: number
  requests: number
  seed: number
}

/** A share over trials with its 95% Clopper–Pearson interval. */
export interface Share {
  count: number
  trials: number
  rate: number
  low: number
  high: number
}

export interface NoiseFloorResult {
  plan: NoiseFloorPlan
  /** A/A decode wins at margin 0 with the floor resolved from each trial's own profile. */
  measured: Share
  /** The same pairs with the floor assumed at 2%. */
  assumed: Share
  /** The same pairs with a profile of another testbed: not used, so the floor is assumed. */
  otherTestbed: Share & { source: NoiseFloor['source']; text: string }
  /** Trials whose profile's 80% bound on the decode launch sd is at least the injected sd. */
  boundCovers: Share
  /** The floors the gate used, quartiles over the trials. */
  floorQuartiles: [number, number, number]
}

function share(count: number, trials: number): Share {
  const { low, high } = clopperPearson(count, trials, 0.95)
  return { count, trials, rate: count / trials, low, high }
}

function profileOf(metrics: NoiseProfile['metrics'], launches: number): NoiseProfile {
  const base = { schema: NOISE_PROFILE_SCHEMA_ID, servegateVersion: 'bench', measuredAt: '2026-12-04T00:00:00.000Z' } as const
  return { ...base, testbed: TESTBED, launches, metrics }
}

/** A decode win at margin 0 on an A/A pair, with `launchNoise` as the floor. */
function falsePass(pair: ReturnType<typeof simulatePair>, launchNoise: number): boolean {
  const baseline = pair.baseline[0]
  const candidate = pair.candidate[0]
  if (baseline === undefined || candidate === undefined) return false
  return winGate({ baseline, candidate }, { gate: 'toWinDecode', margin: 0, launchNoise }).outcome === 'pass'
}

/** Runs the bench: every trial a calibration of its own, then one A/A pair judged three ways. */
export function runNoiseFloorBench(plan: NoiseFloorPlan): NoiseFloorResult {
  const model = { ...DEFAULT_NOISE, launchSd: plan.launchSd }
  let measured = 0
  let assumed = 0
  let other = 0
  let covers = 0
  let otherFloor: NoiseFloor | null = null
  const floors: number[] = []
  for (let t = 0; t < plan.trials; t++) {
    // The calibration: k launches of one engine, each its own launch effect, the same prompts.
    const none = { decode: 1, firstOutput: 1 }
    const calibration = simulatePair(model, {
      requests: plan.requests,
      launches: plan.launches,
      effect: none,
      seed: mixSeed(plan.seed, 2 * t),
    })
    const profile = { path: 'servegate-noise.json', profile: profileOf(profileMetrics(calibration.baseline), plan.launches) }
    const floor = resolveNoiseFloor({ metric: 'decodeTokPerS', testbed: TESTBED, profile })
    floors.push(floor.value)
    if ((profile.profile.metrics.decodeTokPerS?.upper ?? 0) >= plan.launchSd) covers++
    otherFloor = resolveNoiseFloor({ metric: 'decodeTokPerS', testbed: OTHER_TESTBED, profile })
    // A fresh A/A pair on the runner, one launch per arm.
    const pair = simulatePair(model, { requests: plan.requests, launches: 1, effect: none, seed: mixSeed(plan.seed, 2 * t + 1) })
    if (falsePass(pair, floor.value)) measured++
    if (falsePass(pair, resolveNoiseFloor({ metric: 'decodeTokPerS', testbed: TESTBED }).value)) assumed++
    if (falsePass(pair, otherFloor.value)) other++
  }
  floors.sort((a, b) => a - b)
  const q = (p: number) => floors[Math.min(floors.length - 1, Math.floor(p * floors.length))] as number
  return {
    plan,
    measured: share(measured, plan.trials),
    assumed: share(assumed, plan.trials),
    otherTestbed: { ...share(other, plan.trials), source: otherFloor?.source ?? 'assumed', text: otherFloor?.text ?? '' },
    boundCovers: share(covers, plan.trials),
    floorQuartiles: [q(0.25), q(0.5), q(0.75)],
  }
}

const pct = (x: number, digits = 2) => `${(x * 100).toFixed(digits)}%`
const shareText = (s: Share) => `${pct(s.rate)} (${s.count}/${s.trials}; 95% CI ${pct(s.low)}–${pct(s.high)})`

/** The figures as the docs quote them. */
export function renderNoiseFloor(r: NoiseFloorResult): string {
  const p = r.plan
  return [
    `launch-noise floor through the profile path: true launch sd ${pct(p.launchSd, 0)}, calibration of ${p.launches} launches,`,
    `A/A decode-win pairs of ${p.requests} requests, one launch per arm, margin 0, ${p.trials} trials (seed ${p.seed})`,
    `  floor from the measured profile (80% bound): false pass ${shareText(r.measured)}; target ≤ 1.5%`,
    `  floor assumed at 2%:                          false pass ${shareText(r.assumed)}`,
    `  profile of another testbed (not used):        false pass ${shareText(r.otherTestbed)}; floor ${r.otherTestbed.source}`,
    `    the decision says: ${r.otherTestbed.text}`,
    `  the profile's 80% bound ≥ the injected ${pct(p.launchSd, 0)}: ${shareText(r.boundCovers)}`,
    `  floors used: quartiles ${r.floorQuartiles.map((f) => pct(f, 1)).join(', ')}`,
  ].join('\n')
}

async function main(): Promise<void> {
  const { values } = parseArgs({ options: { trials: { type: 'string' }, json: { type: 'string' } } })
  const plan: NoiseFloorPlan = { trials: Number(values.trials ?? 4000), launchSd: 0.04, launches: 5, requests: 64, seed: NOISE_FLOOR_SEED }
  if (!(Number.isInteger(plan.trials) && plan.trials > 0)) throw new RangeError(`--trials: a positive integer, got ${values.trials}`)
  const started = performance.now()
  const result = runNoiseFloorBench(plan)
  process.stdout.write(`${renderNoiseFloor(result)}\n  (${((performance.now() - started) / 1000).toFixed(1)} s)\n`)
  if (values.json !== undefined) await writeFile(values.json, `${JSON.stringify(result, null, 2)}\n`)
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) await main()
