/**
 * The pull-request comment (and job summary): the gate table a reviewer decides from, the
 * promotion verdict with its numbered reasons, then the whole board collapsed in `<details>`,
 * cut to fit GitHub's comment limit. Rendered from the index alone, like the board.
 */
import { ABSENT, formatFixedPercent, formatInUnit, formatSignificant } from '../number-format.ts'
import type { ArmSummary, EvidenceCell, EvidenceIndex, GateEntry } from '../schema/evidence.ts'
import type { GateDecision } from '../schema/gate.ts'
import { boardFiles, promotionLines, renderBoard, table } from './board.ts'
import { mermaidCharts } from './mermaid.ts'
import { expectedCountText, gateCounts, gateExpected } from './assertion-tone.ts'
import { estimatorText } from './estimator-text.ts'
import { PREEMPTION_HEAD, preemptionCell, reportsPreemptions } from '../gates/preemption.ts'

/** The first line of every servegate PR comment: the workflow finds its own comment by it and updates it. */
export const PR_COMMENT_MARKER = '<!-- servegate:pr-comment -->'

/** GitHub's limit on a comment body, in characters. */
export const GITHUB_COMMENT_LIMIT = 65_536

/** A verdict with a glyph that never reads as a pass unless it is one. */
const VERDICT: Record<GateDecision['outcome'], string> = { pass: '✅ pass', fail: '❌ fail', inconclusive: '⚠️ inconclusive' }

/** How the comment is drawn beyond the index. */
export interface PrCommentOptions {
  /**
   * Markdown charts shown after the verdict, outside `<details>`; by default one Mermaid chart per
   * metric (`mermaidCharts`), '' for none.
   */
  charts?: string
  /**
   * Where the full board is, for the line that says what was cut: Markdown, written as is (a link,
   * a code span): the names in it are the caller's to escape (the CLI's `boardLocation` does).
   * @default 'README.md in the evidence directory'
   */
  boardLocation?: string
  /** The most characters the comment may have. @default GITHUB_COMMENT_LIMIT */
  limit?: number
}

/** The arm summaries a pair gate's side is read from: that arm's launches of the cell. */
function launchesOf(c: EvidenceCell | undefined, arm: ArmSummary['arm']): ArmSummary[] {
  return c?.arms.filter((a) => a.arm === arm) ?? []
}

/**
 * One arm's figure for a gate's metric, in the metric's unit, from the arm summaries: a rate's
 * p50 (tok/s), a latency percentile (ms), the aggregate throughput, the accuracy (%). Launches
 * are joined with `/`; `—` for a metric the summaries do not hold (the gate's own table has it).
 */
function armFigure(g: GateEntry, c: EvidenceCell | undefined, arm: 'baseline' | 'candidate'): string {
  const d = g.decision
  if (d.accuracy !== undefined) return formatFixedPercent(d.accuracy[arm].rate)
  if (g.judged.kind === 'pair' && arm === 'baseline' && g.judged.storedBaseline !== null) return 'stored'
  const [metric = '', percentile = ''] = d.metric.split(' p')
  const figure = (a: ArmSummary): number | null => {
    if (metric === 'decodeTokPerS') return a.timings.decodeTokPerS.p50
    if (metric === 'effectivePrefillTokPerS') return a.timings.effectivePrefillTokPerS.p50
    if (metric === 'outputThroughputTokPerS') return a.outputThroughputTokPerS
    // A latency gate's metric is its timing field and percentile, e.g. `ttftMs p95`.
    if (!(metric in a.timings) || !['50', '95', '99'].includes(percentile)) return null
    return a.timings[metric as keyof ArmSummary['timings']][`p${percentile}` as 'p50' | 'p95' | 'p99']
  }
  const unit = metric.endsWith('TokPerS') ? ' tok/s' : metric.endsWith('Ms') ? ' ms' : ''
  const values = launchesOf(c, arm).map(figure)
  if (values.length === 0 || values.every((v) => v === null)) return ABSENT
  return `${values.map((v) => formatSignificant(v)).join(' / ')}${unit}`
}

