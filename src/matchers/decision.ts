import { TestRunner, type MatcherState } from 'vitest'
import { type DecidingPolicy, type Judged, type JudgedRecords, META_TAG, type TestMeta } from '../schema/task-meta.ts'
import type { CheckArms } from '../gates/checks.ts'
import { passesUnder, policyText, resolveInconclusive } from '../gates/inconclusive-policy.ts'
import { samplesText } from '../gates/verdict.ts'
import { preemptionText } from '../gates/preemption.ts'
import { formatFixedPercent, formatInUnit } from '../number-format.ts'
import type { CheckName, GateDecision, GateName } from '../schema/gate.ts'
import { workerOptions } from '../worker/provided-options.ts'
import { message } from './format.ts'
import { type Annotate, type AnnotationType, annotateCell, checkAnnotation, verdictAnnotation } from './annotate.ts'
import { gateOptionsOf, type InconclusiveOption } from './gate-matcher-options.ts'
import type { StoredBaseline } from '../record/stored-baseline.ts'
import { cellFailures, recordsOf, storedBaselineOf, type Subject } from './subject.ts'

/** Cells already annotated with their figures and chart, per test. */
const annotated = new WeakMap<object, Set<string>>()

/** What a matcher records on the running test: its servegate meta, and an annotation of a given type. */
interface RunningTest {
  meta: TestMeta
  annotate: (message: string, type: AnnotationType) => void
}

/**
 * The running test's servegate meta, created on first use, with its annotate function; the
 * first time a test reads a cell, the cell's key figures and chart are annotated. Every
 * annotation is issued before the matcher returns (vitest then awaits it before a passing test
 * ends, and sends it for a failing one); a chart still being drawn is added to the test's
 * pending promises, which vitest awaits before a passing test ends. Null outside a test.
 */
function testMeta(subject: Subject | undefined): RunningTest | null {
  const test = TestRunner.getCurrentTest()
  if (test === undefined) return null
  test.meta.servegate ??= { ...META_TAG, decisions: [], checks: [], storedBaselines: [] }
  const annotate: Annotate = async (message, type, attachment) => test.context.annotate(message, type, attachment)
  const seen = annotated.get(test) ?? new Set<string>()
  annotated.set(test, seen)
  if (subject !== undefined && !seen.has(subject.id) && recordsOf(subject).every(({ record }) => record.requests.length > 0)) {
    seen.add(subject.id)
    ;(test.promises ??= []).push(annotateCell(annotate, subject))
  }
  return { meta: test.meta.servegate, annotate: (message, type) => void annotate(message, type).catch(() => {}) }
}

/** A subject's records per arm, as the checks read them: one cell's launches, or a pair's two arms. */
export function armsOf(subject: Subject): CheckArms {
  return subject.kind === 'cell' ? { cell: subject.records } : { baseline: subject.baseline, candidate: subject.candidate }
}

/** The run records a subject holds, by `runId` per arm: what the evidence needs to find them again. */
function judgedRecordsOf(subject: Subject): JudgedRecords {
  if (subject.kind === 'cell') return { kind: 'cell', records: subject.records.map((r) => r.runId) }
  const stored = storedBaselineOf(subject)
  return {
    kind: 'pair',
    baseline: subject.baseline.map((r) => r.runId),
    candidate: subject.candidate.map((r) => r.runId),
    storedBaseline: stored === null ? null : { file: stored.file },
  }
}

/** Keeps a stored baseline record on the running test's meta (once per run id), so the evidence holds what was judged. */
export function recordStoredBaseline(stored: StoredBaseline): void {
  const test = testMeta(undefined)
  if (test === null) return
  const kept = test.meta.storedBaselines
  if (!kept.some((s) => s.record.runId === stored.record.runId)) kept.push({ file: stored.file, record: stored.record })
}

/** What a gate matcher hands down besides its decision: what the gate read, and the matcher's resolved options. */
export interface GateCall {
  judged: Judged
  /** The gate's resolved options with the matcher's `inconclusive` (see `gateMatcherOptions`). */
  options: InconclusiveOption & object
}

