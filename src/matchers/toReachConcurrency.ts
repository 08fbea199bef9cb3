import type { MatcherState } from 'vitest'
import { concurrencyCheck } from '../gates/checks.ts'
import { armsOf, recordCheck } from './decision.ts'
import { message } from './format.ts'
import { asSubject } from './subject.ts'

/**
 * Passes when the engine actually ran the requested concurrency (its own metrics show that many
 * requests running at once), in every record. A record without engine metrics cannot show it and
 * fails with the reason.
 */
export function toReachConcurrency(this: MatcherState, received: unknown) {
  const s = asSubject('toReachConcurrency', received)
  const { passed: pass, findings: problems, seen } = concurrencyCheck(armsOf(s))
  recordCheck(s, 'toReachConcurrency', pass, problems, this.isNot)
  return {
    pass,
    message: () =>
      message(
        this,
        'toReachConcurrency',
        [['Expected', this.isNot ? 'the engine not to run the requested concurrency' : 'the engine to run the requested concurrency']],
        [['Received', seen.join('; ') || 'no engine occupancy']],
        problems.map((p) => `- ${p}`),
      ),
  }
}
