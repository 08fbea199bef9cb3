/**
 * Synthetic matched pairs for gate calibration: per-request noise as a serving engine shows it,
 * built as typed run-record requests so the real gates judge them.
 */
import type { GateRecord } from '../../src/gates/arms.ts'
import { createRandom, gammaVariate, mixSeed, normalVariate } from '../../src/random.ts'
import type { RequestRecord } from '../../src/schema/run.ts'
import { NO_REQUEST_CHECKS } from '../../src/import/common.ts'

/** The noise model; every figure is a log-scale standard deviation unless it says otherwise. */
export interface NoiseModel {
  /** Prompt tokens of every request (a fixed-context cell). */
  promptTokens: number
  /** Median completion tokens; per-prompt spread `completionSd`, the same on both arms (controlled output). */
  completionTokens: number
  completionSd: number
  /** Median decode tok/s; per-prompt difficulty shared by both arms, per-arm per-request noise. */
  decodeTokPerS: number
  decodePromptSd: number
  decodeRequestSd: number
  /** Median prefill tok/s; per-prompt spread shared by both arms, per-arm per-request noise. */
  prefillTokPerS: number
  prefillPromptSd: number
  prefillRequestSd: number
  /** Scheduler stalls added to time to first output: probability per request, Pareto(shape, scale ms). */
  stallProbability: number
  stallShape: number
  stallScaleMs: number
  /** Relative sd of a launch's speed, drawn independently per arm per launch. */
  launchSd: number
  /** Closed-loop concurrency of a cell: its wall clock is its requests' service time over the slots. */
  concurrency: number
  /**
   * Degrees of freedom of the per-request noise (decode and prefill): null for normal noise, or a
   * Student t with this many df (> 2) scaled to the same sd, whose tails are heavier.
   */
  requestNoiseDf: number | null
  /**
   * KV-cache preemption: the share of requests, drawn per arm independently, whose decode is
   * preempted and recomputed, and the speed multiplier of their decode (0.3: 30% of the speed).
   */
  preemptionProbability: number
  preemptionSpeed: number
  /**
   * Drift within a cell: each launch's speed moves linearly across its requests in request order
   * by up to this much end to end (relative, drawn uniformly in ±drift per launch), centred on the
   * launch's speed so the cell's mean is left to `launchSd`.
   */
  drift: number
}

/** The model the calibration figures rest on (see docs/gates.md for why these values). */
export const DEFAULT_NOISE: NoiseModel = {
  promptTokens: 4096,
  completionTokens: 256,
  completionSd: 0.4,
  decodeTokPerS: 60,
  decodePromptSd: 0.15,
  decodeRequestSd: 0.08,
  prefillTokPerS: 8000,
  prefillPromptSd: 0.1,
  prefillRequestSd: 0.1,
  stallProbability: 0.05,
  stallShape: 1.5,
  stallScaleMs: 100,
  launchSd: 0.02,
  concurrency: 8,
  requestNoiseDf: null,
  preemptionProbability: 0,
  preemptionSpeed: 1,
  drift: 0,
}

/** A named noise model of the estimator study: the clean model and the ways real runners break it. */
export interface NamedNoiseModel {
  name: string
  /** What the model adds to the clean one, for the tables. */
  description: string
  model: NoiseModel
}

/**
 * The noise models every win estimator is judged under (`npm run bench:gate`, docs/gates.md):
 * the clean model, a preemption tail (5% of requests per arm decode at 0.3× speed, as KV-cache
 * preemption and recompute do), heavy tails (per-request noise t with 3 df at the same sd) and
 * drift within a cell (±3% end to end per launch).
 */
export function noiseModels(base: NoiseModel): NamedNoiseModel[] {
  return [
    { name: 'clean', description: 'normal per-request noise', model: base },
    {
      name: 'preemption',
      description: '5% of requests per arm decode at 0.3×',
      model: { ...base, preemptionProbability: 0.05, preemptionSpeed: 0.3 },
    },
    { name: 'heavy tails', description: 'per-request noise t(3), same sd', model: { ...base, requestNoiseDf: 3 } },
    { name: 'drift', description: 'speed drifts up to ±3% across a cell', model: { ...base, drift: 0.03 } },
  ]
}

/** A per-request noise variate with unit sd: standard normal, or Student t with `df` df scaled to unit sd. */
export function requestNoise(df: number | null, random: () => number): number {
  const z = normalVariate(random)
  if (df === null) return z
  // t = z / √(χ²_df / df) has variance df / (df − 2); χ²_df is Gamma(df/2, scale 2).
  const t = z / Math.sqrt((2 * gammaVariate(random, df / 2)) / df)
  return t * Math.sqrt((df - 2) / df)
}

/**
 * The candidate's true effect, as speed multipliers: `decode` scales decode tok/s, `firstOutput`
 * the speed of everything up to the first output (so effective prefill tok/s scales by it and
 * TTFT by its inverse, stalls included).
 */
export interface TrueEffect {
  decode: number
  firstOutput: number
}

const NO_EFFECT: TrueEffect = { decode: 1, firstOutput: 1 }

