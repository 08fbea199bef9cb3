import { isDeepStrictEqual } from 'node:util'
import { describeSLO } from '../metrics/goodput.ts'
import type { CapacitySearch } from '../schema/capacity-record.ts'
import type { GateDecision } from '../schema/gate.ts'
import { formatPercent } from '../number-format.ts'
import { type BracketFacts, sustainMethod } from './method-text.ts'
import { sustainRule } from './rule-text.ts'
import { bracketsOverlapWarning, searchWarning, unsettledSearchWarning } from './warning-text.ts'
import { parseOptions, SustainGateOptions } from './gate-options.ts'

/** What the capacity comparison reads of a search. */
export type CapacityInput = Pick<
  CapacitySearch,
  'id' | 'axis' | 'slo' | 'requiredFraction' | 'confidence' | 'bracket' | 'status' | 'probes' | 'warnings'
>

/** A bracket with its open ends made explicit: no passing probe is a capacity of at least 0, no failing one at most ∞. */
function bounds(s: CapacityInput): { low: number; high: number } {
  return { low: s.bracket.low ?? 0, high: s.bracket.high ?? Infinity }
}

/** What the words of a bracket need: its explicit bounds, axis, how its search ended and its probes. */
function bracketOf(s: CapacityInput): BracketFacts {
  return { ...bounds(s), axis: s.axis, status: s.status, probes: s.probes.length }
}

/** Throws a TypeError naming the gate when the two searches did not ask the same question. */
function requireComparable(gate: string, candidate: CapacityInput, baseline: CapacityInput): void {
  const differs: string[] = []
  if (candidate.axis !== baseline.axis) differs.push(`axis ${candidate.axis} ≠ ${baseline.axis}`)
  if (!isDeepStrictEqual(candidate.slo, baseline.slo)) differs.push(`SLO ${describeSLO(candidate.slo)} ≠ ${describeSLO(baseline.slo)}`)
  if (candidate.requiredFraction !== baseline.requiredFraction)
    differs.push(`required share ${candidate.requiredFraction} ≠ ${baseline.requiredFraction}`)
  if (differs.length > 0)
    throw new TypeError(
      `${gate}: the two capacity searches are not comparable (${differs.join('; ')}); ` +
        'search both arms on the same axis under the same SLO and percentile',
    )
}

/**
 * Compares two arms' capacities from their searches' brackets (the capacity of each lies in
 * [low, high)): the candidate sustains more than (1 + by) × the baseline when its bracket low is
 * at least (1 + by) × the baseline's bracket high (pass); it does not when its bracket high is at
 * most (1 + by) × the baseline's bracket low (fail); brackets that overlap are inconclusive, and
 * narrower brackets (more probes, a smaller resolution) would decide it.
 * @example sustainGate(candidateSearch, baselineSearch, { by: 0.1 })
 */
export function sustainGate(candidate: CapacityInput, baseline: CapacityInput, options: SustainGateOptions = {}): GateDecision {
  const o = parseOptions(typeof options?.gate === 'string' ? options.gate : 'toSustainMoreThan', SustainGateOptions, options)
  requireComparable(o.gate, candidate, baseline)
  const c = bounds(candidate)
  const b = bounds(baseline)
  const factor = 1 + o.by
  const outcome: GateDecision['outcome'] =
    c.low > 0 && c.low >= factor * b.high ? 'pass' : c.high <= factor * b.low ? 'fail' : 'inconclusive'
  const warnings: string[] = []
  for (const [arm, s] of [
    ['candidate', candidate],
    ['baseline', baseline],
  ] as const) {
    for (const w of s.warnings) warnings.push(searchWarning(arm, w))
    if (s.status !== 'bracketed')
      warnings.push(unsettledSearchWarning({ arm, bracket: bracketOf(s), openEnded: s.bracket.low === null || s.bracket.high === null }))
  }
  if (outcome === 'inconclusive') warnings.push(bracketsOverlapWarning({ candidate: bracketOf(candidate), baseline: bracketOf(baseline) }))
  const finite = [c.low, c.high, b.low, b.high].every((v) => v > 0 && Number.isFinite(v))
  const lowRatio = Number.isFinite(b.high) && b.high > 0 ? c.low / b.high : null
  const highRatio = Number.isFinite(c.high) && b.low > 0 ? c.high / b.low : null
  return {
    gate: o.gate,
    outcome,
    kind: 'superiority',
    metric: `capacity (${candidate.axis}) under ${describeSLO(candidate.slo)} for ${formatPercent(candidate.requiredFraction)} of requests`,
    effect: {
      estimate: finite ? Math.sqrt((c.low * c.high) / (b.low * b.high)) : null,
      low: lowRatio,
      high: highRatio,
      unit: 'ratio',
      confidence: null,
      method: sustainMethod({ candidate: bracketOf(candidate), baseline: bracketOf(baseline), probeConfidence: candidate.confidence }),
    },
    samples: { baseline: baseline.probes.length, candidate: candidate.probes.length, paired: 0 },
    rule: sustainRule({ by: o.by }),
    moreRequestsHint: null,
    decideHint: null,
    warnings,
  }
}
