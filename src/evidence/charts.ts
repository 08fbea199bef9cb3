/**
 * The evidence charts: Vega-Lite specs built from the evidence index and drawn to SVG
 * headlessly (no browser, no canvas). The same index gives byte-identical SVG on every machine.
 * Which cells are drawn is `chartSelection` (chart-data.ts): identity-matched accepted pairs and
 * accepted single-arm cells, one mark per cell; every other cell is listed with its reason.
 */
import { basename } from 'node:path'
import * as vega from 'vega'
import { compile, type TopLevelSpec } from 'vega-lite'
import type { ArmSummary, EvidenceCell, EvidenceHistory, EvidenceIndex } from '../schema/evidence.ts'
import { fileSafe, sha256 } from './build.ts'
import {
  armsOf,
  armValue,
  type CellLabel,
  type ChartSelection,
  cellLabels,
  chartSelection,
  DELTA_METRICS,
  type DeltaMetric,
  deltaText,
  type DrawnCell,
  type NotDrawnCell,
  pairDeltas,
} from './chart-data.ts'
import { testbedText, TREND_FILE } from './history-trend-text.ts'

/** One drawn chart: its path relative to the evidence directory, its title and its SVG markup. */
export interface Chart {
  /** e.g. `charts/decode-delta-heatmap.svg`, or `charts/cells/<cell>.svg` for a cell's own chart. */
  file: string
  title: string
  svg: string
  /** A cell's own chart (its distributions): the cell's id; absent on the charts of the whole index. */
  cell?: string
  /** The charts of the whole index: the ids of the cells drawn in this one, in chart order. */
  cells?: string[]
  /** The charts of the whole index: every cell the charts leave out, with its disposition and why (the same list on each). */
  notDrawn?: NotDrawnCell[]
}

/** A chart before it is drawn: its spec (null: nothing to show, drawn as "no data") and what it shows. */
export interface ChartSpec {
  file: string
  title: string
  spec: TopLevelSpec | null
  cell?: string
  cells?: string[]
}

/** A chart of the whole index: where it goes, what it is called, how it is drawn from the selection. */
interface ChartDefinition {
  file: string
  title: string
  draw: (selection: ChartSelection, title: string) => { spec: TopLevelSpec; cells: string[] } | null
}

const FONT = 'DejaVu Sans, Helvetica, Arial, sans-serif'
const PANEL_WIDTH = 260
const PANEL_HEIGHT = 180
/** Panels per row in a chart of several ladders. */
const PANEL_COLUMNS = 2
/** A heatmap square: wide enough for `-100.0%` at the label's font size (Vega estimates 0.8 em a character). */
const SQUARE_WIDTH = 76
const SQUARE_HEIGHT = 44
const SQUARE_FONT_SIZE = 11
/** How far a row label may reach left of a heatmap before it is cut with an ellipsis, px. */
const ROW_LABEL_LIMIT = 300
/** The least room a panel header has before it is cut with an ellipsis, px. */
const HEADER_LIMIT = 480
/** The most characters of a twin cell's id on one line of its row label; a longer id wraps at its dashes. */
const ID_LINE = 28
const LINE_SEPARATOR = '\n'
/** The smallest half-range of the delta colour scale, %, so a 1% difference is not painted as a rout. */
const MIN_DELTA_SPREAD_PCT = 10
/** The largest, so one outlier does not wash out every other square; beyond it the colour is the scale's end. */
const MAX_DELTA_SPREAD_PCT = 50
/** The nearest-rank percentiles the index keeps per arm, as points of a step CDF. */
const CDF_POINTS = [
  { percentile: 'p50', share: 0.5 },
  { percentile: 'p95', share: 0.95 },
  { percentile: 'p99', share: 0.99 },
] as const satisfies readonly { percentile: keyof ArmSummary['timings']['ttftMs']; share: number }[]
const LATENCIES = [
  { metric: 'TTFT', timing: 'ttftMs' },
  { metric: 'ITL', timing: 'itlMs' },
] as const satisfies readonly { metric: string; timing: keyof ArmSummary['timings'] }[]

