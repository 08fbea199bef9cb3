/**
 * What a reviewer sees of a cell in @vitest/ui and vitest's HTML reporter: one annotation with
 * its key figures and its chart as an SVG attachment, once per test and cell. The figures are read
 * from the run records at once; the evidence builder and Vega load when a test first draws a
 * chart, not in every worker that registers the matchers.
 */
import { declaredCell } from '../declare/registry.ts'
import { formatSignificant as num } from '../number-format.ts'
import type { EvidenceCell } from '../schema/evidence.ts'
import type { RunRecord } from '../schema/run.ts'
import type { Subject } from './subject.ts'

/** The running test's annotate function (vitest's `context.annotate`). */
type Annotate = (message: string, type: string, attachment?: { body: string; contentType: string }) => Promise<unknown>

/** A subject's records per arm, as the evidence keeps them: `cell`, or `baseline` then `candidate`. */
function armsOf(s: Subject): { cell?: RunRecord[]; baseline?: RunRecord[]; candidate?: RunRecord[] } {
  return s.kind === 'cell' ? { cell: [...s.records] } : { baseline: [...s.baseline], candidate: [...s.candidate] }
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
        `(${r.completed} ok, ${r.failed} failed)`
      )
    }),
  )
  return `${s.id}: ${arms.join('; ')}`
}

/** The subject's chart (SVG), drawn from the cell as the evidence summarizes it; no files are written. */
async function cellChartOf(s: Subject, declared: ReturnType<typeof declaredCell>): Promise<string> {
  const [{ buildEvidence }, { cellChart }] = await Promise.all([import('../evidence/build.ts'), import('../evidence/charts.ts')])
  const records = armsOf(s)
  const engines =
    declared?.engines ?? Object.fromEntries(Object.entries(records).map(([arm, list]) => [arm, list[0]?.manifest?.engine.kind ?? arm]))
  const cell = {
    id: s.id,
    kind: s.kind,
    required: declared?.required ?? true,
    ladder: declared?.ladder ?? null,
    engines,
    status: 'measured' as const,
    error: null,
    records,
  }
  const built = buildEvidence([{ file: '', meta: { cells: [cell] } }], [], { suiteCommit: null, redact: false })
  return cellChart(built.index.cells[0] as EvidenceCell)
}

/** Annotates a cell's key figures and attaches its chart; never fails the test over a drawing. */
export function annotateCell(annotate: Annotate, s: Subject): void {
  void annotate(keyFigures(s), 'servegate-figures').catch(() => {})
  // Read now: the registry empties when the file ends, which may come before the chart is drawn.
  const declared = declaredCell(s.id)
  void cellChartOf(s, declared)
    .then((svg) => annotate(`${s.id} latency by arm`, 'servegate-chart', { body: svg, contentType: 'image/svg+xml' }))
    .catch(() => {})
}
