/**
 * The yes/no checks a matcher records on a cell (canaries, concurrency reached, matched pair) as
 * pure functions of its run records, so the matcher and `servegate verify` find the same things.
 */
import type { CheckName } from '../schema/gate.ts'
import type { RunRecord } from '../schema/run.ts'
import { pairMismatches } from './fairness.ts'

/** The records a check reads: one cell's launches, or a pair's two arms, each in launch order. */
export type CheckArms = { cell: readonly RunRecord[] } | { baseline: readonly RunRecord[]; candidate: readonly RunRecord[] }

/** What a check found: whether it held, and every reason it did not, in words. */
export interface CheckFinding {
  passed: boolean
  findings: string[]
}

/** Every record of the arms, labelled as messages name them: `cell`, `launch 2`, `baseline`, `candidate launch 2`. */
function labelledRecords(arms: CheckArms): Array<{ label: string; record: RunRecord }> {
  if ('cell' in arms) return arms.cell.map((record, i) => ({ label: arms.cell.length > 1 ? `launch ${i + 1}` : 'cell', record }))
  const label = (arm: string, i: number, n: number) => (n > 1 ? `${arm} launch ${i + 1}` : arm)
  return [
    ...arms.baseline.map((record, i) => ({ label: label('baseline', i, arms.baseline.length), record })),
    ...arms.candidate.map((record, i) => ({ label: label('candidate', i, arms.candidate.length), record })),
  ]
}

/** The failed cells among the arms, as lines "label: CODE: message"; empty when every cell ran. */
function cellFailureLines(arms: CheckArms): string[] {
  return labelledRecords(arms).flatMap(({ label, record }) =>
    record.cellFailure === null ? [] : [`${label}: ${record.cellFailure.code}: ${record.cellFailure.message.split('\n')[0]}`],
  )
}

/**
 * The canary check: every request of every record passed its canary (its reply began with its
 * own marker and held no other). A record without canaries, or nothing checked at all, fails.
 */
export function canaryCheck(arms: CheckArms): CheckFinding & { samples: number; canariesPassed: number } {
  const findings = cellFailureLines(arms)
  let samples = 0
  let canariesPassed = 0
  for (const { label, record } of labelledRecords(arms)) {
    if (!record.plan.workload.canaries) {
      findings.push(`${label}: canaries were not enabled (workload.canaries: true)`)
      continue
    }
    const c = record.metrics.canaries
    samples += c?.samples ?? 0
    canariesPassed += c?.passed ?? 0
    for (const r of record.requests) {
      if (r.canary !== null && !r.canary.passed) findings.push(`${label} request ${r.index}: ${r.canary.reason ?? 'failed'}`)
    }
  }
  if (samples === 0 && findings.length === 0) findings.push('no request was checked')
  return { passed: findings.length === 0, findings, samples, canariesPassed }
}

/**
 * The concurrency check: the engine's own metrics show the requested concurrency running, in
 * every record. A record without engine metrics cannot show it and fails with the reason.
 */
export function concurrencyCheck(arms: CheckArms): CheckFinding & { seen: string[] } {
  const findings = cellFailureLines(arms)
  const seen: string[] = []
  for (const { label, record } of labelledRecords(arms)) {
    const engine = record.telemetry?.engine
    if (engine === undefined || engine === null) {
      findings.push(`${label}: no telemetry was recorded (the cell did not run on an engine servegate launched)`)
    } else if (engine.status === 'absent') {
      findings.push(`${label}: engine metrics absent: ${engine.reason}`)
    } else {
      const check = engine.concurrency
      const running = `${check?.runningMax ?? '?'}/${check?.requested ?? record.plan.concurrency}`
      seen.push(`${label} ${running} running (max waiting ${engine.occupancy.waitingMax ?? '?'})`)
      if (check?.reached !== true) findings.push(`${label}: ${check?.reason ?? 'not shown by the engine metrics'}`)
    }
  }
  return { passed: findings.length === 0, findings, seen }
}

/**
 * A check found again from the records it read, as `servegate verify` does: `toBeMatchedPair`
 * needs a pair, the others read either.
 * @throws TypeError for `toBeMatchedPair` on one cell's records
 */
export function checkAgain(check: CheckName, arms: CheckArms): CheckFinding {
  switch (check) {
    case 'toBeMatchedPair': {
      if ('cell' in arms) throw new TypeError('toBeMatchedPair: judged one cell, but it compares the two arms of a pair')
      const findings = pairMismatches(arms)
      return { passed: findings.length === 0, findings }
    }
    case 'toPassCanaries': {
      const { passed, findings } = canaryCheck(arms)
      return { passed, findings }
    }
    case 'toReachConcurrency': {
      const { passed, findings } = concurrencyCheck(arms)
      return { passed, findings }
    }
  }
}
