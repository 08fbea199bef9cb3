import type { MatcherState } from 'vitest'
import { HoldLatencyGateOptions } from '../gates/gate-options.ts'
import { holdLatencyGate, metricName } from '../gates/hold-latency.ts'
import { withNoiseFloor } from '../gates/noise-floor.ts'
import { gateResult } from './decision.ts'
import { gateMatcherOptions, type InconclusiveOption } from './gate-matcher-options.ts'
import { againstStoredBaseline } from './stored-baseline-pair.ts'
import { noiseFloorOf } from './noise-floor.ts'
import { asPair } from './subject.ts'

/** Options of `toHoldLatency`: the latency metric and percentile, and the tolerance or bound. */
export type HoldLatencyOptions = Omit<HoldLatencyGateOptions, 'gate'> & InconclusiveOption

const USAGE = "pass { metric: 'ttft' | 'tpot' | 'e2e' | 'itl' | 'timeToFirstOutput', percentile, notWorseThanPct | atMostMs }"

/**
 * A non-regression gate on a latency percentile: fails only on a confident regression beyond
 * `notWorseThanPct` (or above `atMostMs`); an inconclusive result passes with a warning.
 */
export function toHoldLatency(this: MatcherState, received: unknown, options: HoldLatencyOptions) {
  const p = asPair('toHoldLatency', received)
  const o = gateMatcherOptions('toHoldLatency', HoldLatencyGateOptions, options, USAGE)
  const floored = noiseFloorOf(p, options, o, metricName(o))
  const decide = () => withNoiseFloor(holdLatencyGate({ baseline: p.baseline, candidate: p.candidate }, floored.options), floored.floor)
  return gateResult(this, 'toHoldLatency', p, againstStoredBaseline('toHoldLatency', p, decide, floored.options), floored.options)
}
