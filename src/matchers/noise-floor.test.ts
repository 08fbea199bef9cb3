import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { around, launchOf } from '../../fixtures/gate-fixture.ts'
import { measuredArm } from '../../fixtures/manifest.ts'
import { WinGateOptions } from '../gates/gate-options.ts'
import { launchSpread, testbedOf, withNoiseFloor } from '../gates/noise-floor.ts'
import { winGate } from '../gates/win.ts'
import { historyCellKey } from '../record/history-store.ts'
import { HISTORY_SCHEMA_ID, type HistoryRun, NOISE_PROFILE_SCHEMA_ID, type NoiseProfile, type Testbed } from '../schema/noise.ts'
import type { PairResult } from '../schema/results.ts'
import type { RunRecord } from '../schema/run.ts'
import { NoiseOptions } from '../schema/worker-options.ts'
import { noiseFloorOf } from './noise-floor.ts'

let dir = ''
let baseline: RunRecord
let candidate: RunRecord
let pair: PairResult
const o = WinGateOptions.parse({ gate: 'toWinDecode' })

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'servegate-noise-'))
  // A measured cell's record (its plan and manifest give the testbed), with requests set as data
  // so the verdict does not ride on this machine's timing: a clear decode win, 300 against 600 tok/s.
  const measured = await measuredArm(300)
  baseline = { ...measured, requests: launchOf('decodeTokPerS', around(300, 32)).requests }
  candidate = { ...measured, requests: launchOf('decodeTokPerS', around(600, 32, 0.05, 1)).requests }
  pair = { kind: 'pair', id: 'decode', baseline: [baseline], candidate: [candidate], launchOrder: ['baseline', 'candidate'] }
})
afterAll(async () => {
  await rm(dir, { recursive: true, force: true })
})

function profileFor(testbed: Testbed, sd: number): NoiseProfile {
  return {
    schema: NOISE_PROFILE_SCHEMA_ID,
    servegateVersion: '0.1.0',
    measuredAt: '2026-12-01T10:00:00.000Z',
    testbed,
    launches: 5,
    metrics: { decodeTokPerS: launchSpread([1, Math.exp(sd), Math.exp(-sd), Math.exp(2 * sd), Math.exp(-2 * sd)].map((f) => 300 * f)) },
  }
}

async function written(name: string, value: unknown): Promise<string> {
  const path = join(dir, name)
  await writeFile(path, typeof value === 'string' ? value : JSON.stringify(value))
  return path
}

/** A history file of `runs` runs of main of the pair's baseline arm on `testbed`, its decode alternating ±`swing` around 300 tok/s. */
async function historyFile(name: string, testbed: Testbed, runs: number, swing: number, relativeSe: number | null): Promise<string> {
  const lines: HistoryRun[] = Array.from({ length: runs }, (_, i) => ({
    schema: HISTORY_SCHEMA_ID,
    commit: `c${i}`,
    branch: 'main',
    at: new Date(Date.UTC(2026, 10, 1 + i)).toISOString(),
    cells: [
      {
        cell: historyCellKey('decode', 'baseline'),
        testbed,
        metrics: { decodeTokPerS: { value: 300 * (i % 2 === 0 ? 1 + swing : 1 - swing), relativeSe } },
      },
    ],
  }))
  return written(name, lines.map((r) => JSON.stringify(r)).join('\n') + '\n')
}

const noise = (given: object) => NoiseOptions.parse(given)

