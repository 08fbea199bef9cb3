import type { MatcherState } from 'vitest'
import { recordCheck } from './decision.ts'
import { message } from './format.ts'
import { asSubject, cellFailures, recordsOf } from './subject.ts'

/**
 * Passes when every request of every record passed its canary: each reply began with its own
 * marker and held no other request's (an engine that crosses concurrent streams fails).
 */
export function toPassCanaries(this: MatcherState, received: unknown) {
  const s = asSubject('toPassCanaries', received)
  const problems = [...cellFailures(s)]
  let samples = 0
  let passed = 0
  for (const { label, record } of recordsOf(s)) {
    if (!record.plan.workload.canaries) {
      problems.push(`${label}: canaries were not enabled (workload.canaries: true)`)
      continue
    }
    const c = record.metrics.canaries
    samples += c?.samples ?? 0
    passed += c?.passed ?? 0
    for (const r of record.requests) {
      if (r.canary !== null && !r.canary.passed) problems.push(`${label} request ${r.index}: ${r.canary.reason ?? 'failed'}`)
    }
  }
  if (samples === 0 && problems.length === 0) problems.push('no request was checked')
  const pass = problems.length === 0
  recordCheck(s, 'toPassCanaries', pass, problems)
  return {
    pass,
    message: () =>
      message(
        this,
        'toPassCanaries',
        [['Expected', this.isNot ? 'some canary to fail' : 'every reply to begin with its own marker and hold no other']],
        [['Received', `${passed}/${samples} canaries passed`]],
        problems.slice(0, 20).map((p) => `- ${p}`),
      ),
  }
}
