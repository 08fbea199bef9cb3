import { describe, expect, test } from 'vitest'
import { createRandom, normalVariate } from '../random.ts'
import { HISTORY_SCHEMA_ID, type HistoryRun, NOISE_PROFILE_SCHEMA_ID, type NoiseProfile, type Testbed } from '../schema/noise.ts'
import {
  chiSquareQuantile,
  historySpread,
  launchSpread,
  MIN_HISTORY_RUNS,
  NOISE_BOUND_CONFIDENCE,
  resolveNoiseFloor,
  testbedMismatch,
} from './noise-floor.ts'

const TESTBED: Testbed = {
  runner: 'h100-ci',
  gpu: { model: 'NVIDIA H100 80GB HBM3', count: 1 },
  driver: '550.54.15',
  engine: { kind: 'vllm', version: '0.11.0' },
  model: 'meta-llama/Llama-3.1-8B-Instruct',
  cell: { concurrency: 8, requests: 64, maxTokens: 256 },
}

function profile(sd: number, testbed = TESTBED): NoiseProfile {
  const values = [100 * Math.exp(sd), 100, 100 * Math.exp(-sd), 100 * Math.exp(sd / 2), 100 * Math.exp(-sd / 2)]
  return {
    schema: NOISE_PROFILE_SCHEMA_ID,
    servegateVersion: '0.1.0',
    measuredAt: '2026-12-01T10:00:00.000Z',
    testbed,
    launches: 5,
    metrics: { decodeTokPerS: launchSpread(values) },
  }
}

/** Runs of main whose figure is 100 × a launch effect of sd `sd`, with a step change of `step` (log) halfway. */
function history(n: number, sd: number, step = 0, seed = 7): HistoryRun[] {
  const random = createRandom(seed)
  return Array.from({ length: n }, (_, i) => ({
    schema: HISTORY_SCHEMA_ID,
    commit: `c${i}`,
    branch: 'main',
    at: new Date(Date.UTC(2026, 10, 1 + i)).toISOString(),
    cells: [
      {
        cell: 'decode',
        testbed: TESTBED,
        metrics: { decodeTokPerS: { value: 100 * Math.exp(sd * normalVariate(random) + (i >= n / 2 ? step : 0)), relativeSe: 0.005 } },
      },
    ],
  }))
}

describe('launch spread', () => {
  test('chi-square quantiles are close to the exact ones', () => {
    expect(chiSquareQuantile(0.2, 4)).toBeCloseTo(1.649, 1)
    expect(chiSquareQuantile(0.1, 9)).toBeCloseTo(4.168, 1)
    expect(chiSquareQuantile(0.5, 30)).toBeCloseTo(29.34, 0)
  })

  test('the sd of the launches’ logs, and an upper bound above it', () => {
    const s = launchSpread([60, 62, 58, 61, 59])
    const logs = [60, 62, 58, 61, 59].map(Math.log)
    const mean = logs.reduce((a, b) => a + b) / 5
    expect(s.sd).toBeCloseTo(Math.sqrt(logs.reduce((a, x) => a + (x - mean) ** 2, 0) / 4), 12)
    expect(s.upper / s.sd).toBeCloseTo(Math.sqrt(4 / chiSquareQuantile(1 - NOISE_BOUND_CONFIDENCE, 4)), 12)
    expect(s.upper).toBeGreaterThan(s.sd * 1.4)
    expect(s.confidence).toBe(0.8)
  })

  test('the 80% bound covers the true sd about 80% of the time over 5 launches', () => {
    const random = createRandom(3)
    let covered = 0
    const trials = 4000
    for (let t = 0; t < trials; t++) {
      const s = launchSpread(Array.from({ length: 5 }, () => Math.exp(0.04 * normalVariate(random))))
      if (s.upper >= 0.04) covered++
    }
    expect(covered / trials).toBeGreaterThan(0.77)
    expect(covered / trials).toBeLessThan(0.83)
  })
})

describe('testbeds', () => {
  test('the same testbed matches; another names the first field that differs', () => {
    expect(testbedMismatch(TESTBED, { ...TESTBED })).toBeNull()
    expect(testbedMismatch(TESTBED, { ...TESTBED, gpu: { model: 'NVIDIA A100-SXM4-80GB', count: 1 } })).toBe(
      'GPU: the profile has NVIDIA H100 80GB HBM3 ×1, this run NVIDIA A100-SXM4-80GB ×1',
    )
    expect(testbedMismatch(TESTBED, { ...TESTBED, driver: '560.28.03' })).toMatch(/^driver: the profile has 550.54.15, this run 560.28.03$/)
    expect(testbedMismatch(TESTBED, { ...TESTBED, engine: { kind: 'vllm', version: '0.12.0' } })).toMatch(/^engine version/)
    expect(testbedMismatch(TESTBED, { ...TESTBED, cell: { ...TESTBED.cell, concurrency: 16 } })).toMatch(/^cell shape/)
  })
})

