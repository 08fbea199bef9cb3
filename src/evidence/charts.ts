/**
 * The evidence charts: Vega-Lite specs built from the evidence index and drawn to SVG
 * headlessly (no browser, no canvas). The same index gives byte-identical SVG on every machine.
 */
import { basename } from 'node:path'
import * as vega from 'vega'
import { compile, type TopLevelSpec } from 'vega-lite'
import { nearestRank } from '../metrics/distribution.ts'
import type { ArmSummary, CellPlanSummary, EvidenceCell, EvidenceIndex } from '../schema/evidence.ts'

/** One drawn chart: its path relative to the evidence directory, its title and its SVG markup. */
export interface Chart {
  /** e.g. `charts/throughput-by-concurrency.svg` */
  file: string
  title: string
  svg: string
}

/** One arm of one plotted cell, its launches reduced to their median (never the best one). */
interface ArmPoint {
  workload: string
  arm: ArmSummary['arm']
  engine: string
  concurrency: number
  outputTokPerS: number | null
  decodeTokPerSP50: number | null
  prefillTokPerSP50: number | null
}

/** A chart of the evidence page: where it goes, what it is called, how it is drawn. */
interface ChartDefinition {
  file: string
  title: string
  /** The spec of the chart, or null when the index has nothing for it to show. */
  spec: (index: EvidenceIndex, title: string) => TopLevelSpec | null
}

const FONT = 'DejaVu Sans, Helvetica, Arial, sans-serif'
const FACET_WIDTH = 260
const FACET_HEIGHT = 200
const ARM_ORDER: readonly ArmSummary['arm'][] = ['baseline', 'candidate', 'cell']
const ROW_SEPARATOR = ' · '
/** The smallest half-range of the ratio colour scale, so a 1% difference is not painted as a rout. */
const MIN_RATIO_SPREAD = 0.1

const LATENCIES = [
  { metric: 'TTFT', timing: 'ttftMs' },
  { metric: 'TPOT', timing: 'tpotMs' },
] as const satisfies readonly { metric: string; timing: keyof ArmSummary['timings'] }[]

const CONFIG = {
  font: FONT,
  background: 'white',
  title: { anchor: 'start', fontSize: 14 },
  axis: { labelFontSize: 11, titleFontSize: 11 },
  legend: { labelFontSize: 11, titleFontSize: 11, labelLimit: 260 },
} as const

// Vega measures text with node-canvas when it is installed and estimates widths otherwise, and
// text widths move labels and sizes: pin the estimate so every machine draws the same bytes.
// (vega exports textMetrics from vega-scenegraph; its typings leave it out.)
;(vega as unknown as { textMetrics: { canvas(use: boolean): void } }).textMetrics.canvas(false)

const CHARTS: readonly ChartDefinition[] = [
  {
    file: 'charts/throughput-by-concurrency.svg',
    title: 'Output throughput by concurrency',
    spec: (index, title) => byConcurrency(armPoints(index), 'outputTokPerS', 'output tok/s', title),
  },
  {
    file: 'charts/decode-ratio-heatmap.svg',
    title: 'Decode tok/s p50, candidate ÷ baseline',
    spec: ratioHeatmap,
  },
  {
    file: 'charts/prefill-by-concurrency.svg',
    title: 'Effective prefill tok/s p50 by concurrency',
    spec: (index, title) => byConcurrency(armPoints(index), 'prefillTokPerSP50', 'effective prefill tok/s (p50)', title),
  },
  {
    file: 'charts/serving-tradeoff.svg',
    title: 'Serving trade-off: decode tok/s per user against aggregate output tok/s',
    spec: (index, title) => tradeOff(armPoints(index), title),
  },
  {
    file: 'charts/goodput-by-rate.svg',
    title: 'Open loop: share of requests meeting every SLO by offered rate',
    spec: goodByRate,
  },
]

/**
 * Draws the evidence charts, always the same five files (a chart with nothing to show is drawn
 * with a "no data" title): output throughput by concurrency per arm, the candidate ÷ baseline
 * ratio of median decode tok/s as a heatmap, effective prefill tok/s by concurrency, the
 * serving trade-off (per-user decode against aggregate throughput) — closed-loop cells — and
 * the good share by offered rate of open-loop cells (sweeps, capacity probes), a panel per
 * ladder. Arms of accepted and failed cells are plotted; the ratio heatmap compares accepted
 * pairs only.
 * @example for (const chart of await renderCharts(index)) await writeFile(join(dir, chart.file), chart.svg)
 */
