/**
 * The estimator study of `npm run bench:gate`: each win gate judged with each estimator under
 * each noise model, in the design an outside audit uses (64 paired requests, one launch per arm,
 * 2% launch noise, the gates' default floor). The figures are the level (A/A false pass at
 * margin 0, and false pass at the boundary, a true effect equal to the margin) and the power at a
 * true +15% win; the default estimator of each gate is the one with the best worst-case power
 * whose level holds in every model.
 */
import type { GateRecord } from '../../src/gates/arms.ts'
import { WinEstimator, type WinGateName, type WinMetric } from '../../src/gates/gate-options.ts'
import { holdLatencyGate } from '../../src/gates/hold-latency.ts'
import { winGate } from '../../src/gates/win.ts'
import { mixSeed } from '../../src/random.ts'
import { consistentWithOnePercent, HOLD_GATES, type Rate, rate } from './calibrate.ts'
import { DEFAULT_NOISE, type NoiseModel, noiseModels, type SimulatedPair, simulatePair, type TrueEffect } from './simulate.ts'

/** Paired requests per arm in every trial of the study (one look, one launch per arm). */
export const STUDY_REQUESTS = 64
/** The margin of the boundary trials, whose true effect equals it. */
export const STUDY_MARGIN = 0.05
/** The true win of the power trials. */
export const STUDY_WIN = 0.15

/** The win claims of the study: each gate on the per-request metric its estimator summarizes. */
const STUDY_GATES: readonly { gate: WinGateName; metric: WinMetric }[] = [
  { gate: 'toWinDecode', metric: 'decodeTokPerS' },
  { gate: 'toWinPrefill', metric: 'effectivePrefillTokPerS' },
  { gate: 'toWinThroughput', metric: 'throughputTokPerS' },
]

/** The latency gate whose A/A level is reported beside the estimators (it has no estimator to choose). */
const HOLD = HOLD_GATES[0]

/**
 * The per-request noise levels the models are built on: the calibration's model, and one with
 * noisier decode (sd 0.23 per request and arm), where a clean +15% decode win passes about as
 * often as in the audit (64%), so its figures can be set beside the audit's.
 */
const STUDY_BASES: readonly { name: string; model: NoiseModel }[] = [
  { name: 'decode sd 0.08', model: DEFAULT_NOISE },
  { name: 'decode sd 0.23', model: { ...DEFAULT_NOISE, decodeRequestSd: 0.23 } },
]

/** Trial counts of the study; `--quick` shrinks them to a smoke run. */
export interface EstimatorStudyPlan {
  quick: boolean
  levelTrials: number
  powerTrials: number
}

export function estimatorStudyPlan(quick: boolean): EstimatorStudyPlan {
  return quick ? { quick, levelTrials: 16, powerTrials: 8 } : { quick, levelTrials: 4000, powerTrials: 1000 }
}

/** One unit of work: one noise model of one base. */
export interface EstimatorStudyCell {
  base: string
  model: string
  description: string
  noise: NoiseModel
}

/** Every cell of the study: each base under each noise model. */
export function estimatorStudyCells(): EstimatorStudyCell[] {
  return STUDY_BASES.flatMap((base) =>
    noiseModels(base.model).map((m) => ({ base: base.name, model: m.name, description: m.description, noise: m.model })),
  )
}

interface EstimatorFigures {
  estimator: WinEstimator
  /** A/A false pass at margin 0. */
  aa: Rate
  /** False pass at margin STUDY_MARGIN with a true effect of STUDY_MARGIN. */
  boundary: Rate
  /** Pass at a true +STUDY_WIN win, margin 0. */
  power: Rate
}

export interface EstimatorStudyResult {
  base: string
  model: string
  description: string
  gates: { gate: WinGateName; metric: WinMetric; estimators: EstimatorFigures[] }[]
  /** A/A false fail of the TTFT p95 hold gate. */
  holdAa: { gate: string; fail: Rate }
}

function effectOf(gate: WinGateName, delta: number): TrueEffect {
  if (gate === 'toWinDecode') return { decode: 1 + delta, firstOutput: 1 }
  if (gate === 'toWinPrefill') return { decode: 1, firstOutput: 1 + delta }
  return { decode: 1 + delta, firstOutput: 1 + delta }
}

