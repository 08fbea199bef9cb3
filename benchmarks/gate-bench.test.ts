import { execFile } from 'node:child_process'
import { mkdtemp, readFile, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { describe, expect, test } from 'vitest'
import { RequestRecord } from '../src/schema/run.ts'
import { calibrationPlan, EFFECTS, HOLD_GATES, rate, runScenario, type Scenario, SCENARIOS, WIN_GATES } from './gate/calibrate.ts'
import {
  chooseEstimators,
  estimatorStudyCells,
  estimatorStudyPlan,
  type EstimatorStudyResult,
  runEstimatorCell,
  STUDY_REQUESTS,
} from './gate/estimators.ts'
import { checkTargets, renderEstimatorMarkdown, renderEstimatorText, renderMarkdown, renderText } from './gate/report.ts'
import { DEFAULT_NOISE, type NoiseModel, noiseModels, requestNoise, simulatePair } from './gate/simulate.ts'
import { createRandom } from '../src/random.ts'

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
        { timeout: 120_000 },
      )
      expect(stdout).toMatch(/targets:/)
      const json = JSON.parse(await readFile(file, 'utf8')) as {
        results: unknown[]
        plan: { quick: boolean }
        targets: unknown[]
        estimators: unknown[]
      }
      expect(json.plan.quick).toBe(true)
      expect(json.results).toHaveLength(SCENARIOS.length)
      expect(json.targets.length).toBeGreaterThan(0)
      expect(json.estimators).toHaveLength(estimatorStudyCells().length)
      expect(stdout).toMatch(/toWinDecode: chosen /)
    } finally {
      await rm(dir, { recursive: true, force: true })
    }
  }, 120_000)
})

/** The clean model with every source of spread but the one under test switched off. */
const QUIET: NoiseModel = { ...DEFAULT_NOISE, decodePromptSd: 0, decodeRequestSd: 0, launchSd: 0, completionSd: 0 }
const model = (name: string) => noiseModels(DEFAULT_NOISE).find((m) => m.name === name)?.model as NoiseModel
const decodeRates = (m: NoiseModel, requests: number, seed = 7) => {
  const pair = simulatePair(m, { requests, launches: 1, effect: { decode: 1, firstOutput: 1 }, seed })
  const rates = (launch: (typeof pair.baseline)[number] | undefined) => launch?.requests.map((r) => r.decodeTokPerS as number) ?? []
  return { baseline: rates(pair.baseline[0]), candidate: rates(pair.candidate[0]) }
}

describe('noise models of the estimator study', () => {
  test('the models are the clean one and its three departures, each changing only its own field', () => {
    const models = noiseModels(DEFAULT_NOISE)
    expect(models.map((m) => m.name)).toEqual(['clean', 'preemption', 'heavy tails', 'drift'])
    expect(model('clean')).toEqual(DEFAULT_NOISE)
    expect(model('preemption')).toEqual({ ...DEFAULT_NOISE, preemptionProbability: 0.05, preemptionSpeed: 0.3 })
    expect(model('heavy tails')).toEqual({ ...DEFAULT_NOISE, requestNoiseDf: 3 })
    expect(model('drift')).toEqual({ ...DEFAULT_NOISE, drift: 0.03 })
  })

  test('preemption slows 5% of requests on each arm to 0.3× decode speed, independently per arm', () => {
    const n = 4000
    const { baseline, candidate } = decodeRates({ ...QUIET, preemptionProbability: 0.05, preemptionSpeed: 0.3 }, n)
    const slow = (rates: number[]) => rates.map((r) => Math.abs(r - 0.3 * QUIET.decodeTokPerS) < 1e-9)
    const [b, c] = [slow(baseline), slow(candidate)]
    for (const arm of [b, c]) expect(arm.filter(Boolean).length / n).toBeGreaterThan(0.04)
    for (const arm of [b, c]) expect(arm.filter(Boolean).length / n).toBeLessThan(0.06)
    // Every other request runs at full speed.
    for (const rates of [baseline, candidate])
      for (const r of rates) expect([QUIET.decodeTokPerS, 0.3 * QUIET.decodeTokPerS].some((v) => Math.abs(r - v) < 1e-9)).toBe(true)
    // Independent arms: both slowed on about 0.25% of prompts, not on the same 5%.
    const both = b.filter((x, i) => x && c[i]).length / n
    expect(both).toBeLessThan(0.01)
    // The clean model never preempts.
    expect(decodeRates(QUIET, 1000).baseline.every((r) => Math.abs(r - QUIET.decodeTokPerS) < 1e-9)).toBe(true)
  })

  test('heavy tails keep the sd of the per-request noise and put more of it in the tails', () => {
    const random = createRandom(3)
    const draws = (df: number | null) => Array.from({ length: 40_000 }, () => requestNoise(df, random))
    const moments = (x: number[]) => {
      const mean = x.reduce((s, v) => s + v, 0) / x.length
      const m2 = x.reduce((s, v) => s + (v - mean) ** 2, 0) / x.length
      const beyond3 = x.filter((v) => Math.abs(v - mean) > 3 * Math.sqrt(m2)).length / x.length
      return { sd: Math.sqrt(m2), beyond3 }
    }
    const [normal, t3] = [moments(draws(null)), moments(draws(3))]
    expect(normal.sd).toBeCloseTo(1, 1)
    expect(t3.sd).toBeGreaterThan(0.85)
    expect(t3.sd).toBeLessThan(1.15)
    // Beyond 3 sd: 0.27% for a normal, about 1.4% for t(3) scaled to unit sd.
    expect(normal.beyond3).toBeLessThan(0.005)
    expect(t3.beyond3).toBeGreaterThan(0.008)
    const logs = decodeRates({ ...QUIET, decodeRequestSd: 0.1, requestNoiseDf: 3 }, 4000).baseline.map(Math.log)
    expect(moments(logs).sd).toBeGreaterThan(0.085)
    expect(moments(logs).sd).toBeLessThan(0.115)
  })

  test('drift moves each launch speed linearly across its requests, centred on the launch, by at most ±3% end to end', () => {
    const n = 64
    const slopes: number[] = []
    for (let seed = 1; seed <= 20; seed++) {
      for (const rates of Object.values(decodeRates({ ...QUIET, drift: 0.03 }, n, seed))) {
        const logs = rates.map((r) => Math.log(r / QUIET.decodeTokPerS))
        const step = (logs[1] as number) - (logs[0] as number)
        logs.forEach((v, i) => expect(v).toBeCloseTo((logs[0] as number) + i * step, 12))
        expect(logs.reduce((s, v) => s + v, 0) / n).toBeCloseTo(0, 12)
        const endToEnd = step * (n - 1)
        expect(Math.abs(endToEnd)).toBeLessThanOrEqual(0.03)
        slopes.push(endToEnd)
      }
    }
    // Drawn per launch: both directions occur, and the arms of one pair drift differently.
    expect(Math.min(...slopes)).toBeLessThan(-0.01)
    expect(Math.max(...slopes)).toBeGreaterThan(0.01)
    expect(slopes[0]).not.toBeCloseTo(slopes[1] as number, 6)
  })
})