/** A signed change: a ratio as a percentage (`+12.0%`), a difference in its unit (`-20.0 pt`, `+3.1 ms`). */
function delta(value: number | null, unit: GateDecision['effect']['unit']): string {
  if (value === null) return ABSENT
  const sign = (x: number) => (x > 0 ? '+' : '')
  if (unit === 'ratio') return `${sign(value - 1)}${((value - 1) * 100).toFixed(1)}%`
  if (unit === 'points' || unit === 'ms') return `${sign(value)}${formatInUnit(value, unit)}`
  return formatInUnit(value, unit)
}

/**
 * What the test made of an outcome, where it differs from it: a `.not` that held reads as what it
 * expected (`expected non-win ✓ (fail, .not)`, no red), an inconclusive hold that passes says so.
 */
function verdictText(g: GateEntry): string {
  const expected = gateExpected(g)
  if (expected !== null) return `${expected} (${g.decision.outcome}, .not)${g.testPassed ? '' : ' (test FAILED)'}`
  const held = g.decision.outcome === 'pass'
  if (g.testPassed === held) return VERDICT[g.decision.outcome]
  return `${VERDICT[g.decision.outcome]} (test ${g.testPassed ? 'passed' : 'FAILED'}${g.isNot ? ', .not' : ''})`
}

/**
 * One row per gate: cell, gate (with its metric), baseline, candidate, Δ (a ratio as %, accuracy
 * in pt, times in ms), its interval, the verdict with a glyph, and the estimator of the Δ (the
 * Mermaid bars compare p50s instead), then, with `withPreemptions`, each arm's preemptions. A gate
 * judging one cell, not a pair, shows its figure as the candidate and no Δ.
 */
function gateRows(index: EvidenceIndex, withPreemptions: boolean): string[][] {
  const cells = new Map(index.cells.map((c) => [c.id, c]))
  return index.gates.map((g) => {
    const d = g.decision
    const e = d.effect
    const paired = g.judged.kind !== 'cell'
    const c = cells.get(g.cell)
    const interval =
      e.low === null && e.high === null
        ? ABSENT
        : paired
          ? `[${delta(e.low, e.unit)}, ${delta(e.high, e.unit)}]`
          : `[${formatInUnit(e.low, e.unit)}, ${formatInUnit(e.high, e.unit)}]`
    return [
      g.cell,
      `${d.gate} (${d.metric})`,
      paired ? armFigure(g, c, 'baseline') : ABSENT,
      paired ? armFigure(g, c, 'candidate') : formatInUnit(e.estimate, e.unit),
      paired ? delta(e.estimate, e.unit) : ABSENT,
      interval,
      verdictText(g),
      estimatorText(d),
      ...(withPreemptions ? [preemptionCell(d.preemptions, ABSENT)] : []),
    ]
  })
}

const GATE_HEAD = ['cell', 'gate (metric)', 'baseline', 'candidate', 'Δ (gate estimate)', 'interval', 'verdict', 'estimator'] as const

/** The one-line headline: promotable or not, then the gates and cells by outcome. */
function headline(index: EvidenceIndex): string {
  const s = index.statistics
  const verdict = index.promotion.promotable ? '✅ promotable' : '❌ not promotable'
  // A `.not` that held is counted as expected, never as a ❌ fail.
  const g = gateCounts(index)
  const expected = expectedCountText(g.expected)
  return (
    `## servegate: ${verdict}\n\n` +
    `Gates: ${g.pass} ✅ pass, ${g.fail} ❌ fail, ${g.inconclusive} ⚠️ inconclusive${expected === '' ? '' : `, ${expected} (.not held)`} · ` +
    `cells: ${s.accepted} accepted, ${s.failed} failed, ${s.blocked} blocked, ${s.pending} pending of ${s.planned} · ` +
    `matched pairs: ${s.matchedPairs}`
  )
}

/**
 * The PR comment: the marker, the headline, the gate table, the promotion verdict with numbered
 * reasons, any charts, then the board in `<details>`. When it would exceed `limit`, the board is
 * cut at a line with a note saying what was cut and where the full board is; the gate table is
 * never cut while the comment can hold it (only a table longer than the limit itself is, with a
 * note), and the reasons past what fits are counted, not dropped silently.
 * @example renderPrComment(await readIndex('evidence'), { boardLocation: 'the servegate-evidence artifact' })
 */