describe('the launch-noise floor of a matcher', () => {
  test('a profile of this testbed: its bound decides, and the decision says it was measured', async () => {
    const profile = profileFor(testbedOf(candidate, 'ci'), 0.03)
    const path = await written('measured.json', profile)
    const floored = noiseFloorOf(pair, {}, o, 'decodeTokPerS', noise({ profile: path, runner: 'ci' }))
    const bound = profile.metrics.decodeTokPerS?.upper as number
    expect(floored.options.launchNoise).toBe(bound)
    expect(floored.floor).toMatchObject({ source: 'measured', value: bound, measured: { path, launches: 5 }, notUsed: [] })
    const d = withNoiseFloor(winGate({ baseline, candidate }, floored.options), floored.floor)
    expect(d.effect.method).toMatch(new RegExp(`launch noise ${(bound * 100).toPrecision(3).replace(/0+$/, '').replace(/\.$/, '')}%`))
    expect(d.warnings.some((w) => w.includes('assumed'))).toBe(false)
    expect(d.noiseFloor?.text).toMatch(/measured by servegate calibrate on 2026-12-01 with 5 launches/)
  })

  test('a profile of another GPU is not used: the floor is assumed, says why, and warns', async () => {
    const other = profileFor({ ...testbedOf(candidate, 'ci'), gpu: { model: 'NVIDIA A100-SXM4-80GB', count: 1 } }, 0.03)
    const path = await written('other.json', other)
    const floored = noiseFloorOf(pair, {}, o, 'decodeTokPerS', noise({ profile: path, runner: 'ci' }))
    expect(floored.floor).toMatchObject({ source: 'assumed', value: 0.02 })
    expect(floored.floor?.notUsed).toEqual([
      `profile ${path} is for another testbed (GPU: the profile has NVIDIA A100-SXM4-80GB ×1, this run NVIDIA H100 80GB HBM3 ×1)`,
    ])
    const d = withNoiseFloor(winGate({ baseline, candidate }, floored.options), floored.floor)
    expect(d.outcome).toBe('pass')
    expect(d.warnings).toContain(floored.floor?.text)
    expect(floored.floor?.text).toMatch(/run `servegate calibrate` to measure it$/)
  })

  test('strict noise: an assumed floor decides nothing', () => {
    const floored = noiseFloorOf(pair, {}, o, 'decodeTokPerS', noise({ strict: true }))
    const d = withNoiseFloor(winGate({ baseline, candidate }, floored.options), floored.floor)
    expect(d.outcome).toBe('inconclusive')
    expect(d.warnings.at(-1)).toMatch(/^strict noise: the pass is not taken, since the launch-noise floor is assumed/)
  })

  test('the history of main: enough runs of this cell on this testbed teach the floor', async () => {
    const path = await historyFile('history.jsonl', testbedOf(candidate, null), 10, 0.06, 0.001)
    const floored = noiseFloorOf(pair, {}, o, 'decodeTokPerS', noise({ history: path }))
    expect(floored.floor?.source).toBe('history')
    expect(floored.floor?.history).toMatchObject({ path, runs: 10 })
    expect(floored.floor?.value).toBeGreaterThan(0.05)
  })

  test("each arm's history is read on its own testbed: a baseline on another engine version counts", async () => {
    const manifest = baseline.manifest as NonNullable<RunRecord['manifest']>
    const older = {
      ...baseline,
      manifest: { ...manifest, engine: { ...manifest.engine, version: { ...manifest.engine.version, value: '0.10.0' } } },
    }
    const testbed = testbedOf(older, null)
    expect(testbed.engine.version).toBe('0.10.0')
    const path = await historyFile('history-older.jsonl', testbed, 9, 0.05, null)
    const floored = noiseFloorOf({ ...pair, baseline: [older] }, {}, o, 'decodeTokPerS', noise({ history: path }))
    expect(floored.floor).toMatchObject({ source: 'history', history: { runs: 9 } })
  })

  test("the spec's own launchNoise wins, and repeated launches take no floor", () => {
    expect(noiseFloorOf(pair, { launchNoise: 0.035 }, { ...o, launchNoise: 0.035 }, 'decodeTokPerS', undefined).floor).toMatchObject({
      source: 'option',
      value: 0.035,
    })
    const repeated: PairResult = { ...pair, baseline: [baseline, baseline], candidate: [candidate, candidate] }
    expect(noiseFloorOf(repeated, {}, o, 'decodeTokPerS', undefined)).toEqual({ options: o, floor: null })
  })

  test('a profile that cannot be read is an error naming the option and the command', async () => {
    expect(() => noiseFloorOf(pair, {}, o, 'decodeTokPerS', noise({ profile: join(dir, 'missing.json') }))).toThrow(
      /servegate\(\{ noise: \{ profile \} \}\): cannot read .*missing.json \(ENOENT\); run `servegate calibrate --out/,
    )
    const bad = await written('bad.json', { schema: 'something else' })
    expect(() => noiseFloorOf(pair, {}, o, 'decodeTokPerS', noise({ profile: bad }))).toThrow(/is not a servegate.noise-profile\/v1 file/)
  })
})
