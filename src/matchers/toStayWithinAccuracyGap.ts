import type { MatcherState } from 'vitest'
import { accuracyGapGate } from '../gates/accuracy-gap.ts'
import { AccuracyGapOptions } from '../gates/gate-options.ts'
import { gateResult } from './decision.ts'
import { gateMatcherOptions } from './gate-matcher-options.ts'
import { asPair } from './subject.ts'

/** Options of `toStayWithinAccuracyGap`: the accuracy drop that fails, and the output-length gap that warns. */
export type AccuracyGapMatcherOptions = Omit<AccuracyGapOptions, 'gate'>

/**
 * A quality gate on the same questions: fails on a confident accuracy drop of `points` or more
 * (default 2); a mean output-length gap of `outputLengthPct` (default 10%) is a warning.
 */
export function toStayWithinAccuracyGap(this: MatcherState, received: unknown, options: AccuracyGapMatcherOptions = {}) {
  const p = asPair('toStayWithinAccuracyGap', received)
  const o = gateMatcherOptions(
    'toStayWithinAccuracyGap',
    AccuracyGapOptions,
    options,
    'options must be an object, e.g. { points: 2, outputLengthPct: 10 }',
  )
  return gateResult(this, 'toStayWithinAccuracyGap', p, () => accuracyGapGate({ baseline: p.baseline, candidate: p.candidate }, o), [
    'pass',
    'inconclusive',
  ])
}
