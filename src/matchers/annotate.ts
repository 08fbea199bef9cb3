/**
 * What a reviewer sees of a cell in @vitest/ui and vitest's HTML reporter: one annotation with
 * its key figures and its chart as an SVG attachment, once per test and cell.
 */
import { buildEvidence } from '../evidence/build.ts'
import { formatSignificant as num } from '../number-format.ts'
import type { EvidenceCell } from '../schema/evidence.ts'
import { declaredCell } from '../declare/registry.ts'
import type { Subject } from './subject.ts'

/** The subject as the evidence summarizes it (the arms' figures; no files are written). */
export function subjectCell(s: Subject): EvidenceCell {
  const declared = declaredCell(s.id)
  const records = s.kind === 'cell' ? { cell: [...s.records] } : { baseline: [...s.baseline], candidate: [...s.candidate] }
  const engines =
    declared?.engines ?? Object.fromEntries(Object.entries(records).map(([arm, list]) => [arm, list[0]?.manifest?.engine.kind ?? arm]))
  const meta = {
    cells: [
      {
        id: s.id,
        kind: s.kind,
        required: declared?.required ?? true,
        ladder: declared?.ladder ?? null,
        engines,
        status: 'measured' as const,
        error: null,
        records,
      },
    ],
  }
  return buildEvidence([{ file: '', meta }], [], { suiteCommit: null, redact: false }).index.cells[0] as EvidenceCell
}

/** One line of a cell's key figures per arm: decode and prefill p50, TTFT and TPOT p50/p95, throughput. */
export function keyFigures(cell: EvidenceCell): string {
  const arms = cell.arms.map((a) => {
    const t = a.timings
    return `${a.arm}${a.launch > 1 ? ` #${a.launch}` : ''}: decode p50 ${num(t.decodeTokPerS.p50)} tok/s, prefill p50 ${num(t.effectivePrefillTokPerS.p50)} tok/s, TTFT p50/p95 ${num(t.ttftMs.p50)}/${num(t.ttftMs.p95)} ms, TPOT p50/p95 ${num(t.tpotMs.p50)}/${num(t.tpotMs.p95)} ms, ${num(a.outputThroughputTokPerS)} tok/s aggregate (${a.completed} ok, ${a.failed} failed)`
  })
  return `${cell.id}: ${arms.join('; ')}`
}

/** Annotates a cell's key figures and attaches its chart; never fails the test over a drawing. */
export function annotateCell(
  annotate: (message: string, type: string, attachment?: { body: string; contentType: string }) => Promise<unknown>,
  s: Subject,
): void {
  const cell = subjectCell(s)
  void annotate(keyFigures(cell), 'servegate-figures').catch(() => {})
  // Vega loads only when a test first reads a cell, not in every worker.
  void import('../evidence/charts.ts')
    .then(({ cellChart }) => cellChart(cell))
    .then((svg) => annotate(`${cell.id} latency by arm`, 'servegate-chart', { body: svg, contentType: 'image/svg+xml' }))
    .catch(() => {})
}
