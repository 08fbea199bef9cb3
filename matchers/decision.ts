import { TestRunner, type MatcherState } from 'vitest'
import type { GateDecision } from '../src/schema/gate.ts'
import { message } from './format.ts'
import { cellFailures, type Subject } from './subject.ts'

declare module 'vitest' {
  interface TaskMeta {
    /** Gate decisions of the test's assertions, for the reporter (JSON-safe). */
    servegate?: GateDecision[]
  }
}

function fmt(v: number | null, unit: GateDecision['effect']['unit']): string {
  if (v === null) return '—'
  if (unit === 'ratio') return `${v.toFixed(3)}×`
  if (unit === 'fraction') return `${(v * 100).toFixed(1)}%`
  if (unit === 'points') return `${v.toFixed(1)} pt`
  if (unit === 'ms') return `${v.toFixed(1)} ms`
  return String(v)
}

/** The samples of a decision in words: paired requests, one arm's requests, or each arm's count. */
function samplesText(s: GateDecision['samples']): string {
  if (s.paired > 0) return `${s.paired} paired (${s.baseline}/${s.candidate})`
  if (s.baseline === 0) return `${s.candidate} samples`
  return `baseline ${s.baseline}, candidate ${s.candidate}, none paired`
}

/** One line for annotations and evidence: the verdict, the effect with its interval, the samples. */
export function verdictLine(d: GateDecision): string {
  const e = d.effect
  const bounds = e.low === null && e.high === null ? '' : ` [${fmt(e.low, e.unit)}, ${fmt(e.high, e.unit)}]`
  const ci = e.confidence === null ? bounds : `${bounds} at ${(e.confidence * 100).toFixed(0)}%`
  return `${d.gate} ${d.outcome.toUpperCase()}: ${d.metric} ${fmt(e.estimate, e.unit)}${ci}, ${samplesText(d.samples)}`
}

/**
 * Records a decision on the running test: in its meta (for the reporter) and as an annotation
 * (shown in @vitest/ui and the HTML reporter).
 */
export function record(d: GateDecision): void {
  const test = TestRunner.getCurrentTest()
  if (test === undefined) return
  test.meta.servegate = [...(test.meta.servegate ?? []), d]
  void Promise.resolve(test.context.annotate(verdictLine(d), 'servegate')).catch(() => {})
  for (const warning of d.warnings) void Promise.resolve(test.context.annotate(warning, 'servegate-warning')).catch(() => {})
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
  return decisionResult(state, matcher, decide(), passes)
}

/** The matcher result of a decision, recorded on the running test: passes when its outcome is one of `passes`. */
export function decisionResult(state: MatcherState, matcher: string, d: GateDecision, passes: ReadonlyArray<GateDecision['outcome']>) {
  record(d)
  const pass = passes.includes(d.outcome)
  const e = d.effect
  const detail = [...d.warnings.map((w) => `warning: ${w}`)]
  if (d.moreRequestsHint !== null) detail.push(`about ${d.moreRequestsHint} ${d.samples.baseline === 0 ? 'requests' : 'paired requests per arm'} would likely decide it`)
  return {
    pass,
    message: () =>
      message(
        state,
        matcher,
        [['Expected', state.isNot ? `not: ${d.rule}` : d.rule]],
        [
          ['Received', `${d.outcome}: ${fmt(e.estimate, e.unit)} [${fmt(e.low, e.unit)}, ${fmt(e.high, e.unit)}]${e.confidence === null ? '' : ` (${(e.confidence * 100).toFixed(0)}% interval)`}`],
          ['Samples', d.samples.paired > 0 ? `${d.samples.paired} paired; baseline ${d.samples.baseline}, candidate ${d.samples.candidate}` : samplesText(d.samples)],
          ['Method', e.method],
        ],
        detail,
      ),
    actual: { outcome: d.outcome, estimate: e.estimate, low: e.low, high: e.high },
    expected: { outcome: passes.length === 1 ? passes[0] : passes.join(' or ') },
  }
}