export function renderPrComment(index: EvidenceIndex, options: PrCommentOptions = {}): string {
  const limit = options.limit ?? GITHUB_COMMENT_LIMIT
  const where = options.boardLocation ?? 'README.md in the evidence directory'
  // The key charts above the fold, one per metric; the board below then leaves its own out.
  const keyCharts = (options.charts ?? mermaidCharts(index, { maxCharts: 1 })).trim()
  // The preemptions column only where an engine reported them: most runs without engine metrics stay as they were.
  const withPreemptions = reportsPreemptions(index.gates.map((g) => g.decision))
  const rows = gateRows(index, withPreemptions)
  const gateHead = withPreemptions ? [...GATE_HEAD, PREEMPTION_HEAD] : GATE_HEAD
  const gateTable = rows.length === 0 ? ['No gate was asserted.'] : table(gateHead, rows)
  const reasons = promotionLines(index)
  const head = (gates: readonly string[], verdict: readonly string[], charts: string) =>
    `${[PR_COMMENT_MARKER, headline(index), '', ...gates, '', ...verdict, ...(charts === '' ? [] : ['', charts])].join('\n')}\n\n`

  const open = '<details><summary>The full board: what was measured, pair checks, every table</summary>\n\n'
  const close = '\n\n</details>\n'
  const boardOf = (charts: string) => renderBoard(index, boardFiles(index), { charts: charts === '' ? undefined : '' })
  const cutNote = (kept: number, total: number) =>
    `\n\n… the board is cut here: ${total - kept} of its ${total} characters left out to stay within ` +
    `GitHub's ${limit}-character comment limit. The full board is ${where}.`
  // What the board's part needs at the least: the <details> around a cut note (and a closed fence).
  // (With the charts or without, whichever board is the longer: its length has the most digits.)
  const reserve = open.length + close.length + cutNote(0, Math.max(boardOf('').length, boardOf(keyCharts).length)).length + 8
  const fits = (text: string) => text.length + reserve <= limit
  const [verdict = '', ...listed] = reasons
  // Charts give way first (the board below keeps them), then reasons, counted; only a gate table
  // over the limit by itself loses its last rows.
  let charts = keyCharts
  let top = head(gateTable, reasons, charts)
  if (!fits(top)) {
    charts = ''
    top = head(gateTable, reasons, charts)
  }
  if (!fits(top))
    top = head(gateTable, [verdict, ...fitLines(listed, limit - reserve - head(gateTable, [verdict], '').length - 80, 'reason(s)')], '')
  if (!fits(top)) {
    const counted = [verdict, ...fitLines(listed, 0, 'reason(s)')]
    const budget = limit - reserve - head([], counted, '').length - 80
    top = head(fitLines(gateTable, budget, 'gate row(s); every gate is in the board'), counted, '')
  }
  const board = boardOf(charts)
  if (top.length + open.length + board.length + close.length <= limit) return `${top}${open}${board}${close}`
  const budget = limit - top.length - open.length - close.length - cutNote(0, board.length).length - 4
  // Whole lines, ending in one newline: a cut after a blank line keeps that line out too, so the
  // count in the note is of what is not shown.
  const kept = budget <= 0 ? '' : board.slice(0, board.lastIndexOf('\n', budget) + 1).replace(/\n+$/, '\n')
  // A cut inside a fenced block (a chart) would turn the note into code: close the fence first.
  const fence = kept.split('\n').filter((l) => l.startsWith('```')).length % 2 === 1 ? '\n```' : ''
  return `${top}${open}${kept.trimEnd()}${fence}${cutNote(kept.length, board.length)}${close}`
}

/** The lines that fit in `budget` characters, with a last line counting those left out. */
function fitLines(lines: readonly string[], budget: number, what: string): string[] {
  const kept: string[] = []
  let used = 0
  for (const line of lines) {
    if (used + line.length + 1 > budget) break
    kept.push(line)
    used += line.length + 1
  }
  if (kept.length === lines.length) return [...lines]
  return [...kept, ...(kept.length === 0 ? [] : ['']), `… and ${lines.length - kept.length} more ${what}.`]
}