/** A decision as the matcher turned it into its result. */
interface Verdict {
  cell: string
  decision: GateDecision
  call: GateCall
  policy: DecidingPolicy
  passed: boolean
  isNot: boolean
}

/**
 * Records a decision on the running test: in its meta (for the reporter, with the cell it judged,
 * what it read, its options and the policy that decided the matcher's result) and as an
 * annotation (shown in @vitest/ui and the HTML reporter).
 */
function record(v: Verdict, subject?: Subject): void {
  const test = testMeta(subject)
  if (test === null) return
  const { cell, decision: d, call, policy, passed, isNot } = v
  const meta = { cell, decision: d, judged: call.judged, options: gateOptionsOf(call.options), policy, passed, isNot }
  test.meta.decisions.push(meta)
  // An undecided verdict is a warning wherever annotations are shown, never a plain verdict, and says what it did to the test.
  const line = verdictAnnotation(meta, policyText(policy, d.kind))
  test.annotate(line.message, line.type)
  for (const warning of d.warnings) test.annotate(warning, 'warning')
  if (d.decideHint !== null) test.annotate(d.decideHint.text, 'warning')
}

/**
 * Records a yes/no check (matched pair, canaries, concurrency) on the running test, with what it
 * found and the records it read. `isNot`: the assertion was `.not` (false for a check recorded
 * outside an assertion, e.g. a refused stored baseline). `unverifiable`: the facts it could not
 * check (kept only when there are some).
 */
export function recordCheck(
  subject: Subject,
  check: CheckName,
  passed: boolean,
  findings: readonly string[],
  isNot = false,
  unverifiable: readonly string[] = [],
): void {
  const test = testMeta(subject)
  if (test === null) return
  const meta = {
    cell: subject.id,
    check,
    passed,
    findings: [...findings],
    judged: judgedRecordsOf(subject),
    isNot,
    ...(unverifiable.length === 0 ? {} : { unverifiable: [...unverifiable] }),
  }
  test.meta.checks.push(meta)
  const line = checkAnnotation(meta)
  test.annotate(line.message, line.type)
}

/**
 * The matcher result of a gate on a cell or pair: the decision passes on `pass`, fails on `fail`,
 * and an inconclusive one does what its policy says (the option `inconclusive` in `options`, else
 * `servegate({ inconclusive })`, else the default of its kind). A failed cell fails the gate with
 * its reason.
 * @example gateResult(this, 'toHoldLatency', p, () => holdLatencyGate(p, o), o)
 */
export function gateResult(
  state: MatcherState,
  matcher: GateName,
  subject: Subject,
  decide: () => GateDecision,
  options: InconclusiveOption & object,
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
  return decisionResult(state, matcher, decide(), { judged: judgedRecordsOf(subject), options }, subject.id, subject)
}

/**
 * The matcher result of a decision on a cell, recorded on the running test (with the cell's
 * figures and chart when `subject` is given): passes on `pass`, and on `inconclusive` when the
 * policy says so; the message names the policy that decided an inconclusive one.
 */
export function decisionResult(state: MatcherState, matcher: GateName, d: GateDecision, call: GateCall, cell: string, subject?: Subject) {
  const policy = resolveInconclusive(d.kind, call.options.inconclusive, workerOptions().inconclusive)
  const pass = passesUnder(d.outcome, policy)
  record({ cell, decision: d, call, policy, passed: pass, isNot: state.isNot === true }, subject)
  const e = d.effect
  const detail = [...d.warnings.map((w) => `warning: ${w}`)]
  if (d.decideHint !== null) detail.push(d.decideHint.text)
  const passing = policy.inconclusive === 'pass' ? 'pass or inconclusive' : 'pass'
  const preempted = preemptionText(d.preemptions)
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
          ...(preempted === null ? [] : ([['Preemptions', preempted]] as Array<[string, string]>)),
          ...(d.outcome === 'inconclusive' ? ([['Policy', policyText(policy, d.kind)]] as Array<[string, string]>) : []),
        ],
        detail,
      ),
    actual: { outcome: d.outcome, estimate: e.estimate, low: e.low, high: e.high },
    expected: { outcome: passing },
  }
}