describe('history', () => {
  test('too few runs of main: no figure, and why', () => {
    const h = historySpread(history(MIN_HISTORY_RUNS - 1, 0.04), 'decode', 'decodeTokPerS', TESTBED)
    expect(h).toEqual({ runs: 7, reason: 'the history holds 7 runs of this cell on this testbed; 8 are needed' })
  })

  test('recovers the launch noise of main within its bound, and a real step change does not inflate it', () => {
    for (const seed of [1, 2, 3]) {
      const plain = historySpread(history(40, 0.04, 0, seed), 'decode', 'decodeTokPerS', TESTBED)
      const stepped = historySpread(history(40, 0.04, 0.3, seed), 'decode', 'decodeTokPerS', TESTBED)
      if ('reason' in plain || 'reason' in stepped) throw new Error('expected figures')
      expect(plain.sd).toBeGreaterThan(0.025)
      expect(plain.sd).toBeLessThan(0.055)
      expect(plain.upper).toBeGreaterThan(plain.sd)
      // A 30% step between two commits is a change, not noise: the estimate barely moves.
      expect(Math.abs(stepped.sd - plain.sd)).toBeLessThan(0.01)
    }
  })

  test('runs on another testbed are not counted', () => {
    const runs = history(10, 0.04).map((r) => ({ ...r, cells: r.cells.map((c) => ({ ...c, testbed: { ...TESTBED, runner: 'other' } })) }))
    expect(historySpread(runs, 'decode', 'decodeTokPerS', TESTBED)).toMatchObject({ runs: 0 })
  })
})

describe('resolveNoiseFloor', () => {
  test('nothing measured: assumed, with the command that measures it', () => {
    const f = resolveNoiseFloor({ metric: 'decodeTokPerS', testbed: TESTBED })
    expect(f).toMatchObject({ value: 0.02, source: 'assumed', measured: null, history: null, notUsed: [] })
    expect(f.text).toBe('launch noise assumed at 2% a launch, not measured on this runner; run `servegate calibrate` to measure it')
  })

  test('a matching profile: measured, its upper bound used when above the floor', () => {
    const p = profile(0.04)
    const f = resolveNoiseFloor({ metric: 'decodeTokPerS', testbed: TESTBED, profile: { path: 'noise.json', profile: p } })
    const spread = p.metrics.decodeTokPerS as { sd: number; upper: number }
    expect(f.source).toBe('measured')
    expect(f.value).toBe(spread.upper)
    expect(f.measured).toEqual({
      path: 'noise.json',
      measuredAt: '2026-12-01T10:00:00.000Z',
      launches: 5,
      sd: spread.sd,
      upper: spread.upper,
    })
    expect(f.text).toMatch(/^launch noise [\d.]+% a launch, measured by servegate calibrate on 2026-12-01 with 5 launches/)
  })

  test('a quiet runner keeps the floor, and says so', () => {
    const f = resolveNoiseFloor({ metric: 'decodeTokPerS', testbed: TESTBED, profile: { path: 'noise.json', profile: profile(0.002) } })
    expect(f.value).toBe(0.02)
    expect(f.source).toBe('measured')
    expect(f.text).toMatch(/the 2% floor is larger and is used$/)
  })

  test('a profile of another testbed is not used, and the reason is kept', () => {
    const other = profile(0.04, { ...TESTBED, driver: '560.28.03' })
    const f = resolveNoiseFloor({ metric: 'decodeTokPerS', testbed: TESTBED, profile: { path: 'noise.json', profile: other } })
    expect(f.source).toBe('assumed')
    expect(f.notUsed).toEqual(['profile noise.json is for another testbed (driver: the profile has 560.28.03, this run 550.54.15)'])
    expect(f.text).toMatch(/^launch noise assumed at 2% a launch, not measured on this runner \(profile noise.json is for another testbed/)
  })

  test('the larger of profile and history is used; a spec option overrides both', () => {
    const spread = historySpread(history(30, 0.08), 'decode', 'decodeTokPerS', TESTBED)
    const both = resolveNoiseFloor({
      metric: 'decodeTokPerS',
      testbed: TESTBED,
      profile: { path: 'noise.json', profile: profile(0.01) },
      history: { path: 'history.jsonl', spread },
    })
    expect(both.source).toBe('history')
    expect(both.text).toMatch(/learned from 30 runs of main/)
    const given = resolveNoiseFloor({ metric: 'decodeTokPerS', testbed: TESTBED, option: 0.03, history: { path: 'history.jsonl', spread } })
    expect(given).toMatchObject({ value: 0.03, source: 'option' })
  })
})