const CONFIG = {
  font: FONT,
  background: 'white',
  title: { anchor: 'start', fontSize: 14, subtitleFontSize: 11, subtitleColor: '#555' },
  axis: { labelFontSize: 11, titleFontSize: 11 },
  // Vega's default drops every other label only when neighbours overlap by its own test; greedy
  // with a gap drops any label that would touch the one before it.
  axisQuantitative: { labelOverlap: 'greedy', labelSeparation: 4 },
  legend: { labelFontSize: 11, titleFontSize: 11, labelLimit: 260 },
  header: { labelFontSize: 11, labelLimit: PANEL_WIDTH },
} as const

// Vega measures text with node-canvas when it is installed and estimates widths otherwise, and
// text widths move labels and sizes: pin the estimate so every machine draws the same bytes.
// (vega exports textMetrics from vega-scenegraph; its typings leave it out.)
;(vega as unknown as { textMetrics: { canvas(use: boolean): void } }).textMetrics.canvas(false)

const HEATMAPS: readonly ChartDefinition[] = DELTA_METRICS.map((metric) => ({
  file: `charts/${metric.key}-delta-heatmap.svg`,
  title: `${metric.name}: candidate vs baseline, Δ% (${metric.estimator}) by context × concurrency`,
  draw: (selection: ChartSelection, title: string) => deltaHeatmap(selection, metric, title),
}))

const CHARTS: readonly ChartDefinition[] = [
  ...HEATMAPS,
  {
    file: 'charts/latency-by-rate.svg',
    title: 'Open loop: TTFT and ITL p50, p95 and p99 by offered rate',
    draw: latencyByRate,
  },
  {
    file: 'charts/goodput-by-rate.svg',
    title: 'Open loop: share of requests meeting every SLO by offered rate',
    draw: goodByRate,
  },
]

/**
 * The specs of the evidence charts: always the same five charts of the whole index (a chart
 * with nothing to show has a null spec) — Δ% heatmaps of decode, output throughput and
 * effective prefill by context × concurrency (closed-loop matched pairs), TTFT and ITL
 * percentiles by offered rate and the good share by offered rate (open-loop cells, a panel per
 * ladder) — then one chart per drawn cell, its TTFT and ITL distributions.
 * @example for (const { file, spec } of chartSpecs(index)) console.log(file, spec === null ? 'no data' : 'drawn')
 */
export function chartSpecs(index: EvidenceIndex): ChartSpec[] {
  const selection = chartSelection(index)
  const whole = CHARTS.map((definition): ChartSpec => {
    const drawn = definition.draw(selection, definition.title)
    return drawn === null
      ? { file: definition.file, title: noDataTitle(definition.title), spec: null, cells: [] }
      : { file: definition.file, title: definition.title, spec: drawn.spec, cells: drawn.cells }
  })
  const history = index.history
  const trend: ChartSpec[] =
    history === null || history.trend.length === 0 ? [] : [{ file: TREND_FILE, title: TREND_TITLE, spec: trendSpec(history), cells: [] }]
  const files = new Set<string>()
  const perCell = selection.drawn.map((cell): ChartSpec => {
    const name = cellFileName(cell.id)
    let file = `charts/cells/${name}.svg`
    for (let k = 2; files.has(file); k++) file = `charts/cells/${name}-${k}.svg`
    files.add(file)
    const spec = distributionSpec(cell)
    return { file, title: spec === null ? noDataTitle(distributionTitle(cell)) : distributionTitle(cell), spec, cell: cell.id }
  })
  return [...whole, ...trend, ...perCell]
}

/** A cell id as a file name: `fileSafe`, and past 96 characters its start and a hash of the whole id (names stay under 255 bytes). */
function cellFileName(id: string): string {
  const safe = fileSafe(id)
  return safe.length <= MAX_FILE_NAME ? safe : `${safe.slice(0, MAX_FILE_NAME - 13)}-${sha256(id).slice(0, 12)}`
}

const MAX_FILE_NAME = 96