export async function renderCharts(index: EvidenceIndex): Promise<Chart[]> {
  const charts: Chart[] = []
  for (const definition of CHARTS) {
    const spec = definition.spec(index, definition.title)
    const title = spec === null ? noDataTitle(definition.title) : definition.title
    charts.push({ file: definition.file, title, svg: await toSvg(spec ?? noDataSpec(title), basename(definition.file, '.svg')) })
  }
  return charts
}

/**
 * One small chart of one cell for @vitest/ui: p50 and p95 of TTFT and TPOT (ms) per arm.
 * A cell without measured requests gets a "no data" chart.
 * @example await cellChart(index.cells[0])
 */
export async function cellChart(cell: EvidenceCell): Promise<string> {
  const rows = mergeLaunches(cell).flatMap(({ engine, arms }) =>
    LATENCIES.flatMap(({ metric, timing }) =>
      (['p50', 'p95'] as const).flatMap((percentile) => {
        const value = medianOf(arms.map((a) => a.timings[timing][percentile]))
        return value === null ? [] : [{ engine, metric, percentile, value }]
      }),
    ),
  )
  if (rows.length === 0) return toSvg(noDataSpec(noDataTitle(cell.id)), 'cell')
  return toSvg(
    {
      title: { text: cell.id, fontSize: 12 },
      data: { values: rows },
      facet: { column: { field: 'metric', type: 'nominal', title: null, sort: LATENCIES.map((l) => l.metric) } },
      resolve: { scale: { y: 'independent' } },
      spec: {
        width: 150,
        height: 120,
        mark: 'bar',
        encoding: {
          x: { field: 'engine', type: 'nominal', title: null, sort: null, axis: { labelAngle: -20 } },
          xOffset: { field: 'percentile', type: 'nominal' },
          y: { field: 'value', type: 'quantitative', title: 'ms' },
          color: {
            field: 'percentile',
            type: 'nominal',
            title: 'percentile',
            scale: { domain: ['p50', 'p95'], range: ['#9ecae9', '#2f6b9a'] },
          },
        },
      },
      config: CONFIG,
    },
    'cell',
  )
}

function noDataTitle(title: string): string {
  return `${title} (no data)`
}

