import type { MatcherState } from 'vitest'
import type { CapacitySearch } from '../schema/capacity-record.ts'
import type { JudgedSearch } from '../schema/task-meta.ts'
import { SustainGateOptions } from '../gates/gate-options.ts'
import { sustainGate } from '../gates/sustain-gate.ts'
import { decisionResult } from './decision.ts'
import { gateMatcherOptions, type InconclusiveOption } from './gate-matcher-options.ts'
import { asCapacity } from './subject.ts'

/** What the comparison reads of a search, for the evidence: the search without its records (its probes' cells hold them). */
function judgedSearch(s: CapacitySearch): JudgedSearch {
  const { id, axis, slo, requiredFraction, confidence, bracket, status, probes, warnings } = s
  return { id, axis, slo, requiredFraction, confidence, bracket, status, probes, warnings }
}

/** Options of `toSustainMoreThan`: how much more capacity the candidate must show, and `inconclusive`. */
export type SustainMoreThanOptions = Omit<SustainGateOptions, 'gate'> & InconclusiveOption

/**
 * A capacity claim: the received search (the candidate's) sustains more than (1 + `by`) × the
 * baseline search's capacity. Decided when the two brackets do not overlap (after the margin);
 * overlapping brackets are inconclusive, which fails unless `inconclusive: 'pass'`. Both searches
 * must use the same axis, SLO and percentile.
 */
export function toSustainMoreThan(this: MatcherState, received: unknown, baseline: unknown, options: SustainMoreThanOptions = {}) {
  const candidate = asCapacity('toSustainMoreThan', received)
  const base = asCapacity('toSustainMoreThan', baseline, 'the baseline')
  const o = gateMatcherOptions('toSustainMoreThan', SustainGateOptions, options, 'options must be an object, e.g. { by: 0.1 }')
  const judged = { kind: 'capacity' as const, candidate: judgedSearch(candidate), baseline: judgedSearch(base) }
  return decisionResult(this, 'toSustainMoreThan', sustainGate(candidate, base, o), { judged, options: o }, candidate.id)
}