/**
 * Draws the evidence charts (`chartSpecs`) to SVG. The charts of the whole index carry the cells
 * drawn in each and the cells not drawn, with their dispositions and reasons, for the page to list.
 * @example for (const chart of await renderCharts(index)) await writeFile(join(dir, chart.file), chart.svg)
 */
export async function renderCharts(index: EvidenceIndex): Promise<Chart[]> {
  const { notDrawn } = chartSelection(index)
  const charts: Chart[] = []
  for (const c of chartSpecs(index)) {
    const svg = await toSvg(c.spec ?? noDataSpec(c.title), basename(c.file, '.svg'))
    const { file, title, cell, cells } = c
    charts.push(cell === undefined ? { file, title, svg, cells: cells ?? [], notDrawn } : { file, title, svg, cell })
  }
  return charts
}

/**
 * One cell's own chart, for @vitest/ui and the page's drill-down: its TTFT and ITL
 * distributions per arm (step CDFs through the percentiles the index keeps). Whatever arms
 * measured are drawn, so a failed cell shows the arm that ran; a cell without measured requests
 * gets a "no data" chart.
 * @example await cellChart(index.cells[0])
 */
export async function cellChart(cell: EvidenceCell): Promise<string> {
  const spec = distributionSpec(cell)
  return toSvg(spec ?? noDataSpec(noDataTitle(distributionTitle(cell))), 'cell')
}

function noDataTitle(title: string): string {
  return `${title} (no data)`
}

function noDataSpec(title: string): TopLevelSpec {
  return {
    title,
    width: PANEL_WIDTH,
    height: 60,
    data: { values: [{}] },
    mark: { type: 'text', fontSize: 14, color: '#777' },
    encoding: { text: { value: 'no data' } },
    config: CONFIG,
  }
}

let renders: Promise<unknown> = Promise.resolve()

/**
 * Draws a Vega-Lite spec to SVG. Vega numbers gradients and clip paths with process-wide
 * counters, so renders run one at a time, each with the counters reset: a chart's bytes never
 * depend on what was drawn before it. Those ids are then prefixed with `scope`, so that several
 * charts inlined in one page never point at each other's gradients.
 */
function toSvg(spec: TopLevelSpec, scope: string): Promise<string> {
  const svg = renders.then(() => drawSvg(spec)).then((markup) => markup.replace(DEF_ID, `$1${scope}-$2`))
  renders = svg.catch(() => undefined)
  return svg
}

