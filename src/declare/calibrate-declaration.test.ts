import { mkdtempSync, readFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, test } from 'vitest'
import { NoiseProfile } from '../schema/noise.ts'
import { calibrate, type CalibrateSpec } from './calibrate-declaration.ts'
import { engine } from './engine-handles.ts'
import { declaredCell } from '../worker/cell-registry.ts'

const dir = mkdtempSync(join(tmpdir(), 'servegate-calibrate-'))
const sim = engine.sim({ sim: { decodeTokPerS: 400, batchSlowdown: 0, launchNoise: 0.3, launchSeed: 1 } })
const out = join(dir, 'noise.json')
const noise = calibrate({
  engine: sim,
  launches: 3,
  out,
  runner: 'spec-runner',
  concurrency: 2,
  requests: 4,
  maxTokens: 4,
  workload: { promptTokens: 32 },
})

const declared = declaredCell('sim:sim-model-synthetic-summary-ctx32-calibrate')

describe('calibrate() in a spec', () => {
  test('launches the engine k times, each fresh and with its own launch draw, and writes the profile', async () => {
    const result = await noise
    expect(result.path).toBe(out)
    expect(result.records).toHaveLength(3)
    const profile = NoiseProfile.parse(JSON.parse(readFileSync(out, 'utf8')))
    expect(profile).toEqual(result.profile)
    expect(profile.launches).toBe(3)
    expect(profile.testbed).toMatchObject({
      runner: 'spec-runner',
      model: 'sim-model',
      cell: { concurrency: 2, requests: 4, maxTokens: 4 },
    })
    expect(profile.metrics.decodeTokPerS?.values).toHaveLength(3)
    // Each launch is its own process with the launch seed moved on by one: three draws, not one.
    const seeds = result.records.map((r) => {
      const argv = r.manifest?.engine.argv ?? []
      return (JSON.parse(argv[argv.indexOf('--options') + 1] ?? '{}') as { launchSeed?: number }).launchSeed
    })
    expect(seeds).toEqual([1, 2, 3])
    // Declared as a cell of the file, so the evidence shows the calibration's launches; not required for promotion.
    expect(declared).toMatchObject({ kind: 'cell', required: false })
  }, 120_000)

  test.each([
    [{ launches: 1 }, /calibrate\.launches: an integer from 2 to 100/],
    [{ out: '' }, /calibrate\.out: a file path/],
    [{ requests: 0 }, /calibrate\.requests/],
  ])('%j is refused at declaration, naming the field', (bad, message) => {
    expect(() => calibrate({ engine: sim, ...bad } as CalibrateSpec)).toThrow(message)
  })
})
