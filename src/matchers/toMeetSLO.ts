import type { MatcherState } from 'vitest'
import type { z } from 'zod'
import { SLOGateOptions } from '../gates/gate-options.ts'
import { sloGate } from '../gates/slo.ts'
import { gateResult } from './decision.ts'
import { gateMatcherOptions, type InconclusiveOption } from './gate-matcher-options.ts'
import { At, singleArm } from './subject.ts'

/** The options of `toMeetSLO` as one schema: the SLO gate's, and where to judge. */
const MeetSLOSchema = SLOGateOptions.and(At)

/** Options of `toMeetSLO`: the objectives, the share of requests that must meet them, where to judge, and `inconclusive`. */
export type MeetSLOOptions = Omit<z.input<typeof MeetSLOSchema>, 'gate'> & InconclusiveOption

const USAGE =
  "pass { ttftMs?, tpotMs?, e2eMs?, itlMs?, percentile?, atRate?, inconclusive?: 'pass' | 'fail' } with at least one objective, " +
  'e.g. { ttftMs: 500, tpotMs: 50, percentile: 95 }'

/**
 * An SLO claim on one arm: at least `percentile`% of its requests (default 90) were good, i.e.
 * ok and within every objective given (`ttftMs`, `tpotMs`, `e2eMs`, `itlMs` at `itlPercentile`).
 * Passes when the Wilson lower bound of the good share reaches it; an inconclusive result fails
 * (the SLO must be shown met) unless `inconclusive: 'pass'`, with how many requests would likely decide it; a harness-limited
 * cell is not judged. Reads a cell, a pair's candidate, a sweep step or a capacity probe
 * (`atRate` / `atConcurrency`).
 */
export function toMeetSLO(this: MatcherState, received: unknown, options: MeetSLOOptions) {
  const { atRate, atConcurrency, ...slo } = gateMatcherOptions('toMeetSLO', MeetSLOSchema, options, USAGE)
  const subject = singleArm('toMeetSLO', received, { atRate, atConcurrency })
  return gateResult(this, 'toMeetSLO', subject, () => sloGate(subject.records, slo), slo)
}
