import { TestRunner, type MatcherState } from 'vitest'
import type { TestMeta } from '../src/evidence/meta.ts'
import { fmt, verdictLine } from '../src/gates/verdict.ts'
import type { GateDecision } from '../src/schema/gate.ts'
import { message } from './format.ts'
import { cellFailures, type Subject } from './subject.ts'

/** The running test's servegate meta, created on first use; null outside a test. */
function testMeta(): { meta: TestMeta; annotate: (message: string, type: string) => void } | null {
  const test = TestRunner.getCurrentTest()
  if (test === undefined) return null
  test.meta.servegate ??= { decisions: [], checks: [] }
  return {
    meta: test.meta.servegate,
    annotate: (message, type) => void Promise.resolve(test.context.annotate(message, type)).catch(() => {}),
  }
}

/**
 * Records a decision on the running test: in its meta (for the reporter, with the cell it
 * judged) and as an annotation (shown in @vitest/ui and the HTML reporter).
 */
export function record(cell: string, d: GateDecision): void {
  const test = testMeta()
  if (test === null) return
  test.meta.decisions.push({ cell, decision: d })
  test.annotate(verdictLine(d), 'servegate')
  for (const warning of d.warnings) test.annotate(warning, 'servegate-warning')
}

/** Records a yes/no check (matched pair, canaries, concurrency) on the running test, with what it found. */
export function recordCheck(cell: string, check: string, passed: boolean, findings: readonly string[]): void {
  const test = testMeta()
  if (test === null) return
  test.meta.checks.push({ cell, check, passed, findings: [...findings] })
  test.annotate(`${check} ${passed ? 'PASS' : 'FAIL'}${findings.length > 0 ? `: ${findings.length} finding(s), first: ${findings[0]}` : ''}`, 'servegate')
}

/**
 * The matcher result of a gate: `passes` says which outcomes pass (superiority: only `pass`;
 * non-regression: `pass` and `inconclusive`). A failed cell fails the gate with its reason.
 */
export function gateResult(state: MatcherState, matcher: string, subject: Subject, decide: () => GateDecision, passes: ReadonlyArray<GateDecision['outcome']>) {
  const failures = cellFailures(subject)
  if (failures.length > 0) {
    return {
      pass: false,
      message: () => message(state, matcher, [['Expected', 'both arms measured']], [['Received', `${failures.length} failed cell(s)`]], failures.map((f) => `- ${f}`)),
    }
  }
  const d = decide()
  record(subject.id, d)
  const pass = passes.includes(d.outcome)
  const e = d.effect
  const detail = [...d.warnings.map((w) => `warning: ${w}`)]
  if (d.moreRequestsHint !== null) detail.push(`about ${d.moreRequestsHint} paired requests per arm would likely decide it`)
  return {
    pass,
    message: () =>
      message(
        state,
        matcher,
        [['Expected', state.isNot ? `not: ${d.rule}` : d.rule]],
        [
          ['Received', `${d.outcome}: ${fmt(e.estimate, e.unit)} [${fmt(e.low, e.unit)}, ${fmt(e.high, e.unit)}]${e.confidence === null ? '' : ` (${(e.confidence * 100).toFixed(0)}% interval)`}`],
          ['Samples', `${d.samples.paired} paired; baseline ${d.samples.baseline}, candidate ${d.samples.candidate}`],
          ['Method', e.method],
        ],
        detail,
      ),
    actual: { outcome: d.outcome, estimate: e.estimate, low: e.low, high: e.high },
    expected: { outcome: passes.length === 1 ? passes[0] : passes.join(' or ') },
  }
}
