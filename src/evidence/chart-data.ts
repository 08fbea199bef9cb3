/**
 * What the charts draw, chosen from the evidence index without drawing anything (no Vega): which
 * cells are drawn, which are not and why, each drawn cell's labels, and each matched pair's
 * candidate-against-baseline deltas. The SVG charts (`charts.ts`) and the Mermaid charts of the
 * markdown (`mermaid.ts`) draw the same selection.
 */
import { nearestRank } from '../metrics/distribution.ts'
import type { ArmSummary, CellPlanSummary, Disposition, EvidenceCell, EvidenceIndex } from '../schema/evidence.ts'
import { isMatchedPair } from './build.ts'

/** A cell the charts leave out, with its disposition and why it is not drawn. */
export interface NotDrawnCell {
  cell: string
  disposition: Disposition
  reason: string
}

/** A drawn cell: accepted, with a plan and arm summaries; a pair is also identity-matched. */
export type DrawnCell = EvidenceCell & { plan: CellPlanSummary }

/** The cells the charts draw and every other cell of the index, each with why it is left out. */
export interface ChartSelection {
  /** In chart order: by series, context, load, then id (the order of cells in the index does not matter). */
  drawn: DrawnCell[]
  /** By cell id. */
  notDrawn: NotDrawnCell[]
}

/** How a drawn cell is named on a chart. */
export interface CellLabel {
  cell: string
  /** The engine pair (or engine) and workload, e.g. `photon vs vllm:Qwen/Qwen3-8B · synthetic-summary`. */
  series: string
  /** e.g. `ctx 1024` (prompt tokens). */
  context: string
  /** e.g. `c4` (closed loop at concurrency 4) or `8 req/s` (open loop). */
  load: string
  /** The series on lines of its own, for a panel heading: candidate, `vs baseline`, workload (a single-arm cell: engine, workload). */
  seriesLines: string[]
  /** Set when another drawn cell has the same series, context and load: the cell id tells them apart. */
  twin: string | null
}

/** A metric whose candidate-against-baseline delta the heatmaps and the Mermaid bars draw; higher is better for each. */
export interface DeltaMetric {
  key: 'decode' | 'throughput' | 'prefill'
  /** e.g. `Decode tok/s p50`. */
  name: string
  /** Short, for a Mermaid title. */
  short: string
  /**
   * What the charts' Δ compares, e.g. `the arms' p50s`: a chart's Δ is not the gate's estimate
   * (paired per request), so its title says which it is.
   */
  estimator: string
  value(arm: ArmSummary): number | null
}

/** The seed board's set: decode, output throughput and effective prefill. */
export const DELTA_METRICS: readonly DeltaMetric[] = [
  {
    key: 'decode',
    name: 'Decode tok/s p50',
    short: 'decode',
    estimator: "ratio of the arms' p50s",
    value: (a) => a.timings.decodeTokPerS.p50,
  },
  {
    key: 'throughput',
    name: 'Output throughput tok/s',
    short: 'throughput',
    estimator: "ratio of the cells' aggregates",
    value: (a) => a.outputThroughputTokPerS,
  },
  {
    key: 'prefill',
    name: 'Effective prefill tok/s p50',
    short: 'prefill',
    estimator: "ratio of the arms' p50s",
    value: (a) => a.timings.effectivePrefillTokPerS.p50,
  },
]

/** One matched pair's figure of one metric: each arm at the median of its launches, and the candidate's delta in %. */
export interface PairDelta extends CellLabel {
  promptTokens: number
  concurrency: number
  /** Open loop: the offered rate, req/s; null for the closed loop. */
  ratePerS: number | null
  baseline: number | null
  candidate: number | null
  /** (candidate ÷ baseline − 1) × 100; null when either arm lacks the figure or the baseline is 0. */
  deltaPct: number | null
}

/** The arms of a cell in this order; a single-arm cell's arm is `cell`. */
const ARM_ORDER: readonly ArmSummary['arm'][] = ['baseline', 'candidate', 'cell']

/**
 * Chooses the cells to draw: accepted cells with a plan and arm summaries whose pairs are
 * identity-matched (`isMatchedPair`: a `toBeMatchedPair` check ran and held). Every other cell is
 * listed with its disposition and why it is not drawn. Single-arm cells are drawn where a chart
 * shows arms (latency and good share by rate, distributions), never in a delta.
 * @example const { drawn, notDrawn } = chartSelection(index)
 */
export function chartSelection(index: EvidenceIndex): ChartSelection {
  const drawn: DrawnCell[] = []
  const notDrawn: NotDrawnCell[] = []
  for (const cell of index.cells) {
    const why = whyNotDrawn(cell)
    if (why === null) drawn.push(cell as DrawnCell)
    else notDrawn.push({ cell: cell.id, disposition: cell.disposition, reason: why })
  }
  const labels = cellLabels(drawn)
  const sortKey = (c: DrawnCell) => labels.get(c.id) as CellLabel
  drawn.sort((a, b) => {
    const la = sortKey(a)
    const lb = sortKey(b)
    return (
      compareText(la.series, lb.series) ||
      a.plan.promptTokens - b.plan.promptTokens ||
      loadOrder(a.plan) - loadOrder(b.plan) ||
      compareText(a.id, b.id)
    )
  })
  notDrawn.sort((a, b) => compareText(a.cell, b.cell))
  return { drawn, notDrawn }
}