const arms = (pair: SimulatedPair) => ({ baseline: pair.baseline[0] as GateRecord, candidate: pair.candidate[0] as GateRecord })

/**
 * Runs one cell: A/A pairs judged by every gate and estimator (and the hold gate), then per
 * gate the boundary and power pairs, each judged by both estimators. Deterministic: trial t of a
 * block uses seed mixSeed(block, t).
 */
export function runEstimatorCell(cell: EstimatorStudyCell, plan: EstimatorStudyPlan, seed: number): EstimatorStudyResult {
  const simulate = (effect: TrueEffect, block: number, t: number) =>
    arms(simulatePair(cell.noise, { requests: STUDY_REQUESTS, launches: 1, effect, seed: mixSeed(mixSeed(seed, block), t) }))
  const estimators = WinEstimator.options
  const zero = () => estimators.map(() => 0)
  const tally = (into: number[], pair: ReturnType<typeof arms>, g: (typeof STUDY_GATES)[number], margin: number) =>
    estimators.forEach((estimator, e) => {
      if (winGate(pair, { gate: g.gate, metric: g.metric, estimator, margin }).outcome === 'pass') into[e] = (into[e] ?? 0) + 1
    })

  const aa = STUDY_GATES.map(zero)
  let holdFails = 0
  for (let t = 0; t < plan.levelTrials; t++) {
    const pair = simulate({ decode: 1, firstOutput: 1 }, 1, t)
    STUDY_GATES.forEach((g, i) => tally(aa[i] as number[], pair, g, 0))
    if (holdLatencyGate(pair, HOLD.options).outcome === 'fail') holdFails++
  }
  const gates = STUDY_GATES.map((g, i) => {
    const boundary = zero()
    const power = zero()
    for (let t = 0; t < plan.levelTrials; t++) tally(boundary, simulate(effectOf(g.gate, STUDY_MARGIN), 10 + i, t), g, STUDY_MARGIN)
    for (let t = 0; t < plan.powerTrials; t++) tally(power, simulate(effectOf(g.gate, STUDY_WIN), 20 + i, t), g, 0)
    return {
      gate: g.gate,
      metric: g.metric,
      estimators: estimators.map((estimator, e) => ({
        estimator,
        aa: rate((aa[i] as number[])[e] as number, plan.levelTrials),
        boundary: rate(boundary[e] as number, plan.levelTrials),
        power: rate(power[e] as number, plan.powerTrials),
      })),
    }
  })
  return {
    base: cell.base,
    model: cell.model,
    description: cell.description,
    gates,
    holdAa: { gate: HOLD.name, fail: rate(holdFails, plan.levelTrials) },
  }
}

/** An estimator's worst case over every cell of the study, for one gate. */
export interface EstimatorChoice {
  gate: WinGateName
  /** The estimator with the best worst-case power among those whose level holds everywhere; null when none holds. */
  chosen: WinEstimator | null
  worst: { estimator: WinEstimator; level: number; levelHolds: boolean; power: number; powerModel: string }[]
}

/** Chooses each gate's estimator: the best worst-case power over every cell, keeping the level in each. */
export function chooseEstimators(results: readonly EstimatorStudyResult[]): EstimatorChoice[] {
  return STUDY_GATES.map(({ gate }) => {
    const worst = WinEstimator.options.map((estimator) => {
      let level = 0
      let holds = true
      let power = 1
      let powerModel = ''
      for (const r of results) {
        const f = r.gates.find((g) => g.gate === gate)?.estimators.find((x) => x.estimator === estimator)
        if (f === undefined) continue
        level = Math.max(level, f.aa.rate, f.boundary.rate)
        holds &&= consistentWithOnePercent(f.aa) && consistentWithOnePercent(f.boundary)
        if (f.power.rate < power) [power, powerModel] = [f.power.rate, `${r.model}, ${r.base}`]
      }
      return { estimator, level, levelHolds: holds, power, powerModel }
    })
    const eligible = worst.filter((w) => w.levelHolds).sort((a, b) => b.power - a.power)
    return { gate, chosen: eligible[0]?.estimator ?? null, worst }
  })
}