interface Prompt {
  completionTokens: number
  decodeTokPerS: number
  prefillTokPerS: number
}

function prompts(model: NoiseModel, count: number, random: () => number): Prompt[] {
  return Array.from({ length: count }, () => ({
    completionTokens: Math.max(
      16,
      Math.min(2048, Math.round(model.completionTokens * Math.exp(model.completionSd * normalVariate(random)))),
    ),
    decodeTokPerS: model.decodeTokPerS * Math.exp(model.decodePromptSd * normalVariate(random)),
    prefillTokPerS: model.prefillTokPerS * Math.exp(model.prefillPromptSd * normalVariate(random)),
  }))
}

/** One launch of one arm: the prompts' requests under this launch's speed and the arm's effect. */
function launch(model: NoiseModel, shared: readonly Prompt[], effect: TrueEffect, random: () => number): GateRecord {
  const launchSpeed = Math.exp(model.launchSd * normalVariate(random))
  // Extra draws only where a model asks for them, so the clean model's stream is unchanged.
  const drift = model.drift > 0 ? model.drift * (2 * random() - 1) : 0
  const last = Math.max(1, shared.length - 1)
  const requests: RequestRecord[] = shared.map((prompt, index) => {
    const speed = drift === 0 ? launchSpeed : launchSpeed * Math.exp(drift * (index / last - 0.5))
    const preempted = model.preemptionProbability > 0 && random() < model.preemptionProbability
    const decode =
      prompt.decodeTokPerS *
      speed *
      effect.decode *
      Math.exp(model.decodeRequestSd * requestNoise(model.requestNoiseDf, random)) *
      (preempted ? model.preemptionSpeed : 1)
    const prefillMs =
      (1000 * model.promptTokens) / (prompt.prefillTokPerS * Math.exp(model.prefillRequestSd * requestNoise(model.requestNoiseDf, random)))
    const stallMs = random() < model.stallProbability ? model.stallScaleMs * (1 - random()) ** (-1 / model.stallShape) : 0
    const firstOutputMs = (prefillMs + stallMs) / (speed * effect.firstOutput)
    const tpotMs = 1000 / decode
    const generationMs = (prompt.completionTokens - 1) * tpotMs
    const e2eMs = firstOutputMs + generationMs
    return {
      status: 'ok',
      index,
      queueDelayMs: 0,
      sendLagMs: 0,
      startOffsetMs: null,
      ttftMs: firstOutputMs,
      timeToFirstOutputMs: firstOutputMs,
      e2eMs,
      generationMs,
      tpotMs,
      decodeTokPerS: decode,
      effectivePrefillTokPerS: model.promptTokens / (firstOutputMs / 1000),
      promptTokens: model.promptTokens,
      completionTokens: prompt.completionTokens,
      completionTokenSource: 'usage',
      reasoningChunks: 0,
      contentChunks: prompt.completionTokens,
      itlMs: null,
      finishReason: 'length',
      ...NO_REQUEST_CHECKS,
      // The engine times its prefill compute alone: the per-request noise, not the stalls.
      enginePrefillTokPerS: model.promptTokens / (prefillMs / (speed * effect.firstOutput) / 1000),
    }
  })
  return withMetrics(requests, model.concurrency)
}

/**
 * A launch with its service-level figures: a closed loop keeps `concurrency` slots busy, so its
 * wall clock is the requests' total service time over the slots.
 */
function withMetrics(requests: RequestRecord[], concurrency: number): GateRecord {
  let busyMs = 0
  let tokens = 0
  for (const r of requests) {
    busyMs += r.e2eMs ?? 0
    tokens += r.completionTokens ?? 0
  }
  const wallClockMs = busyMs / concurrency
  const seconds = wallClockMs / 1000
  return {
    requests,
    metrics: {
      wallClockMs,
      outputThroughputTokPerS: seconds > 0 ? tokens / seconds : null,
      requestRateReqPerS: seconds > 0 ? requests.length / seconds : null,
    },
  }
}

/** A simulated matched pair: the same prompts on both arms, `launches` launches per arm. */
export interface SimulatedPair {
  baseline: GateRecord[]
  candidate: GateRecord[]
}

/**
 * Simulates one matched pair. Prompts (difficulty, output length) are shared by both arms and by
 * every launch; each launch draws its own speed; each request its own noise and stall.
 */
export function simulatePair(
  model: NoiseModel,
  options: { requests: number; launches: number; effect: TrueEffect; seed: number },
): SimulatedPair {
  const random = createRandom(mixSeed(options.seed, 0x5eed))
  const shared = prompts(model, options.requests, random)
  const baseline: GateRecord[] = []
  const candidate: GateRecord[] = []
  for (let i = 0; i < options.launches; i++) {
    baseline.push(launch(model, shared, NO_EFFECT, random))
    candidate.push(launch(model, shared, options.effect, random))
  }
  return { baseline, candidate }
}

/** The first `n` requests of a launch (a shorter cell of the same prompts, its figures recomputed). */
export function firstRequests(record: GateRecord, n: number, concurrency: number): GateRecord {
  return withMetrics(record.requests.slice(0, n), concurrency)
}
