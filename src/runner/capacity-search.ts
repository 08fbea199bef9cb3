import { ServegateError } from '../errors.ts'
import { DEFAULT_CONFIDENCE } from '../gates/gate-options.ts'
import { sloGate } from '../gates/slo.ts'
import {
  type BracketOptions,
  bracketSearch,
  type ProbeVerdict,
  type ResolvedBracketOptions,
  resolveBracketOptions,
} from '../load/bracket.ts'
import type { ArrivalSpec } from '../load/arrival-spec.ts'
import { describeSLO, resolveSLO } from '../metrics/goodput.ts'
import { CAPACITY_SCHEMA_ID, type CapacityProbe, type CapacitySearch } from '../schema/capacity-record.ts'
import type { ResolvedSLO, SLO } from '../schema/load.ts'
import type { RunRecord } from '../schema/run.ts'
import { normalQuantile } from '../stats/distributions.ts'
import { wilsonInterval } from '../stats/wilson.ts'
import { type CellPlan, type ResolvedCellPlan, resolveCellPlan } from './cell-options.ts'

/** A capacity search: the cell every probe runs (its rate or concurrency replaced), the SLO, and how to walk the axis. */
export interface CapacityOptions {
  /** The probe cell. Rate probes use its `arrival` (constant when unset) with the probed rate; concurrency probes run closed. */
  cell: CellPlan
  /** The objectives of one request. */
  slo: SLO
  /** Percent of a probe's requests that must be good. @default 90 */
  percentile?: number
  /** Two-sided confidence of each probe's Wilson interval. @default 0.98 */
  confidence?: number
  bracket: BracketOptions
  /**
   * Requests per probe (rate probes: at least this many). @default twice the fewest with which an all-
   * good probe can pass (concurrency); the fewest (rate)
   */
  requestsPerProbe?: number
  /**
   * Rate probes: at least rate × probeSeconds requests, so each lasts about this long. A probe of
   * D seconds cannot see an overload smaller than about bound / (share × D) (see `warnings`).
   * @default 20
   */
  probeSeconds?: number
}

/** How long a rate probe lasts unless told, s. */
const DEFAULT_PROBE_SECONDS = 20

export interface CapacityHooks {
  /** Called after each probe, with its verdict. */
  onProbe?: (probe: CapacityProbe) => void
  /** Cancels the search: the probe in flight is cut short (its requests fail as aborted) and no other starts. */
  signal?: AbortSignal
}

/** Measures one probe cell; the composition root injects it (an endpoint, or an engine it launched). */
export type MeasureProbe = (cell: ResolvedCellPlan, signal?: AbortSignal) => Promise<RunRecord>

function invalid(message: string): never {
  throw new ServegateError('CONFIG_INVALID', `invalid capacity search: ${message}`)
}

/**
 * The fewest requests with which a probe can pass at all: with every request good, the Wilson
 * lower bound n / (n + z²) must reach the required share.
 */
export function fewestPassingRequests(requiredFraction: number, confidence: number): number {
  const z = normalQuantile(1 - (1 - confidence) / 2)
  let n = 1
  while ((wilsonInterval(n, n, z).low as number) < requiredFraction) n++
  return n
}

/** A capacity search with its defaults filled, checked before any probe runs. */
export interface ResolvedCapacityOptions {
  /** The probe cell's plan (its rate or concurrency replaced per probe). */
  cell: ResolvedCellPlan
  seconds: number
  slo: ResolvedSLO
  percentile: number
  required: number
  confidence: number
  bracket: ResolvedBracketOptions
  requestsAt: (value: number) => number
  template: Exclude<ArrivalSpec, { kind: 'trace' }> | null
}

/**
 * Validates a capacity search and fills its defaults, before any engine starts; the error names
 * the field and the fix.
 * @throws ServegateError CONFIG_INVALID
 */
