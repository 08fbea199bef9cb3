import type { MatcherState } from 'vitest'
import { canaryCheck } from '../gates/checks.ts'
import { armsOf, recordCheck } from './decision.ts'
import { message } from './format.ts'
import { asSubject } from './subject.ts'

/**
 * Passes when every request of every record passed its canary: each reply began with its own
 * marker and held no other request's (an engine that crosses concurrent streams fails).
 */
export function toPassCanaries(this: MatcherState, received: unknown) {
  const s = asSubject('toPassCanaries', received)
  const { passed: pass, findings: problems, samples, canariesPassed } = canaryCheck(armsOf(s))
  recordCheck(s, 'toPassCanaries', pass, problems, this.isNot)
  return {
    pass,
    message: () =>
      message(
        this,
        'toPassCanaries',
        [['Expected', this.isNot ? 'some canary to fail' : 'every reply to begin with its own marker and hold no other']],
        [['Received', `${canariesPassed}/${samples} canaries passed`]],
        problems.slice(0, 20).map((p) => `- ${p}`),
      ),
  }
}