function noDataSpec(title: string): TopLevelSpec {
  return {
    title,
    width: FACET_WIDTH,
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

/** Median (nearest-rank) of the values present; null when none is. */
function medianOf(values: readonly (number | null)[]): number | null {
  const present = values.filter((v): v is number => v !== null).sort((a, b) => a - b)
  return present.length === 0 ? null : nearestRank(present, 50)
}

function workloadLabel(plan: CellPlanSummary): string {
  return `${plan.workload} ctx${plan.promptTokens}`
}

/**
 * The launches of each arm of a cell, grouped, in arm order (baseline, candidate, cell), named
 * by the spec's engine name (two arms of one engine kind are still two series).
 */
function mergeLaunches(cell: Pick<EvidenceCell, 'arms' | 'engines'>): { arm: ArmSummary['arm']; engine: string; arms: ArmSummary[] }[] {
  return ARM_ORDER.flatMap((arm) => {
    const launches = cell.arms.filter((a) => a.arm === arm)
    const first = launches[0]
    return first === undefined ? [] : [{ arm, engine: cell.engines[arm] ?? first.engine ?? arm, arms: launches }]
  })
}

/** Cells whose arms are plotted: accepted or failed, with a plan and arm summaries; closed-loop ones, or open-loop ones. */
function plottedCells(index: EvidenceIndex, loop: 'closed' | 'open' = 'closed'): (EvidenceCell & { plan: CellPlanSummary })[] {
  return index.cells.filter(
    (c): c is EvidenceCell & { plan: CellPlanSummary } =>
      (c.disposition === 'accepted' || c.disposition === 'failed') &&
      c.plan !== null &&
      c.arms.length > 0 &&
      (c.plan.arrival === 'closed') === (loop === 'closed'),
  )
}

/** One arm of an open-loop cell at its offered rate: the good share with its Wilson interval. */
interface RatePoint {
  group: string
  engine: string
  rate: number
  good: number
  low: number | null
  high: number | null
}

/** Every arm of every plotted open-loop cell with a rate and a good share, grouped by ladder (or workload). */
function ratePoints(index: EvidenceIndex): RatePoint[] {
  const points = plottedCells(index, 'open').flatMap((cell) =>
    cell.plan.arrivalRatePerS === null
      ? []
      : mergeLaunches(cell).flatMap(({ engine, arms }) => {
          const good = medianOf(arms.map((a) => a.load.goodFraction))
          if (good === null) return []
          const one = arms.length === 1 ? arms[0] : undefined
          return [
            {
              group: cell.ladder ?? workloadLabel(cell.plan),
              engine,
              rate: cell.plan.arrivalRatePerS as number,
              good,
              low: one?.load.goodFractionLow ?? null,
              high: one?.load.goodFractionHigh ?? null,
            },
          ]
        }),
  )
  return points.sort((a, b) => a.group.localeCompare(b.group, 'en') || a.engine.localeCompare(b.engine, 'en') || a.rate - b.rate)
}

/** A chart of the rows with a panel per value of `column`, each panel drawn by `panel` at the panel size; null without rows. */
function panels(title: string, rows: readonly object[], column: string, panel: Record<string, unknown>): TopLevelSpec | null {
  if (rows.length === 0) return null
  return {
    title,
    data: { values: [...rows] },
    facet: { column: { field: column, type: 'nominal', title: null } },
    spec: { width: FACET_WIDTH, height: FACET_HEIGHT, ...panel },
    config: CONFIG,
  } as TopLevelSpec
}

/** The good share (requests meeting every SLO) by offered rate, a line per engine, its Wilson interval as a bar, a panel per ladder. */
function goodByRate(index: EvidenceIndex, title: string): TopLevelSpec | null {
  const rows = ratePoints(index)
  return panels(title, rows, 'group', {
    encoding: {
      x: { field: 'rate', type: 'quantitative', title: 'offered rate (req/s)', scale: { zero: false } },
      color: { field: 'engine', type: 'nominal', title: 'engine', scale: { domain: [...new Set(rows.map((r) => r.engine))] } },
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
  })
}

/** Every arm of every plotted cell, sorted so that the order of cells in the index does not matter. */
function armPoints(index: EvidenceIndex): ArmPoint[] {
  const points = plottedCells(index).flatMap((cell) =>
    mergeLaunches(cell).map(({ arm, engine, arms }) => ({
      workload: workloadLabel(cell.plan),
      arm,
      engine,
      concurrency: cell.plan.concurrency,
      outputTokPerS: medianOf(arms.map((a) => a.outputThroughputTokPerS)),
      decodeTokPerSP50: medianOf(arms.map((a) => a.timings.decodeTokPerS.p50)),
      prefillTokPerSP50: medianOf(arms.map((a) => a.timings.effectivePrefillTokPerS.p50)),
    })),
  )
  return points.sort(
    (a, b) => a.workload.localeCompare(b.workload, 'en') || a.engine.localeCompare(b.engine, 'en') || a.concurrency - b.concurrency,
  )
}

/** The colour of each engine: baselines first, so a suite's baseline keeps the first colour. */
function engineColor(points: readonly ArmPoint[]) {
  const order = [...points].sort((a, b) => ARM_ORDER.indexOf(a.arm) - ARM_ORDER.indexOf(b.arm) || a.engine.localeCompare(b.engine, 'en'))
  return { field: 'engine', type: 'nominal', title: 'engine', scale: { domain: [...new Set(order.map((p) => p.engine))] } } as const
}

/** A line per engine over concurrency, one panel per workload. */
function byConcurrency(
  points: readonly ArmPoint[],
  field: 'outputTokPerS' | 'prefillTokPerSP50',
  yTitle: string,
  title: string,
): TopLevelSpec | null {
  const rows = points.filter((p) => p[field] !== null)
  return panels(title, rows, 'workload', {
    mark: { type: 'line', point: true },
    encoding: {
      x: { field: 'concurrency', type: 'ordinal', title: 'concurrency', axis: { labelAngle: 0 } },
      y: { field, type: 'quantitative', title: yTitle },
      color: engineColor(rows),
    },
  })
}

/** Per-user decode speed against aggregate throughput: a line per engine, points labelled by concurrency. */
function tradeOff(points: readonly ArmPoint[], title: string): TopLevelSpec | null {
  const rows = points
    .filter((p) => p.decodeTokPerSP50 !== null && p.outputTokPerS !== null)
    .map((p) => ({ ...p, label: `c${p.concurrency}` }))
  return panels(title, rows, 'workload', {
    encoding: {
      x: { field: 'decodeTokPerSP50', type: 'quantitative', title: 'decode tok/s per user (p50)', scale: { zero: false } },
      y: { field: 'outputTokPerS', type: 'quantitative', title: 'aggregate output tok/s' },
      color: engineColor(rows),
    },
    layer: [
      { mark: { type: 'line', point: true }, encoding: { order: { field: 'concurrency', type: 'quantitative' } } },
      { mark: { type: 'text', align: 'left', dx: 5, dy: -7, fontSize: 10 }, encoding: { text: { field: 'label', type: 'nominal' } } },
    ],
  })
}

/** The candidate ÷ baseline ratio of median p50 decode tok/s of each accepted pair. */
function decodeRatios(index: EvidenceIndex): { row: string; concurrency: number; ratio: number }[] {
  return plottedCells(index)
    .filter((c) => c.disposition === 'accepted' && c.kind === 'pair')
    .flatMap((cell) => {
      const arms = mergeLaunches(cell)
      const baseline = arms.find((a) => a.arm === 'baseline')
      const candidate = arms.find((a) => a.arm === 'candidate')
      if (baseline === undefined || candidate === undefined) return []
      const b = medianOf(baseline.arms.map((a) => a.timings.decodeTokPerS.p50))
      const c = medianOf(candidate.arms.map((a) => a.timings.decodeTokPerS.p50))
      if (b === null || c === null || b <= 0) return []
      return [
        {
          row: `${candidate.engine} ÷ ${baseline.engine}${ROW_SEPARATOR}${workloadLabel(cell.plan)}`,
          concurrency: cell.plan.concurrency,
          ratio: c / b,
        },
      ]
    })
    .sort((a, b) => a.row.localeCompare(b.row, 'en') || a.concurrency - b.concurrency)
}

/** Rows: engine pair and workload; columns: concurrency; colour diverging around 1, labelled with the ratio. */
function ratioHeatmap(index: EvidenceIndex, title: string): TopLevelSpec | null {
  const ratios = decodeRatios(index)
  if (ratios.length === 0) return null
  const spread = Math.max(MIN_RATIO_SPREAD, ...ratios.map((r) => Math.abs(r.ratio - 1)))
  const rows = ratios.map((r) => ({ ...r, label: `${r.ratio.toFixed(2)}×`, strong: Math.abs(r.ratio - 1) > 0.6 * spread }))
  return {
    title: { text: title, subtitle: 'accepted pairs only; a blank square has none' },
    data: { values: rows },
    width: { step: 64 },
    height: { step: 36 },
    encoding: {
      x: { field: 'concurrency', type: 'ordinal', title: 'concurrency', axis: { labelAngle: 0, orient: 'top' } },
      // Two lines: the engine pair, then the workload.
      y: { field: 'row', type: 'nominal', title: null, axis: { labelExpr: `split(datum.label, '${ROW_SEPARATOR}')`, labelLimit: 300 } },
    },
    layer: [
      {
        mark: 'rect',
        encoding: {
          color: {
            field: 'ratio',
            type: 'quantitative',
            title: 'candidate ÷ baseline',
            scale: { scheme: 'redblue', domain: [1 - spread, 1 + spread], domainMid: 1 },
          },
        },
      },
      {
        mark: { type: 'text', fontSize: 12 },
        encoding: {
          text: { field: 'label', type: 'nominal' },
          color: { condition: { test: 'datum.strong', value: 'white' }, value: 'black' },
        },
      },
    ],
    config: CONFIG,
  }
}
