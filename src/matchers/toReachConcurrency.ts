import type { MatcherState } from 'vitest'
import { recordCheck } from './decision.ts'
import { message } from './format.ts'
import { asSubject, cellFailures, recordsOf } from './subject.ts'

/**
 * Passes when the engine actually ran the requested concurrency (its own metrics show that many
 * requests running at once), in every record. A record without engine metrics cannot show it and
 * fails with the reason.
 */
export function toReachConcurrency(this: MatcherState, received: unknown) {
  const s = asSubject('toReachConcurrency', received)
  const problems = [...cellFailures(s)]
  const seen: string[] = []
  for (const { label, record } of recordsOf(s)) {
    const engine = record.telemetry?.engine
    if (engine === undefined || engine === null) {
      problems.push(`${label}: no telemetry was recorded (the cell did not run on an engine servegate launched)`)
    } else if (engine.status === 'absent') {
      problems.push(`${label}: engine metrics absent: ${engine.reason}`)
    } else {
      const check = engine.concurrency
      const running = `${check?.runningMax ?? '?'}/${check?.requested ?? record.plan.concurrency}`
      seen.push(`${label} ${running} running (max waiting ${engine.occupancy.waitingMax ?? '?'})`)
      if (check?.reached !== true) problems.push(`${label}: ${check?.reason ?? 'not shown by the engine metrics'}`)
    }
  }
  const pass = problems.length === 0
  recordCheck(s, 'toReachConcurrency', pass, problems)
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
