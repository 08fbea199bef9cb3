import type { MatcherState } from 'vitest'
import { type HoldLatencyOptions, holdLatencyGate } from '../gates/index.ts'
import { gateResult } from './decision.ts'
import { asPair } from './subject.ts'

export type HoldLatencyMatcherOptions = Omit<HoldLatencyOptions, 'gate'>

/**
 * A non-regression gate on a latency percentile: fails only on a confident regression beyond
 * `notWorseThanPct` (or above `atMostMs`); an inconclusive result passes with a warning.
 */
export function toHoldLatency(this: MatcherState, received: unknown, options: HoldLatencyMatcherOptions) {
  const p = asPair('toHoldLatency', received)
  if (options === null || typeof options !== 'object' || typeof (options as { metric?: unknown }).metric !== 'string') {
    throw new TypeError(
      "toHoldLatency: pass { metric: 'ttft' | 'tpot' | 'e2e' | 'itl' | 'timeToFirstOutput', percentile, notWorseThanPct | atMostMs }",
    )
  }
  return gateResult(
    this,
    'toHoldLatency',
    p,
    () => holdLatencyGate({ baseline: p.baseline, candidate: p.candidate }, { ...options, gate: 'toHoldLatency' }),
    ['pass', 'inconclusive'],
  )
}
