/**
 * The key charts as Mermaid `xychart-beta` blocks, which GitHub draws inline in a markdown board,
 * a PR comment or a job summary: per metric, each identity-matched accepted pair's candidate as a
 * share of its baseline. Pure text, no Vega: the board and the PR comment import it freely.
 */
import type { EvidenceIndex } from '../schema/evidence.ts'
import {
  type ChartSelection,
  chartSelection,
  DELTA_METRICS,
  type DeltaMetric,
  deltaText,
  type PairDelta,
  pairDeltas,
} from './chart-data.ts'
import { markdownText } from './markdown-text.ts'

/** Options of `mermaidCharts`. */
export interface MermaidOptions {
  /** The markdown heading level of each chart's heading. @default 3 */
  headingLevel?: number
  /** The most bars in one chart; more cells are split over several charts. @default 20 */
  maxBars?: number
  /** The most charts of one metric; pairs past them are counted, not charted. @default 3 */
  maxCharts?: number
  /** The most cells listed as not drawn; the rest are counted. @default 10 */
  maxListed?: number
}

/** Mermaid draws a bar from the bottom of the plot, never from 0 on a range below it: bars are candidate ÷ baseline in %, from 0. */
const PARITY_PCT = 100
/** The top of the bar axis, %: a bar above it is cut there (its label still carries its Δ%), so one outlier does not flatten the rest. */
const MAX_BAR_PCT = 300

/**
 * The decode, output-throughput and effective-prefill charts of the index as markdown: for
 * each metric a heading and a fenced `mermaid` block, a bar per identity-matched accepted pair
 * (the candidate as % of its baseline, a line at 100% for parity, each bar's label carrying its
 * Δ%), then the cells not drawn with their dispositions and reasons. Each bar names its cell: its
 * id, less the start every bar of the chart shares (which the chart's title names once), e.g.
 * `…-c4 +8.0%` under `cells qwen3-8b-summary-ctx1024-…`. Headings say what the Δ compares (the
 * arms' p50s), which is not the gate's own estimate. Empty when no pair has a figure to draw.
 * @example const markdown = mermaidCharts(index) // '### Decode tok/s p50 …\n\n```mermaid\nxychart-beta\n…'
 */
export function mermaidCharts(index: EvidenceIndex, options: MermaidOptions = {}): string {
  const level = '#'.repeat(options.headingLevel ?? 3)
  const limits = { maxBars: options.maxBars ?? 20, maxCharts: options.maxCharts ?? 3 }
  const selection = chartSelection(index)
  const perMetric = DELTA_METRICS.map((metric) => ({ metric, deltas: pairDeltas(selection, metric) }))
  if (perMetric.every(({ deltas }) => deltas.every((d) => d.deltaPct === null))) return ''
  const out: string[] = []
  for (const { metric, deltas } of perMetric) out.push(...metricCharts(metric, deltas, level, limits))
  const listed = notDrawnList(selection, options.maxListed ?? 10)
  if (listed !== '') out.push(listed)
  return `${out.join('\n\n')}\n`
}

/** One metric's heading, its charts (`maxBars` each, at most `maxCharts`) and the pairs left out or lacking the figure. */
function metricCharts(
  metric: DeltaMetric,
  deltas: readonly PairDelta[],
  level: string,
  limits: { maxBars: number; maxCharts: number },
): string[] {
  const drawable = deltas.filter((d) => d.deltaPct !== null && d.baseline !== null && d.candidate !== null)
  if (drawable.length === 0) return []
  const chunks: PairDelta[][] = []
  for (let i = 0; i < drawable.length; i += limits.maxBars) chunks.push(drawable.slice(i, i + limits.maxBars))
  const shown = chunks.slice(0, limits.maxCharts)
  const out = [
    `${level} ${metric.name}: candidate as % of baseline (the ${metric.estimator}; the gate table's Δ is each gate's own estimate)`,
  ]
  shown.forEach((chunk, i) => {
    const part = chunks.length > 1 ? ` (${i + 1} of ${shown.length})` : ''
    out.push(block(`${metric.name}, candidate as % of baseline${part}`, chunk))
  })
  const notes: string[] = []
  const cut = drawable.length - shown.flat().length
  if (cut > 0) notes.push(`${cut} more ${cut === 1 ? 'pair is' : 'pairs are'} not charted here; the page draws every one.`)
  if (shown.flat().some((d) => barPct(d) > MAX_BAR_PCT)) notes.push(`Bars above ${MAX_BAR_PCT}% are cut there; their labels carry the Δ%.`)
  const missing = deltas.filter((d) => !drawable.includes(d))
  if (missing.length > 0) notes.push(`No ${metric.short} figure for: ${markdownText(missing.map((d) => d.cell).join(', '))}.`)
  if (notes.length > 0) out.push(notes.join(' '))
  return out
}

