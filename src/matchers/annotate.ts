/**
 * What a reviewer sees of a cell in @vitest/ui and vitest's HTML reporter: one annotation with
 * its key figures and one with its chart as an SVG attachment, once per test and cell, and each
 * verdict typed by its outcome. The figures are read from the run records at once. The chart is
 * drawn while `await cell` resolves (see `drawChartOnMeasure`), so a matcher attaches it before
 * it returns: a test that fails on that matcher has it too. The evidence builder and Vega load
 * when the first cell is measured, not in every worker that registers the matchers.
 */
import { declaredCell, onCellMeasured } from '../worker/cell-registry.ts'
import { formatSignificant as num } from '../number-format.ts'
import type { EvidenceCell } from '../schema/evidence.ts'
import { expectedText } from '../gates/expected-text.ts'
import { figureLine } from '../gates/figure-line.ts'
import type { GateOutcome } from '../schema/gate.ts'
import type { RunRecord } from '../schema/run.ts'
import type { CheckMeta, DecisionMeta, DeclaredCell } from '../schema/task-meta.ts'
import type { Subject } from './subject.ts'

/**
 * vitest's built-in annotation types, which its GitHub Actions reporter turns into `::notice`,
 * `::warning` and `::error` and its default reporter labels; @vitest/ui 5 prints the type above
 * the message.
 */
export type AnnotationType = 'notice' | 'warning' | 'error'

/** An SVG chart as an annotation attachment: the markup as UTF-8 text, which @vitest/ui shows as an image. */
export interface SvgAttachment {
  body: string
  contentType: 'image/svg+xml'
  bodyEncoding: 'utf-8'
}

/** The running test's annotate function (vitest's `context.annotate`). */
export type Annotate = (message: string, type: AnnotationType, attachment?: SvgAttachment) => Promise<unknown>

/**
 * The annotation type of a verdict: `notice` for pass, `warning` for inconclusive (whatever its
 * policy made of the test), `error` for fail.
 * @example annotationType('inconclusive') // 'warning'
 */
export function annotationType(outcome: GateOutcome): AnnotationType {
  return outcome === 'pass' ? 'notice' : outcome === 'inconclusive' ? 'warning' : 'error'
}

/** An annotation's message and type. */
export interface AnnotationLine {
  message: string
  type: AnnotationType
}

/**
 * A gate decision as annotated: its figure line (`figureLine`), with the policy that decided an
 * inconclusive one. A `.not` assertion that held reads as expected (`expected non-win ✓`); one
 * that held on a failed gate is a `notice`, never an error: red is kept for what blocks
 * promotion. An undecided verdict stays a warning, `.not` or not.
 * @example verdictAnnotation(meta, 'inconclusive fails: the default for a superiority claim')
 */
export function verdictAnnotation(v: DecisionMeta, policy: string): AnnotationLine {
  const line = figureLine(v)
  const held = v.isNot && !v.passed
  return {
    message: v.decision.outcome === 'inconclusive' ? `${line}; ${policy}` : line,
    type: held && v.decision.outcome === 'fail' ? 'notice' : annotationType(v.decision.outcome),
  }
}

/**
 * A yes/no check as annotated: passed or failed with its first finding; a `.not` that held as
 * expected (`expected mismatch ✓`), a `notice`.
 * @example checkAnnotation({ cell: 'c4', check: 'toBeMatchedPair', passed: false, findings: ['GPU driver: …'], isNot: true })
 * // { message: 'toBeMatchedPair c4: expected mismatch ✓: 1 finding(s), first: GPU driver: …', type: 'notice' }
 */
export function checkAnnotation(k: Pick<CheckMeta, 'cell' | 'check' | 'passed' | 'findings' | 'isNot' | 'unverifiable'>): AnnotationLine {
  const unverified = k.unverifiable === undefined ? '' : `; unverifiable: ${k.unverifiable.join('; ')}`
  const found = (k.findings.length > 0 ? `: ${k.findings.length} finding(s), first: ${k.findings[0]}` : '') + unverified
  if (k.isNot && !k.passed) return { message: `${k.check} ${k.cell}: ${expectedText(k.check)}${found}`, type: 'notice' }
  return { message: `${k.check} ${k.cell}: ${k.passed ? 'PASS' : 'FAIL'}${found}`, type: annotationType(k.passed ? 'pass' : 'fail') }
}

/**
 * An SVG string as an attachment @vitest/ui renders: vitest reads a string body as base64
 * unless `bodyEncoding` says `utf-8`, and an SVG read as base64 shows as a broken image.
 */
export function svgAttachment(svg: string): SvgAttachment {
  return { body: svg, contentType: 'image/svg+xml', bodyEncoding: 'utf-8' }
}

