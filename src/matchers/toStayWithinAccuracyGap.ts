import type { MatcherState } from 'vitest'
import { accuracyGapGate } from '../gates/accuracy-gap.ts'
import { AccuracyGapGateOptions } from '../gates/gate-options.ts'
import { accuracyArmsText } from '../gates/verdict.ts'
import type { GateDecision } from '../schema/gate.ts'
import { gateResult } from './decision.ts'
import { gateMatcherOptions, type InconclusiveOption } from './gate-matcher-options.ts'
import { againstStoredBaseline } from './stored-baseline-pair.ts'
import { asPair } from './subject.ts'

/** Options of `toStayWithinAccuracyGap`: the accuracy drop that fails, and the output-length gap that warns. */
export type StayWithinAccuracyGapOptions = Omit<AccuracyGapGateOptions, 'gate'> & InconclusiveOption

/**
 * The matcher's message with a labelled `Accuracy:` line after its received values: each arm's
 * accuracy with its interval. Unchanged when no decision was made (a failed cell).
 */
function withArmAccuracy(message: string, d: GateDecision | undefined): string {
  if (d?.accuracy === undefined) return message
  const lines = message.split('\n')
  const received = lines.findIndex((line) => line.startsWith('Received:'))
  const width = received === -1 ? 'Accuracy: '.length : (/^Received:\s*/.exec(lines[received] as string) as RegExpExecArray)[0].length
  let end = Math.max(received, 1)
  while (end + 1 < lines.length && lines[end + 1] !== '') end++
  lines.splice(end + 1, 0, `${'Accuracy:'.padEnd(width)}${accuracyArmsText(d.accuracy)}`)
  return lines.join('\n')
}

/**
 * A quality gate on the same questions: fails on a confident accuracy drop of `points` or more
 * (default 2); a mean output-length gap of `outputLengthPct` (default 10%) is a warning. The
 * message shows each arm's accuracy with its interval; an inconclusive verdict says how many
 * questions would likely decide it, and a confident improvement is reported as one.
 * @example expect(pair).toStayWithinAccuracyGap({ points: 2 })
 */
export function toStayWithinAccuracyGap(this: MatcherState, received: unknown, options: StayWithinAccuracyGapOptions = {}) {
  const p = asPair('toStayWithinAccuracyGap', received)
  const o = gateMatcherOptions(
    'toStayWithinAccuracyGap',
    AccuracyGapGateOptions,
    options,
    'options must be an object, e.g. { points: 2, outputLengthPct: 10 }',
  )
  const decide = () => accuracyGapGate({ baseline: p.baseline, candidate: p.candidate }, o)
  const judged = againstStoredBaseline('toStayWithinAccuracyGap', p, decide, o)
  let decision: GateDecision | undefined
  const result = gateResult(this, 'toStayWithinAccuracyGap', p, () => (decision = judged()), o)
  return { ...result, message: () => withArmAccuracy(result.message(), decision) }
}