/** Why a cell is not drawn, or null when it is. */
function whyNotDrawn(cell: EvidenceCell): string | null {
  if (cell.disposition !== 'accepted') return cell.reason ?? `${cell.disposition}, no reason recorded`
  if (cell.plan === null || cell.arms.length === 0) return 'accepted, but the index holds no arm summary of it'
  if (cell.kind === 'cell') return null
  if (!isMatchedPair(cell)) {
    const failed = cell.checks.find((k) => k.check === 'toBeMatchedPair' && !k.passed)
    return failed === undefined
      ? 'accepted, but no toBeMatchedPair check ran on it, so it is not known to be an identity-matched pair'
      : `not an identity-matched pair: ${failed.findings[0] ?? 'toBeMatchedPair did not hold'}`
  }
  const missing = (['baseline', 'candidate'] as const).filter((arm) => !cell.arms.some((a) => a.arm === arm))
  return missing.length === 0 ? null : `accepted, but the index holds no ${missing.join(' or ')} arm summary of it`
}

/** Closed-loop cells first by concurrency, then open-loop ones by rate. */
function loadOrder(plan: CellPlanSummary): number {
  return plan.arrival === 'closed' ? plan.concurrency : 1e9 + (plan.arrivalRatePerS ?? 0)
}

function compareText(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0
}

/** The labels of drawn cells by id; cells that would read alike are told apart by their ids. */
export function cellLabels(cells: readonly DrawnCell[]): Map<string, CellLabel> {
  const labels = cells.map((cell): CellLabel => {
    const engines =
      cell.kind === 'pair'
        ? [cell.engines.candidate ?? 'candidate', `vs ${cell.engines.baseline ?? 'baseline'}`]
        : [cell.engines.cell ?? cell.arms[0]?.engine ?? 'cell']
    return {
      cell: cell.id,
      series: `${engines.join(' ')} · ${cell.plan.workload}`,
      seriesLines: [...engines, cell.plan.workload],
      context: `ctx ${cell.plan.promptTokens}`,
      load: loadLabel(cell.plan),
      twin: null,
    }
  })
  const seen = new Map<string, number>()
  const key = (l: CellLabel) => `${l.series}\u0000${l.context}\u0000${l.load}`
  for (const l of labels) seen.set(key(l), (seen.get(key(l)) ?? 0) + 1)
  return new Map(labels.map((l) => [l.cell, (seen.get(key(l)) ?? 0) > 1 ? { ...l, twin: l.cell } : l]))
}

/** `c4` for the closed loop at concurrency 4, `8 req/s` for an open loop, the arrival kind for a trace. */
function loadLabel(plan: CellPlanSummary): string {
  if (plan.arrival === 'closed') return `c${plan.concurrency}`
  return plan.arrivalRatePerS === null ? plan.arrival : `${plan.arrivalRatePerS} req/s`
}

/** Median (nearest-rank) of the values present; null when none is. */
function medianOf(values: readonly (number | null)[]): number | null {
  const present = values.filter((v): v is number => v !== null).sort((a, b) => a - b)
  return present.length === 0 ? null : nearestRank(present, 50)
}

/** One arm of a cell: its launches, named by the spec's engine name (two arms of one engine kind stay two series). */
export interface ArmLaunches {
  arm: ArmSummary['arm']
  engine: string
  launches: ArmSummary[]
}

/** The launches of each arm of a cell, grouped, in arm order (baseline, candidate, cell). */
export function armsOf(cell: Pick<EvidenceCell, 'arms' | 'engines'>): ArmLaunches[] {
  return ARM_ORDER.flatMap((arm) => {
    const launches = cell.arms.filter((a) => a.arm === arm)
    const first = launches[0]
    return first === undefined ? [] : [{ arm, engine: cell.engines[arm] ?? first.engine ?? arm, launches }]
  })
}

/** A metric of an arm at the median of its launches (never the best one). */
export function armValue(arm: ArmLaunches | undefined, value: (a: ArmSummary) => number | null): number | null {
  return arm === undefined ? null : medianOf(arm.launches.map(value))
}

/** The delta of one metric for every drawn pair, in chart order; `loop` keeps closed-loop or open-loop pairs only. */
export function pairDeltas(selection: ChartSelection, metric: DeltaMetric, loop: 'closed' | 'open' | 'any' = 'any'): PairDelta[] {
  const labels = cellLabels(selection.drawn)
  return selection.drawn
    .filter((c) => c.kind === 'pair' && (loop === 'any' || (c.plan.arrival === 'closed') === (loop === 'closed')))
    .map((cell) => {
      const arms = armsOf(cell)
      const baseline = armValue(
        arms.find((a) => a.arm === 'baseline'),
        metric.value,
      )
      const candidate = armValue(
        arms.find((a) => a.arm === 'candidate'),
        metric.value,
      )
      const deltaPct = baseline === null || candidate === null || baseline === 0 ? null : (candidate / baseline - 1) * 100
      return {
        ...(labels.get(cell.id) as CellLabel),
        promptTokens: cell.plan.promptTokens,
        concurrency: cell.plan.concurrency,
        ratePerS: cell.plan.arrival === 'closed' ? null : cell.plan.arrivalRatePerS,
        baseline,
        candidate,
        deltaPct,
      }
    })
}

/**
 * A delta as a chart label, at most 7 characters: its sign and one decimal, none from 1000%.
 * @example deltaText(12) // '+12.0%'; also '-4.0%', '+1250%', '>+9999%', 'n/a' (null)
 */
export function deltaText(deltaPct: number | null): string {
  if (deltaPct === null) return 'n/a'
  const size = Math.abs(deltaPct)
  if (size > MAX_DELTA_TEXT_PCT) return `>${deltaPct > 0 ? '+' : '-'}${MAX_DELTA_TEXT_PCT}%`
  const digits = size >= 1000 ? 0 : 1
  const text = size.toFixed(digits)
  const zero = Number(text) === 0
  return `${zero ? '±' : deltaPct > 0 ? '+' : '-'}${text}%`
}

/** The largest delta a label writes out, %; beyond it the label says `>+9999%`. */
const MAX_DELTA_TEXT_PCT = 9999
