import type { MatcherState } from 'vitest'
import { SustainGateOptions } from '../gates/gate-options.ts'
import { sustainGate } from '../gates/sustain-gate.ts'
import { decisionResult } from './decision.ts'
import { gateMatcherOptions } from './gate-matcher-options.ts'
import { asCapacity } from './subject.ts'

/** Options of `toSustainMoreThan`: how much more capacity the candidate must show. */
export type SustainMoreThanOptions = Omit<SustainGateOptions, 'gate'>

/**
 * A capacity claim: the received search (the candidate's) sustains more than (1 + `by`) × the
 * baseline search's capacity. Decided when the two brackets do not overlap (after the margin);
 * overlapping brackets are inconclusive, which fails. Both searches must use the same axis, SLO
 * and percentile.
 */
export function toSustainMoreThan(this: MatcherState, received: unknown, baseline: unknown, options: SustainMoreThanOptions = {}) {
  const candidate = asCapacity('toSustainMoreThan', received)
  const base = asCapacity('toSustainMoreThan', baseline, 'the baseline')
  const o = gateMatcherOptions('toSustainMoreThan', SustainGateOptions, options, 'options must be an object, e.g. { by: 0.1 }')
  return decisionResult(this, 'toSustainMoreThan', sustainGate(candidate, base, o), ['pass'], candidate.id)
}
