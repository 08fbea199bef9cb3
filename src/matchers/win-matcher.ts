import type { MatcherState } from 'vitest'
import { WinGateOptions } from '../gates/gate-options.ts'
import { withNoiseFloor } from '../gates/noise-floor.ts'
import { GATE_METRIC, winGate } from '../gates/win.ts'
import type { WinGateName } from '../schema/gate.ts'
import { gateResult } from './decision.ts'
import { gateMatcherOptions, type InconclusiveOption } from './gate-matcher-options.ts'
import { againstStoredBaseline } from './stored-baseline-pair.ts'
import { noiseFloorOf } from './noise-floor.ts'
import { asPair } from './subject.ts'

/** Options of a win matcher: the margin, confidence, sequential looks, seed, launch noise. */
export type WinMatcherOptions = Omit<WinGateOptions, 'gate' | 'metric'> & InconclusiveOption

/**
 * The matcher of a win gate, named after it: a superiority claim on the gate's metric that passes
 * only when the candidate's win over the paired prompts is proven beyond `margin` at the
 * configured confidence; an inconclusive result fails with how many more paired requests would
 * likely decide it.
 * @example export const toWinDecode = winMatcher('toWinDecode')
 */
export function winMatcher(gate: WinGateName) {
  return function (this: MatcherState, received: unknown, options: WinMatcherOptions = {}) {
    const pair = asPair(gate, received)
    const o = gateMatcherOptions(gate, WinGateOptions, options, 'options must be an object, e.g. { margin: 0.05 }')
    const floored = noiseFloorOf(pair, options, o, o.metric ?? GATE_METRIC[gate])
    const decide = () => withNoiseFloor(winGate({ baseline: pair.baseline, candidate: pair.candidate }, floored.options), floored.floor)
    return gateResult(this, gate, pair, againstStoredBaseline(gate, pair, decide, floored.options), floored.options)
  }
}
