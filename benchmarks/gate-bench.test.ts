import { execFile } from 'node:child_process'
import { mkdtemp, readFile, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { describe, expect, test } from 'vitest'
import { RequestRecord } from '../src/schema/run.ts'
import { calibrationPlan, EFFECTS, HOLD_GATES, rate, runScenario, type Scenario, SCENARIOS, WIN_GATES } from './gate/calibrate.ts'
import { checkTargets, renderMarkdown, renderText } from './gate/report.ts'
import { DEFAULT_NOISE, simulatePair } from './gate/simulate.ts'

const QUICK = calibrationPlan(true)

function expectRate(r: { rate: number; cpLow: number; cpHigh: number; trials: number }): void {
  expect(r.rate).toBeGreaterThanOrEqual(0)
  expect(r.rate).toBeLessThanOrEqual(1)
  expect(r.cpLow).toBeLessThanOrEqual(r.rate)
  expect(r.cpHigh).toBeGreaterThanOrEqual(r.rate)
  expect(r.trials).toBeGreaterThan(0)
}

describe('gate bench (smoke, quick mode, structural asserts only)', () => {
  test('simulated requests are valid run-record requests; both arms get the same prompts', () => {
    const pair = simulatePair(DEFAULT_NOISE, { requests: 16, launches: 2, effect: { decode: 1.1, firstOutput: 1 }, seed: 1 })
    expect(pair.baseline).toHaveLength(2)
    expect(pair.candidate).toHaveLength(2)
    for (const launch of [...pair.baseline, ...pair.candidate]) {
      expect(launch.requests).toHaveLength(16)
      for (const r of launch.requests) expect(RequestRecord.parse(r)).toEqual(r)
    }
    const tokens = (i: number) => pair.baseline[0]?.requests.map((r) => r.completionTokens)[i]
    pair.candidate.forEach((launch) => launch.requests.forEach((r, i) => expect(r.completionTokens).toBe(tokens(i))))
    // Every launch has the cell's service figures, and the engine's own prefill rate is free of stalls.
    for (const launch of pair.baseline) {
      expect(launch.metrics?.outputThroughputTokPerS).toBeGreaterThan(0)
      for (const r of launch.requests)
        expect(r.enginePrefillTokPerS).toBeGreaterThanOrEqual((r as { effectivePrefillTokPerS: number }).effectivePrefillTokPerS)
    }
  })

  test('a single-launch scenario yields A/A, power and latency figures for every gate', () => {
    const scenario = SCENARIOS[0] as Scenario
    const result = runScenario(DEFAULT_NOISE, scenario, QUICK, 1)
    expect(result.win.map((w) => w.gate)).toEqual(WIN_GATES)
    for (const w of result.win) {
      const sequential = w.gate === 'toWinThroughput' ? [] : [w.aa.sequential?.pass, w.aa.sequential?.passBy64]
      for (const r of [w.aa.fixed64?.pass, w.aa.fixedAll.pass, ...sequential]) expectRate(r as never)
      expect(w.power.map((p) => p.effect)).toEqual([...EFFECTS])
      // Service figures are one number per cell: no sequential looks.
      for (const p of w.power) {
        if (w.gate === 'toWinThroughput') expect(p.figures.sequential).toBeNull()
        else expect(p.figures.sequential?.meanRequests).toBeGreaterThanOrEqual(16)
        for (const f of [p.figures.fixed64, p.figures.fixedAll]) expectRate(f?.oracle as never)
      }
    }
    expect(result.hold.map((h) => h.gate)).toEqual(HOLD_GATES.map((h) => h.name))
    for (const h of result.hold) for (const f of [h.aa, h.edge, ...h.power.map((p) => p.figures)]) expectRate(f.fail)
    expect(renderText(DEFAULT_NOISE, [result], 1)).toMatch(/toWinDecode[\s\S]*ttft p95/)
    expect(renderMarkdown([result])).toMatch(/\| toWinThroughput \|/)
    expect(checkTargets([result]).length).toBeGreaterThan(0)
  })

  test('a repeated-launch scenario is judged at the launch level (no fixed-64 or sequential designs)', () => {
    const scenario = SCENARIOS.find((s) => s.launches > 1) as Scenario
    const result = runScenario(DEFAULT_NOISE, { ...scenario, hold: false }, QUICK, 2)
    for (const w of result.win) {
      expect(w.aa.fixed64).toBeNull()
      expect(w.aa.sequential).toBeNull()
      expectRate(w.aa.fixedAll.pass)
    }
  })

  test('rate carries a Clopper–Pearson interval', () => {
    expect(rate(0, 2000).cpHigh).toBeCloseTo(0.001843, 5)
    expect(rate(3, 10)).toMatchObject({ events: 3, trials: 10, rate: 0.3 })
  })

  test('`bench:gate --quick --json` runs every scenario on worker threads and writes the figures', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'servegate-gate-bench-'))
    try {
      const file = join(dir, 'gate.json')
      const { stdout } = await promisify(execFile)(
        process.execPath,
        [join(import.meta.dirname, 'gate-bench.ts'), '--quick', '--json', file],
        { timeout: 60_000 },
      )
      expect(stdout).toMatch(/targets:/)
      const json = JSON.parse(await readFile(file, 'utf8')) as { results: unknown[]; plan: { quick: boolean }; targets: unknown[] }
      expect(json.plan.quick).toBe(true)
      expect(json.results).toHaveLength(SCENARIOS.length)
      expect(json.targets.length).toBeGreaterThan(0)
    } finally {
      await rm(dir, { recursive: true, force: true })
    }
  })
})