export function resolveCapacityOptions(o: CapacityOptions, where = 'capacity'): ResolvedCapacityOptions {
  const cell = resolveCellPlan(o.cell, `${where} cell`)
  const slo = resolveSLO(o.slo, 'slo')
  const percentile = o.percentile ?? 90
  if (!(percentile > 0 && percentile < 100)) invalid(`percentile: ${percentile} must lie in (0, 100); e.g. 90 for 90% of requests good`)
  const confidence = o.confidence ?? DEFAULT_CONFIDENCE
  if (!(confidence > 0.5 && confidence < 1)) invalid(`confidence: ${confidence} must lie in (0.5, 1); e.g. 0.98`)
  const bracket = resolveBracketOptions(o.bracket)
  if ('error' in bracket) invalid(`bracket.${bracket.error}`)
  const arrival = cell.arrival
  if (bracket.axis === 'concurrency' && arrival !== null)
    invalid('cell.arrival: a concurrency search runs closed-loop probes; drop arrival, or search the rate axis')
  if (arrival?.kind === 'trace')
    invalid('cell.arrival: a trace sets its own times, so it has no rate to search; use constant, poisson or gamma arrivals')
  const required = percentile / 100
  const fewest = fewestPassingRequests(required, confidence)
  const seconds = bracket.axis === 'rate' ? (o.probeSeconds ?? DEFAULT_PROBE_SECONDS) : 0
  const requestsPerProbe = o.requestsPerProbe ?? (bracket.axis === 'rate' ? fewest : 2 * fewest)
  if (requestsPerProbe < fewest) {
    invalid(
      `requestsPerProbe: ${requestsPerProbe} requests can never show ${percentile}% good at ${confidence} confidence ` +
        `(even all good, the Wilson bound stays below ${required}); use at least ${fewest}`,
    )
  }
  return {
    cell,
    seconds,
    slo,
    percentile,
    required,
    confidence,
    bracket,
    requestsAt: (value) => Math.max(requestsPerProbe, Math.ceil(value * seconds)),
    template:
      arrival === null && bracket.axis === 'rate' ? { kind: 'constant', ratePerS: 1 } : (arrival as ResolvedCapacityOptions['template']),
  }
}

/** The probe cell at a value: the rate replaces the arrival's, or the concurrency the cell's. */
function probeCell(r: ResolvedCapacityOptions, value: number): ResolvedCellPlan {
  const common: CellPlan = { ...r.cell, slo: r.slo, requests: r.requestsAt(value) }
  if (r.bracket.axis === 'concurrency') return resolveCellPlan({ ...common, concurrency: value, arrival: null })
  return resolveCellPlan({ ...common, arrival: { ...(r.template as Exclude<ArrivalSpec, { kind: 'trace' }>), ratePerS: value } })
}

function verdictOf(record: RunRecord, outcome: ProbeVerdict['outcome'], signal: AbortSignal | undefined): ProbeVerdict {
  if (signal?.aborted === true) return { outcome, invalid: { status: 'interrupted', reason: 'the search was cancelled during this probe' } }
  if (record.cellFailure !== null)
    return {
      outcome,
      invalid: { status: 'cell-failed', reason: `${record.cellFailure.code}: ${record.cellFailure.message.split('\n')[0]}` },
    }
  if (record.harness.harnessLimited) return { outcome, invalid: { status: 'harness-limited', reason: record.harness.reasons.join('; ') } }
  return { outcome, invalid: null }
}

/**
 * What a finite open-loop probe cannot see. Above the sustainable rate μ, at λ = μ(1 + ε), the
 * request sent t seconds in has waited about ε·t; the share-th request by time (at share × D)
 * misses a latency bound X only once ε > X / (share × D). So a D-second probe passes overloads up
 * to about that: the bracket is of the rate that meets the SLO over D seconds, which may exceed
 * the sustainable rate by that much. Longer probes narrow it.
 */
function blindness(r: ResolvedCapacityOptions, low: number | null): { overloadTolerance: number | null; warnings: string[] } {
  if (r.bracket.axis !== 'rate') return { overloadTolerance: null, warnings: [] }
  const bounds = [r.slo.ttftMs, r.slo.e2eMs].filter((b): b is number => b !== null)
  if (bounds.length === 0) {
    const why =
      "the SLO bounds neither ttft nor e2e, so waiting in the engine's queue never counts against it: " +
      'the search finds where decode (tpot, itl) degrades, not where requests start to queue'
    return { overloadTolerance: null, warnings: [why] }
  }
  const bound = Math.max(...bounds)
  const seconds = Math.max(r.seconds, low === null ? 0 : r.requestsAt(low) / low)
  const tolerance = bound / 1000 / (r.required * seconds)
  const why =
    `a ${seconds.toFixed(1)} s probe cannot see an overload below about ${(tolerance * 100).toFixed(1)}% ` +
    `(a ${bound} ms bound over ${r.percentile}% of its length): the bracket may sit up to that far above the sustainable rate; ` +
    'longer probes (probeSeconds) narrow it'
  return { overloadTolerance: tolerance, warnings: [why] }
}

