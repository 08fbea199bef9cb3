import { TestRunner, type MatcherState } from 'vitest'
import { META_TAG, type TestMeta } from '../schema/task-meta.ts'
import { samplesText, verdictLine } from '../gates/verdict.ts'
import { formatFixedPercent, formatInUnit } from '../number-format.ts'
import type { CheckName, GateDecision, GateName } from '../schema/gate.ts'
import { message } from './format.ts'
import { annotateCell } from './annotate.ts'
import { cellFailures, recordsOf, type Subject } from './subject.ts'

/** Cells already annotated with their figures and chart, per test. */
const annotated = new WeakMap<object, Set<string>>()

/**
 * The running test's servegate meta, created on first use, with its annotate function; the
 * first time a test reads a cell, the cell's key figures and chart are annotated. Null outside
 * a test.
 */
function testMeta(subject: Subject | undefined): { meta: TestMeta; annotate: (message: string, type: string) => void } | null {
  const test = TestRunner.getCurrentTest()
  if (test === undefined) return null
  test.meta.servegate ??= { ...META_TAG, decisions: [], checks: [] }
  const annotate = (message: string, type: string, attachment?: { body: string; contentType: string }) =>
    Promise.resolve(test.context.annotate(message, type, attachment))
  const seen = annotated.get(test) ?? new Set<string>()
  annotated.set(test, seen)
  if (subject !== undefined && !seen.has(subject.id) && recordsOf(subject).every(({ record }) => record.requests.length > 0)) {
    seen.add(subject.id)
    annotateCell(annotate, subject)
  }
  return { meta: test.meta.servegate, annotate: (message, type) => void annotate(message, type).catch(() => {}) }
}

/**
 * Records a decision on the running test: in its meta (for the reporter, with the cell it
 * judged) and as an annotation (shown in @vitest/ui and the HTML reporter).
 */
export function record(cell: string, d: GateDecision, subject?: Subject): void {
  const test = testMeta(subject)
  if (test === null) return
  test.meta.decisions.push({ cell, decision: d })
  // An undecided verdict is a warning wherever annotations are shown, never a plain verdict.
  test.annotate(verdictLine(d), d.outcome === 'inconclusive' ? 'warning' : 'servegate')
  for (const warning of d.warnings) test.annotate(warning, 'servegate-warning')
}

/** Records a yes/no check (matched pair, canaries, concurrency) on the running test, with what it found. */
export function recordCheck(subject: Subject, check: CheckName, passed: boolean, findings: readonly string[]): void {
  const test = testMeta(subject)
  if (test === null) return
  test.meta.checks.push({ cell: subject.id, check, passed, findings: [...findings] })
  test.annotate(
    `${check} ${passed ? 'PASS' : 'FAIL'}${findings.length > 0 ? `: ${findings.length} finding(s), first: ${findings[0]}` : ''}`,
    'servegate',
  )
}

/**
 * The matcher result of a gate: `passes` says which outcomes pass (superiority: only `pass`;
 * non-regression: `pass` and `inconclusive`). A failed cell fails the gate with its reason.
 */
export function gateResult(
  state: MatcherState,
  matcher: GateName,
  subject: Subject,
  decide: () => GateDecision,
  passes: ReadonlyArray<GateDecision['outcome']>,
) {
  const failures = cellFailures(subject)
  if (failures.length > 0) {
    return {
      pass: false,
      message: () =>
        message(
          state,
          matcher,
          [['Expected', 'both arms measured']],
          [['Received', `${failures.length} failed cell(s)`]],
          failures.map((f) => `- ${f}`),
        ),
    }
  }
  return decisionResult(state, matcher, decide(), passes, subject.id, subject)
}

/**
 * The matcher result of a decision on a cell, recorded on the running test (with the cell's
 * figures and chart when `subject` is given): passes when its outcome is one of `passes`.
 */
export function decisionResult(
  state: MatcherState,
  matcher: GateName,
  d: GateDecision,
  passes: ReadonlyArray<GateDecision['outcome']>,
  cell: string,
  subject?: Subject,
) {
  record(cell, d, subject)
  const pass = passes.includes(d.outcome)
  const e = d.effect
  const detail = [...d.warnings.map((w) => `warning: ${w}`)]
  if (d.moreRequestsHint !== null)
    detail.push(`about ${d.moreRequestsHint} ${d.samples.baseline === 0 ? 'requests' : 'paired requests per arm'} would likely decide it`)
  return {
    pass,
    message: () =>
      message(
        state,
        matcher,
        [['Expected', state.isNot ? `not: ${d.rule}` : d.rule]],
        [
          [
            'Received',
            `${d.outcome}: ${formatInUnit(e.estimate, e.unit)} [${formatInUnit(e.low, e.unit)}, ${formatInUnit(e.high, e.unit)}]` +
              (e.confidence === null ? '' : ` (${formatFixedPercent(e.confidence, 0)} interval)`),
          ],
          [
            'Samples',
            d.samples.paired > 0
              ? `${d.samples.paired} paired; baseline ${d.samples.baseline}, candidate ${d.samples.candidate}`
              : samplesText(d.samples),
          ],
          ['Method', e.method],
        ],
        detail,
      ),
    actual: { outcome: d.outcome, estimate: e.estimate, low: e.low, high: e.high },
    expected: { outcome: passes.length === 1 ? passes[0] : passes.join(' or ') },
  }
}