describe('estimator study', () => {
  test('a cell judges every gate with both estimators, and the hold gate, in the audit design', () => {
    const plan = estimatorStudyPlan(true)
    const cell = estimatorStudyCells().find((c) => c.model === 'preemption') as ReturnType<typeof estimatorStudyCells>[number]
    const result = runEstimatorCell(cell, plan, 5)
    expect(result.gates.map((g) => g.gate)).toEqual(['toWinDecode', 'toWinPrefill', 'toWinThroughput'])
    for (const g of result.gates) {
      expect(g.estimators.map((e) => e.estimator)).toEqual(['geometric-mean', 'hodges-lehmann'])
      for (const e of g.estimators) {
        expect(e.aa.trials).toBe(plan.levelTrials)
        expect(e.boundary.trials).toBe(plan.levelTrials)
        expect(e.power.trials).toBe(plan.powerTrials)
      }
    }
    expect(result.holdAa.fail.trials).toBe(plan.levelTrials)
    expect(STUDY_REQUESTS).toBe(64)
    // Every base is crossed with every model.
    expect(estimatorStudyCells().map((c) => c.model)).toEqual([
      'clean',
      'preemption',
      'heavy tails',
      'drift',
      'clean',
      'preemption',
      'heavy tails',
      'drift',
    ])
  })

  test('the choice is the best worst-case power among estimators whose level holds in every cell', () => {
    const figures = (aa: number, power: number) => ({ aa: rate(aa, 4000), boundary: rate(aa, 4000), power: rate(power, 1000) })
    const cell = (model: string, gm: [number, number], hl: [number, number]): EstimatorStudyResult => ({
      base: 'b',
      model,
      description: '',
      gates: (['toWinDecode', 'toWinPrefill', 'toWinThroughput'] as const).map((gate) => ({
        gate,
        metric: 'decodeTokPerS',
        estimators: [
          { estimator: 'geometric-mean', ...figures(...gm) },
          { estimator: 'hodges-lehmann', ...figures(...hl) },
        ],
      })),
      holdAa: { gate: 'ttft p95 ≤ +10%', fail: rate(0, 4000) },
    })
    // The mean is better on clean noise, the pseudo-median in the worst case: the worst case decides.
    const robust = chooseEstimators([cell('clean', [30, 700], [30, 690]), cell('preemption', [30, 300], [30, 560])])
    expect(robust.map((c) => c.chosen)).toEqual(['hodges-lehmann', 'hodges-lehmann', 'hodges-lehmann'])
    expect(robust[0]?.worst.find((w) => w.estimator === 'geometric-mean')).toMatchObject({ power: 0.3, powerModel: 'preemption, b' })
    // A level that is not consistent with 1% rules an estimator out, however powerful.
    const leaky = chooseEstimators([cell('clean', [30, 700], [80, 900]), cell('preemption', [30, 600], [30, 900])])
    expect(leaky[0]?.chosen).toBe('geometric-mean')
    expect(leaky[0]?.worst.find((w) => w.estimator === 'hodges-lehmann')?.levelHolds).toBe(false)
    const none = chooseEstimators([cell('clean', [80, 700], [80, 900])])
    expect(none[0]?.chosen).toBeNull()
    expect(renderEstimatorMarkdown([cell('clean', [30, 700], [30, 690])], robust)).toMatch(
      /\| toWinDecode \| hodges-lehmann \| .* \| yes \|/,
    )
    expect(renderEstimatorText([cell('clean', [30, 700], [30, 690])], robust, { toWinDecode: 'geometric-mean' })).toMatch(
      /toWinDecode: chosen hodges-lehmann; default geometric-mean — DIFFERS/,
    )
  })
})