/** A gradient or clip-path id where Vega's SVG defines or references it. */
const DEF_ID = /(id="|url\(#)(gradient_\d+|clip\d+)/g

async function drawSvg(spec: TopLevelSpec): Promise<string> {
  vega.resetSVGDefIds()
  const view = new vega.View(vega.parse(compile(spec).spec), { renderer: 'none' })
  try {
    return await view.toSVG()
  } finally {
    view.finalize()
  }
}

/** One axis-aligned box of drawn text, in the chart's pixels. */
export interface TextBox {
  text: string
  x1: number
  y1: number
  x2: number
  y2: number
}

/**
 * The boxes of every text Vega lays out for a spec (axis and legend labels, titles, headers,
 * square labels), from its scenegraph: what a test checks for overlapping labels without a browser.
 * @example const boxes = await textBoxes(chartSpecs(index)[0].spec)
 */
export async function textBoxes(spec: TopLevelSpec): Promise<TextBox[]> {
  const view = new vega.View(vega.parse(compile(spec).spec), { renderer: 'none' })
  try {
    await view.runAsync()
    const boxes: TextBox[] = []
    walkText((view.scenegraph() as unknown as { root: SceneNode }).root, 0, 0, boxes)
    return boxes
  } finally {
    view.finalize()
  }
}

/** The parts of a Vega scenegraph node that `textBoxes` reads (vega's typings leave the scenegraph untyped). */
interface SceneNode {
  marktype?: string
  items?: SceneNode[]
  x?: number
  y?: number
  text?: unknown
  /** 0 on a label Vega hid because it would overlap another. */
  opacity?: number
  bounds?: { x1: number; y1: number; x2: number; y2: number }
}

/** Item bounds are relative to the enclosing group: each group's x and y move its children. */
function walkText(node: SceneNode, dx: number, dy: number, out: TextBox[]): void {
  for (const item of node.items ?? []) {
    if (node.marktype === 'text') {
      const text = Array.isArray(item.text) ? item.text.join(' ') : String(item.text ?? '')
      const b = item.bounds
      if (text.trim() !== '' && item.opacity !== 0 && b !== undefined && b.x2 > b.x1)
        out.push({ text, x1: b.x1 + dx, y1: b.y1 + dy, x2: b.x2 + dx, y2: b.y2 + dy })
    } else if (node.marktype === 'group') {
      walkText(item, dx + (item.x ?? 0), dy + (item.y ?? 0), out)
    } else {
      walkText(item, dx, dy, out)
    }
  }
}

/**
 * A heatmap of one metric's candidate-against-baseline Δ%: a panel per engine pair and workload,
 * in it a row per context and a column per concurrency, one square per closed-loop matched pair,
 * labelled with its Δ%. Cells that would share a square (same pair, workload, context and
 * concurrency, e.g. from two spec files) get rows of their own, named by the end of their ids.
 */
function deltaHeatmap(selection: ChartSelection, metric: DeltaMetric, title: string): { spec: TopLevelSpec; cells: string[] } | null {
  const deltas = pairDeltas(selection, metric, 'closed')
  if (deltas.length === 0) return null
  const spread = Math.min(MAX_DELTA_SPREAD_PCT, Math.max(MIN_DELTA_SPREAD_PCT, ...deltas.map((d) => Math.abs(d.deltaPct ?? 0))))
  const rows = deltas.map((d) => ({
    cell: d.cell,
    series: d.seriesLines.join(LINE_SEPARATOR),
    row: d.twin === null ? d.context : `${d.context}${LINE_SEPARATOR}${idLines(d.twin).join(LINE_SEPARATOR)}`,
    concurrency: d.concurrency,
    deltaPct: d.deltaPct,
    label: deltaText(d.deltaPct),
    strong: d.deltaPct !== null && Math.abs(d.deltaPct) > 0.6 * spread,
  }))
  const columns = new Set(rows.map((r) => r.concurrency)).size
  const notDrawn = selection.notDrawn.length
  return {
    cells: deltas.map((d) => d.cell),
    spec: {
      title: {
        text: title,
        subtitle: [
          `(candidate ÷ baseline − 1) in %, the ${metric.estimator}, higher is better; each arm at the median of its launches`,
          "colour is the direction of the change, not a verdict: the gates decide (the gate table's Δ is each gate's own estimate)",
          `identity-matched accepted closed-loop pairs only, one square per cell${notDrawn > 0 ? `; ${notDrawn} other cells not drawn` : ''}`,
        ],
      },
      data: { values: rows },
      vconcat: [...new Set(rows.map((r) => r.series))].map((series) => ({
        title: {
          text: series.split(LINE_SEPARATOR),
          anchor: 'start',
          fontSize: 11,
          fontWeight: 'normal',
          limit: Math.max(HEADER_LIMIT, columns * SQUARE_WIDTH),
        },
        transform: [{ filter: { field: 'series', equal: series } }],
        width: { step: SQUARE_WIDTH },
        height: { step: SQUARE_HEIGHT },
        encoding: {
          x: { field: 'concurrency', type: 'ordinal', title: 'concurrency', axis: { labelAngle: 0, orient: 'top' } },
          y: {
            field: 'row',
            type: 'nominal',
            title: null,
            sort: null,
            axis: { labelExpr: `split(datum.label, '\\n')`, labelLimit: ROW_LABEL_LIMIT },
          },
        },
        layer: [
          { transform: [{ filter: 'datum.deltaPct === null' }], mark: { type: 'rect', color: '#e5e5e5' } },
          {
            transform: [{ filter: 'datum.deltaPct !== null' }],
            mark: 'rect',
            encoding: {
              color: {
                field: 'deltaPct',
                type: 'quantitative',
                // Brown to blue-green, not red to blue: the colour says which way the figure moved, never pass or fail.
                title: ['Δ%: direction,', 'not a verdict'],
                scale: { scheme: 'brownbluegreen', domain: [-spread, spread], domainMid: 0, clamp: true },
                legend: { format: '+.0f' },
              },
            },
          },
          {
            mark: { type: 'text', fontSize: SQUARE_FONT_SIZE },
            encoding: {
              text: { field: 'label', type: 'nominal' },
              color: { condition: { test: 'datum.strong', value: 'white' }, value: 'black' },
            },
          },
        ],
      })),
      resolve: { scale: { x: 'shared', y: 'independent', color: 'shared' } },
      config: CONFIG,
    } as TopLevelSpec,
  }
}

/**
 * A twin cell's id on at most two lines of `ID_LINE` characters, broken after a dash where it can:
 * whole when it fits, else its end (`…`), where ids that share a long start differ.
 */
function idLines(id: string): string[] {
  const text = id.length <= 2 * ID_LINE ? id : `…${id.slice(-(2 * ID_LINE - 1))}`
  const lines: string[] = []
  for (const part of text.split(/(?<=-)/)) {
    const last = lines.length - 1
    if (last >= 0 && (lines[last] as string).length + part.length <= ID_LINE) lines[last] += part
    else lines.push(part)
  }
  return lines.length <= 2 ? lines : [text.slice(0, ID_LINE), text.slice(ID_LINE)]
}

/** An arm as a legend names it, e.g. `candidate · photon`. */
function armName(arm: ArmSummary['arm'], engine: string): string {
  return arm === 'cell' ? engine : `${arm} · ${engine}`
}

/** The drawn open-loop cells with an offered rate, each with the panel (its ladder, or its series and context) it is drawn in. */
function rateCells(selection: ChartSelection): { cell: DrawnCell; group: string; rate: number }[] {
  const labels = cellLabels(selection.drawn)
  return selection.drawn.flatMap((cell) => {
    const rate = cell.plan.arrivalRatePerS
    if (cell.plan.arrival === 'closed' || rate === null) return []
    const label = labels.get(cell.id) as CellLabel
    return [{ cell, group: cell.ladder ?? `${label.series} · ${label.context}`, rate }]
  })
}

/** A chart of the rows with a panel per value of `panel`, PANEL_COLUMNS to a row, each drawn by `inner` at the panel size. */
function panels(
  title: string | { text: string; subtitle: string[] },
  rows: readonly object[],
  inner: Record<string, unknown>,
): TopLevelSpec {
  return {
    title,
    data: { values: [...rows] },
    facet: { field: 'panel', type: 'nominal', title: null, sort: null, header: { labelExpr: `split(datum.label, '\\n')` } },
    columns: PANEL_COLUMNS,
    spec: { width: PANEL_WIDTH, height: PANEL_HEIGHT, ...inner },
    resolve: { scale: { y: 'independent', x: 'independent' } },
    config: CONFIG,
  } as TopLevelSpec
}

/** TTFT and ITL p50, p95 and p99 by offered rate: a line per arm and percentile, a panel per ladder and metric. */
function latencyByRate(selection: ChartSelection, title: string): { spec: TopLevelSpec; cells: string[] } | null {
  const rows = rateCells(selection).flatMap(({ cell, group, rate }) =>
    LATENCIES.flatMap(({ metric, timing }, m) =>
      armsOf(cell).flatMap((arm) =>
        CDF_POINTS.flatMap(({ percentile }) => {
          const valueMs = armValue(arm, (a) => a.timings[timing][percentile])
          const panel = `${group}${LINE_SEPARATOR}${metric} (ms)`
          return valueMs === null ? [] : [{ cell: cell.id, group, m, panel, arm: armName(arm.arm, arm.engine), percentile, rate, valueMs }]
        }),
      ),
    ),
  )
  if (rows.length === 0) return null
  rows.sort(
    (a, b) => compare(a.group, b.group) || a.m - b.m || compare(a.arm, b.arm) || compare(a.percentile, b.percentile) || a.rate - b.rate,
  )
  return {
    cells: [...new Set(rows.map((r) => r.cell))],
    spec: panels(
      { text: title, subtitle: ['nearest-rank percentiles of each arm, at the median of its launches; a panel per ladder and metric'] },
      rows,
      {
        mark: { type: 'line', point: { filled: true, size: 24 } },
        encoding: {
          x: { field: 'rate', type: 'quantitative', title: 'offered rate (req/s)', scale: { zero: false } },
          y: { field: 'valueMs', type: 'quantitative', title: 'ms' },
          color: { field: 'arm', type: 'nominal', title: 'arm', scale: { domain: [...new Set(rows.map((r) => r.arm))].sort(armFirst) } },
          strokeDash: {
            field: 'percentile',
            type: 'nominal',
            title: 'percentile',
            scale: { domain: CDF_POINTS.map((p) => p.percentile) },
            legend: { symbolType: 'stroke', symbolStrokeWidth: 2 },
          },
        },
      },
    ),
  }
}

const TREND_TITLE = 'Trend of main: each gated figure across the runs of main, this run marked'

/**
 * Each gated figure of this run across the runs of main on its testbed, a panel per cell's arm,
 * metric and testbed: main's runs oldest to latest as a line, each with its 95% interval as a
 * bar where known, and this run as a diamond (on main's last run when this run was appended).
 */
function trendSpec(history: EvidenceHistory): TopLevelSpec {
  const rows = history.trend.flatMap((t) => {
    const panel = `${t.cell} · ${t.metric}${LINE_SEPARATOR}${testbedText(t.testbed)}`
    const main = t.main.map((p, i) => ({ panel, run: i + 1, series: 'main', value: p.value, low: p.low, high: p.high }))
    const at = history.appended ? t.main.length : t.main.length + 1
    const current = t.current === null ? [] : [{ panel, run: at, series: 'this run', ...pick(t.current) }]
    return [...main, ...current]
  })
  // Orange, not red: on the page red marks only what blocks promotion.
  const series = { field: 'series', type: 'nominal', title: null, scale: { domain: ['main', 'this run'], range: ['#4c78a8', '#f58518'] } }
  return panels(
    { text: TREND_TITLE, subtitle: ['bars: 95% interval of a run (value × exp(±1.96 × its relative standard error)), where known'] },
    rows,
    {
      encoding: {
        x: { field: 'run', type: 'quantitative', title: 'run of main (oldest → latest)', axis: { tickMinStep: 1, format: 'd' } },
        color: series,
      },
      layer: [
        { mark: { type: 'rule' }, encoding: { y: { field: 'low', type: 'quantitative' }, y2: { field: 'high' } } },
        {
          transform: [{ filter: "datum.series === 'main'" }],
          mark: { type: 'line', point: { filled: true, size: 24 } },
          encoding: { y: { field: 'value', type: 'quantitative', title: null, scale: { zero: false } } },
        },
        {
          transform: [{ filter: "datum.series === 'this run'" }],
          mark: { type: 'point', shape: 'diamond', filled: true, size: 90 },
          encoding: { y: { field: 'value', type: 'quantitative' } },
        },
      ],
    },
  )
}

function pick(p: { value: number; low: number | null; high: number | null }): { value: number; low: number | null; high: number | null } {
  return { value: p.value, low: p.low, high: p.high }
}

/** Baselines first, so a suite's baseline keeps the first colour. */
function armFirst(a: string, b: string): number {
  const rank = (s: string) => (s.startsWith('baseline') ? 0 : s.startsWith('candidate') ? 1 : 2)
  return rank(a) - rank(b) || compare(a, b)
}

function compare(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0
}

/** The good share (requests meeting every SLO) by offered rate, a line per arm, its Wilson interval as a bar, a panel per ladder. */
function goodByRate(selection: ChartSelection, title: string): { spec: TopLevelSpec; cells: string[] } | null {
  const rows = rateCells(selection).flatMap(({ cell, group, rate }) =>
    armsOf(cell).flatMap(({ arm, engine, launches }) => {
      const good = armValue({ arm, engine, launches }, (a) => a.load.goodFraction)
      if (good === null) return []
      const one = launches.length === 1 ? launches[0] : undefined
      return [
        {
          cell: cell.id,
          panel: group,
          arm: armName(arm, engine),
          rate,
          good,
          low: one?.load.goodFractionLow ?? null,
          high: one?.load.goodFractionHigh ?? null,
        },
      ]
    }),
  )
  if (rows.length === 0) return null
  rows.sort((a, b) => compare(a.panel, b.panel) || compare(a.arm, b.arm) || a.rate - b.rate)
  return {
    cells: [...new Set(rows.map((r) => r.cell))],
    spec: panels(title, rows, {
      encoding: {
        x: { field: 'rate', type: 'quantitative', title: 'offered rate (req/s)', scale: { zero: false } },
        color: { field: 'arm', type: 'nominal', title: 'arm', scale: { domain: [...new Set(rows.map((r) => r.arm))].sort(armFirst) } },
      },
      layer: [
        { mark: { type: 'rule' }, encoding: { y: { field: 'low', type: 'quantitative' }, y2: { field: 'high' } } },
        {
          mark: { type: 'line', point: true },
          encoding: {
            y: {
              field: 'good',
              type: 'quantitative',
              title: 'good share (meets every SLO)',
              scale: { domain: [0, 1] },
              axis: { format: '%' },
            },
          },
        },
      ],
    }),
  }
}

function distributionTitle(cell: Pick<EvidenceCell, 'id'>): string {
  return `${cell.id}: TTFT and ITL distributions`
}

/**
 * A cell's TTFT and ITL distributions per arm as step CDFs through the nearest-rank p50, p95 and
 * p99 the index keeps (each at the median of the arm's launches): a lower bound of the share of
 * requests (ITL: of gaps) at or under each value, starting at 50%. Null when no arm measured.
 */
function distributionSpec(cell: Pick<EvidenceCell, 'id' | 'arms' | 'engines'>): TopLevelSpec | null {
  const rows = LATENCIES.flatMap(({ metric, timing }) =>
    armsOf(cell).flatMap((launches) => {
      const points = CDF_POINTS.flatMap(({ percentile, share }) => {
        const valueMs = armValue(launches, (a) => a.timings[timing][percentile])
        return valueMs === null
          ? []
          : [{ panel: `${metric} (ms)`, arm: armName(launches.arm, launches.engine), percentile, share, valueMs }]
      })
      return points
    }),
  )
  if (rows.length === 0) return null
  return {
    title: {
      text: distributionTitle(cell),
      subtitle: [
        'step CDF through the nearest-rank p50, p95 and p99 the index keeps per arm (median of launches),',
        'not every request: it starts at 50%, and between two points it is a lower bound',
      ],
    },
    data: { values: rows },
    facet: { field: 'panel', type: 'nominal', title: null, sort: LATENCIES.map((l) => `${l.metric} (ms)`) },
    columns: PANEL_COLUMNS,
    spec: {
      width: PANEL_WIDTH,
      height: PANEL_HEIGHT - 40,
      mark: { type: 'line', interpolate: 'step-after', point: true },
      encoding: {
        x: { field: 'valueMs', type: 'quantitative', title: 'ms', scale: { zero: false } },
        y: { field: 'share', type: 'quantitative', title: 'share at or under', scale: { domain: [0, 1] }, axis: { format: '%' } },
        color: {
          field: 'arm',
          type: 'nominal',
          title: 'arm',
          scale: { domain: [...new Set(rows.map((r) => r.arm))].sort(armFirst) },
        },
        order: { field: 'share', type: 'quantitative' },
      },
    },
    resolve: { scale: { x: 'independent' } },
    config: CONFIG,
  } as TopLevelSpec
}