/** Candidate ÷ baseline in %, one decimal; only for a pair with both figures. */
function barPct(d: PairDelta): number {
  return round1(((d.candidate as number) / (d.baseline as number)) * PARITY_PCT)
}

/** A fenced `xychart-beta` block: a bar per pair, candidate ÷ baseline in %, and the parity line. */
function block(title: string, deltas: readonly PairDelta[]): string {
  const values = deltas.map((d) => Math.min(MAX_BAR_PCT, barPct(d)))
  const top = Math.min(MAX_BAR_PCT, Math.ceil(Math.max(PARITY_PCT * 1.1, ...values.map((v) => v * 1.05)) / 10) * 10)
  const shared = sharedStart(deltas.map((d) => d.cell))
  const labels = deltas.map((d) => `${shared === '' ? d.cell : `…-${d.cell.slice(shared.length)}`} ${deltaText(d.deltaPct)}`)
  return [
    '```mermaid',
    'xychart-beta horizontal',
    `  title ${quoted(shared === '' ? title : `${title}, cells ${shared}…`)}`,
    `  x-axis [${labels.map(quoted).join(', ')}]`,
    `  y-axis ${quoted('% of baseline')} 0 --> ${top}`,
    `  bar [${values.join(', ')}]`,
    `  line [${values.map(() => PARITY_PCT).join(', ')}]`,
    '```',
  ].join('\n')
}

/**
 * The start, up to and with a dash, that every one of several ids shares and after which each has
 * more: `qwen3-8b-summary-` of `qwen3-8b-summary-ctx1024-c1` and `…-ctx8192-c4`; '' for one id or none shared.
 */
function sharedStart(ids: readonly string[]): string {
  if (ids.length < 2) return ''
  let shared = ids[0] as string
  for (const id of ids) while (!(id.startsWith(shared) && id.length > shared.length)) shared = shared.slice(0, -1)
  return shared.slice(0, shared.lastIndexOf('-') + 1)
}

/** The cells not drawn, with disposition and reason, at most `max` of them. */
function notDrawnList(selection: ChartSelection, max: number): string {
  const { notDrawn } = selection
  if (notDrawn.length === 0) return ''
  const lines = notDrawn.slice(0, max).map((c) => `- ${markdownText(`${c.cell} (${c.disposition}): ${clip(c.reason, 160)}`)}`)
  const more = notDrawn.length > max ? [`- and ${notDrawn.length - max} more (see the cells table)`] : []
  return [`Not drawn (${notDrawn.length} ${notDrawn.length === 1 ? 'cell' : 'cells'}):`, ...lines, ...more].join('\n')
}

function round1(x: number): number {
  return Math.round(x * 10) / 10
}

function clip(text: string, max: number): string {
  return text.length <= max ? text : `${text.slice(0, max - 1)}…`
}

/**
 * A Mermaid string: its grammar has no escape inside quotes, so a double quote becomes a single
 * one; a backtick (which could close the fence) becomes a single quote; `<` (which could open a
 * tag where the chart's text is drawn as HTML) becomes `‹`; line breaks become spaces.
 */
function quoted(text: string): string {
  return `"${text.replace(/["`]/g, "'").replace(/</g, '‹').replace(/\s+/g, ' ')}"`
}
