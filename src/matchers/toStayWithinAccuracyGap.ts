import type { MatcherState } from 'vitest'
import { type AccuracyGapOptions, accuracyGapGate } from '../gates/index.ts'
import { gateResult } from './decision.ts'
import { asPair } from './subject.ts'

/**
 * A quality gate on the same questions: fails on a confident accuracy drop of `points` or more
 * (default 2); a mean output-length gap of `outputLengthPct` (default 10%) is a warning.
 */
export function toStayWithinAccuracyGap(this: MatcherState, received: unknown, options: AccuracyGapOptions = {}) {
  const p = asPair('toStayWithinAccuracyGap', received)
  if (options === null || typeof options !== 'object')
    throw new TypeError('toStayWithinAccuracyGap: options must be an object, e.g. { points: 2, outputLengthPct: 10 }')
  return gateResult(this, 'toStayWithinAccuracyGap', p, () => accuracyGapGate({ baseline: p.baseline, candidate: p.candidate }, options), [
    'pass',
    'inconclusive',
  ])
}
