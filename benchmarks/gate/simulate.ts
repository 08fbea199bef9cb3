/**
 * Synthetic matched pairs for gate calibration: per-request noise as a serving engine shows it,
 * built as typed run-record requests so the real gates judge them.
 */
import type { GateRecord } from '../../src/gates/arms.ts'
import { createRandom, mixSeed, normalVariate } from '../../src/random.ts'
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
  const speed = Math.exp(model.launchSd * normalVariate(random))
  const requests: RequestRecord[] = shared.map((prompt, index) => {
    const decode = prompt.decodeTokPerS * speed * effect.decode * Math.exp(model.decodeRequestSd * normalVariate(random))
    const prefillMs = (1000 * model.promptTokens) / (prompt.prefillTokPerS * Math.exp(model.prefillRequestSd * normalVariate(random)))
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