type Arms = DeclaredCell['records']

/** A subject's records per arm, as the evidence keeps them: `cell`, or `baseline` then `candidate`. */
function armsOf(s: Subject): Arms {
  return s.kind === 'cell' ? { cell: [...s.records] } : { baseline: [...s.baseline], candidate: [...s.candidate] }
}

/** The record a drawn chart is kept under: the first of the measured arm (a stored baseline is shared, the candidate never is). */
function keyRecord(arms: Arms): RunRecord | undefined {
  return (arms.cell ?? arms.candidate)?.[0]
}

/**
 * One line of a cell's key figures per arm and launch, from its run records: decode and prefill
 * p50, TTFT and TPOT p50/p95, aggregate throughput, requests ok and failed.
 */
export function keyFigures(s: Subject): string {
  const arms = Object.entries(armsOf(s)).flatMap(([arm, records]) =>
    records.map((r, i) => {
      const d = r.metrics.distributions
      return (
        `${arm}${i > 0 ? ` #${i + 1}` : ''}: decode p50 ${num(d.decodeTokPerS.p50)} tok/s, ` +
        `prefill p50 ${num(d.effectivePrefillTokPerS.p50)} tok/s, TTFT p50/p95 ${num(d.ttftMs.p50)}/${num(d.ttftMs.p95)} ms, ` +
        `TPOT p50/p95 ${num(d.tpotMs.p50)}/${num(d.tpotMs.p95)} ms, ${num(r.metrics.outputThroughputTokPerS)} tok/s aggregate ` +
        `(${r.completed} ok, ${r.failed === null ? 'failed unknown' : `${r.failed} failed`})`
      )
    }),
  )
  return `${s.id}: ${arms.join('; ')}`
}

/** A cell's chart (SVG), drawn from the cell as the evidence summarizes it; no files are written. */
async function drawCellChart(id: string, arms: Arms, declared: DeclaredCell | undefined): Promise<string> {
  const [{ buildEvidence }, { cellChart }] = await Promise.all([import('../evidence/build.ts'), import('../evidence/charts.ts')])
  const engines =
    declared?.engines ?? Object.fromEntries(Object.entries(arms).map(([arm, list]) => [arm, list[0]?.manifest?.engine.kind ?? arm]))
  const cell = {
    id,
    kind: arms.cell === undefined ? ('pair' as const) : ('cell' as const),
    required: declared?.required ?? true,
    ladder: declared?.ladder ?? null,
    engines,
    status: 'measured' as const,
    error: null,
    records: arms,
  }
  const built = buildEvidence([{ file: '', meta: { cells: [cell] } }], [], { suiteCommit: null, redact: false })
  return cellChart(built.index.cells[0] as EvidenceCell)
}

/** Charts drawn while their cell resolved, by the cell's key record; null where drawing failed. */
const drawn = new WeakMap<RunRecord, string | null>()

/**
 * Draws a measured cell's chart before `await cell` hands its records to the test, so the
 * matchers attach it synchronously. A chart that cannot be drawn is left out, never an error.
 */
async function drawChartOnMeasure(id: string, arms: Arms): Promise<void> {
  const key = keyRecord(arms)
  if (key === undefined || drawn.has(key) || !Object.values(arms).every((list) => list.every((r) => r.requests.length > 0))) return
  drawn.set(key, await drawCellChart(id, arms, declaredCell(id)).catch(() => null))
}

onCellMeasured(drawChartOnMeasure)

/**
 * Annotates a cell's key figures and attaches its chart, both as `notice`s, before it returns.
 * The chart is the one drawn when the cell was measured; a subject built some other way (records
 * handed to `expect` directly, a stored baseline against a cell) has its chart drawn now and
 * attached once drawn, which vitest awaits before a passing test ends. Never fails the test over
 * a drawing.
 */
export function annotateCell(annotate: Annotate, s: Subject): Promise<void> {
  const arms = armsOf(s)
  const figures = annotate(keyFigures(s), 'notice').then(
    () => {},
    () => {},
  )
  const title = `${s.id}: latency by arm`
  const key = keyRecord(arms)
  const ready = key === undefined ? undefined : drawn.get(key)
  if (ready !== undefined) {
    const chart = ready === null ? Promise.resolve() : annotate(title, 'notice', svgAttachment(ready))
    return Promise.all([figures, chart]).then(
      () => {},
      () => {},
    )
  }
  // Read now: the registry empties when the file ends, which may come before the chart is drawn.
  const declared = declaredCell(s.id)
  const chart = drawCellChart(s.id, arms, declared).then((svg) => annotate(title, 'notice', svgAttachment(svg)))
  return Promise.all([figures, chart]).then(
    () => {},
    () => {},
  )
}