function unitOf(axis: 'rate' | 'concurrency'): string {
  return axis === 'rate' ? 'req/s' : 'streams'
}

function summaryOf(r: ResolvedCapacityOptions, result: Awaited<ReturnType<typeof bracketSearch>>): string {
  const { low, high } = result.bracket
  const unit = unitOf(r.bracket.axis)
  const show = (v: number) => (r.bracket.axis === 'rate' ? v.toFixed(2) : String(v))
  const under = `${describeSLO(r.slo)} for ${r.percentile}% of requests`
  const where =
    low !== null && high !== null
      ? `capacity in [${show(low)}, ${show(high)}) ${unit} (×${(high / low).toFixed(2)})`
      : low !== null
        ? `capacity at least ${show(low)} ${unit}`
        : high !== null
          ? `capacity below ${show(high)} ${unit}`
          : 'capacity not found'
  const last = result.probes[result.probes.length - 1]
  const why = last?.verdict.invalid ? `: ${last.verdict.invalid.reason} at ${show(last.value)} ${unit}` : ''
  return `${where} under ${under}; ${result.status} after ${result.probes.length} probe(s)${why}`
}

/**
 * Finds the highest rate (or concurrency) at which an arm still meets its SLO: a bracketing
 * search of at most `maxProbes` probe cells, each an ordinary measured cell judged by the SLO
 * gate (pass: the share of good requests is shown to reach the percentile). Every probe and its
 * run record is kept; the answer is the bracket [low, high) with how the search ended.
 * @throws ServegateError `CONFIG_INVALID` for bad options, before any probe runs
 * @example await searchCapacity({ cell: { workload: { promptTokens: 512 } }, slo: { ttftMs: 500 }, bracket: { start: 4 } }, (cell) =>
 * runCell({ ...cell, baseUrl, model }), 'candidate')
 */
export async function searchCapacity(
  r: ResolvedCapacityOptions,
  measure: MeasureProbe,
  id: string,
  hooks: CapacityHooks = {},
): Promise<CapacitySearch> {
  const records: RunRecord[] = []
  const result = await bracketSearch(
    r.bracket,
    async (value) => {
      const record = await measure(probeCell(r, value), hooks.signal)
      records.push(record)
      const d = sloGate(record, { ...r.slo, percentile: r.percentile, confidence: r.confidence, gate: 'capacity probe' })
      const verdict = verdictOf(record, d.outcome, hooks.signal)
      const goodput = record.metrics.goodput
      const probe: CapacityProbe = {
        value,
        outcome: d.outcome,
        samples: goodput?.samples ?? 0,
        good: goodput?.good ?? 0,
        fraction: d.effect.estimate,
        low: d.effect.low,
        high: d.effect.high,
        sendLagP99Ms: record.harness.sendLagP99Ms,
        invalid: verdict.invalid?.reason ?? null,
        runId: record.runId,
      }
      hooks.onProbe?.(probe)
      return { verdict, probe }
    },
    hooks.signal,
  )
  return {
    schema: CAPACITY_SCHEMA_ID,
    id,
    axis: r.bracket.axis,
    slo: r.slo,
    requiredFraction: r.required,
    confidence: r.confidence,
    search: {
      start: r.bracket.start,
      min: r.bracket.min,
      max: r.bracket.max,
      maxProbes: r.bracket.maxProbes,
      resolution: r.bracket.resolution,
      requestsPerProbe: r.requestsAt(0),
      probeSeconds: r.bracket.axis === 'rate' ? r.seconds : null,
    },
    ...blindness(r, result.bracket.low),
    probes: result.probes.map((p) => p.probe),
    bracket: result.bracket,
    status: result.status,
    summary: summaryOf(r, result),
    records,
  }
}
