import type { RequestRecord, RunRecord, SequentialPlan } from '../schema/run.ts'
import type { LatencyMetric, RateMetric, TurnRange } from './gate-options.ts'

/** Fewer paired requests than this and no interval is attempted. */
export const MIN_PAIRED_REQUESTS = 8

/**
 * What a gate reads of a run record: its requests, and the sequential design of a pair measured
 * in stages (win gates then take that design's looks). Every RunRecord is one.
 */
export type GateRecord = Pick<RunRecord, 'requests'> & {
  plan?: { sequential: SequentialPlan | null; workload?: { dataset: { rows: number } | null } } | null
  /** The cell's service-level figures, which `toWinThroughput` judges per launch. */
  metrics?: Pick<RunRecord['metrics'], 'outputThroughputTokPerS' | 'requestRateReqPerS' | 'wallClockMs'> | null
  /** What servegate observed beside the client; win and hold gates show the engine's preemptions from it. */
  telemetry?: RunRecord['telemetry']
}

/** One launch of an arm, or several launches of it (repeats, e.g. A B B A). */
export type ArmInput = GateRecord | readonly GateRecord[]

/** The two arms of a matched pair: both received the same ordered requests, so index i is the same prompt. */
export interface GatePair {
  baseline: ArmInput
  candidate: ArmInput
}

export type OkRequest = Extract<RequestRecord, { status: 'ok' }>

/** The launches of an arm, as a list. */
export function launchesOf(arm: ArmInput): readonly GateRecord[] {
  return Array.isArray(arm) ? (arm as readonly GateRecord[]) : [arm as GateRecord]
}

/**
 * How a gate treats the pair: one launch per arm (request-level statistics, launch noise as a
 * floor) or repeats on both arms (launch-level statistics). A TypeError for one launch against
 * several, which neither test can use honestly.
 */
export function launchLayout(
  gate: string,
  pair: GatePair,
): { baseline: readonly GateRecord[]; candidate: readonly GateRecord[]; repeated: boolean } {
  const baseline = launchesOf(pair.baseline)
  const candidate = launchesOf(pair.candidate)
  if (baseline.length === 0 || candidate.length === 0) throw new TypeError(`${gate}: each arm needs at least one run record`)
  const repeated = baseline.length > 1 || candidate.length > 1
  if (repeated && (baseline.length < 2 || candidate.length < 2)) {
    throw new TypeError(
      `${gate}: the launch-level test needs at least two launches per arm, got ${baseline.length} baseline and ` +
        `${candidate.length} candidate; pass one run record per arm or repeat both arms`,
    )
  }
  return { baseline, candidate, repeated }
}

/**
 * The pair with only the requests of conversation turns `turns` kept, on every launch alike (a
 * request's index still pairs it); the pair as it is without a range.
 * @throws TypeError when a launch's requests carry no turn (not a conversation)
 */
export function selectTurns(gate: string, pair: GatePair, turns: TurnRange | undefined): GatePair {
  if (turns === undefined) return pair
  const inRange = (t: number | null): boolean => t !== null && t >= turns.from && (turns.to === undefined || t <= turns.to)
  const select = (arm: ArmInput): GateRecord[] =>
    launchesOf(arm).map((launch) => {
      if (launch.requests.length > 0 && launch.requests.every((r) => r.turn === null)) {
        throw new TypeError(`${gate}: turns needs conversation records (requests with a turn); remove turns or measure a conversation`)
      }
      return { ...launch, requests: launch.requests.filter((r) => inRange(r.turn)) }
    })
  const baseline = select(pair.baseline)
  const candidate = select(pair.candidate)
  return {
    baseline: Array.isArray(pair.baseline) ? baseline : (baseline[0] as GateRecord),
    candidate: Array.isArray(pair.candidate) ? candidate : (candidate[0] as GateRecord),
  }
}

/** The words a rule gains when a gate judged only some turns. */
export function turnsText(turns: TurnRange | undefined): string {
  if (turns === undefined) return ''
  return turns.to === undefined ? `; over turns ≥ ${turns.from} only` : `; over turns ${turns.from}–${turns.to} only`
}

/** A rate metric of one ok request, or null when it was not measured or is not positive. */
export function rateOf(metric: RateMetric): (r: OkRequest) => number | null {
  switch (metric) {
    case 'decodeTokPerS':
      return (r) => (r.decodeTokPerS !== null && r.decodeTokPerS > 0 ? r.decodeTokPerS : null)
    case 'effectivePrefillTokPerS':
      return (r) => (r.effectivePrefillTokPerS !== null && r.effectivePrefillTokPerS > 0 ? r.effectivePrefillTokPerS : null)
    case 'enginePrefillTokPerS':
      return (r) => r.enginePrefillTokPerS ?? null
    case 'throughputTokPerS':
      // Output tokens per second of service: completion tokens over the request's e2e time.
      return (r) =>
        r.completionTokens !== null && r.completionTokens > 0 && r.e2eMs !== null && r.e2eMs > 0
          ? r.completionTokens / (r.e2eMs / 1000)
          : null
  }
}

/** A latency of one ok request: a number, or all its ITL gaps; null when absent. */
export function latencyOf(metric: LatencyMetric): (r: OkRequest) => number | readonly number[] | null {
  switch (metric) {
    case 'ttft':
      return (r) => r.ttftMs
    case 'tpot':
      return (r) => r.tpotMs
    case 'e2e':
      return (r) => r.e2eMs
    case 'timeToFirstOutput':
      return (r) => r.timeToFirstOutputMs
    case 'itl':
      return (r) => (r.itlMs !== null && r.itlMs.length > 0 ? r.itlMs : null)
  }
}

/** The record field a latency metric reads, for decisions and messages. */
export const LATENCY_FIELD: Record<LatencyMetric, string> = {
  ttft: 'ttftMs',
  tpot: 'tpotMs',
  e2e: 'e2eMs',
  timeToFirstOutput: 'timeToFirstOutputMs',
  itl: 'itlMs',
}

/** Values of the ok requests of one launch, in index order, keyed by index (the first wins on a duplicate). */
export function valuesByIndex<T>(record: GateRecord, value: (r: OkRequest) => T | null): Map<number, T> {
  const out = new Map<number, T>()
  const ok = record.requests.filter((r): r is OkRequest => r.status === 'ok').sort((a, b) => a.index - b.index)
  for (const r of ok) {
    const v = value(r)
    if (v !== null && !out.has(r.index)) out.set(r.index, v)
  }
  return out
}

/** Requests with a value on both arms, the same index (the same prompt), in index order. */
export interface Paired<T> {
  indices: number[]
  baseline: T[]
  candidate: T[]
}

/** Pairs the ok requests of two launches by index. */
export function pairByIndex<T>(baseline: Map<number, T>, candidate: Map<number, T>): Paired<T> {
  const out: Paired<T> = { indices: [], baseline: [], candidate: [] }
  const indices = [...baseline.keys()].filter((i) => candidate.has(i)).sort((a, b) => a - b)
  for (const i of indices) {
    out.indices.push(i)
    out.baseline.push(baseline.get(i) as T)
    out.candidate.push(candidate.get(i) as T)
  }
  return out
}

/** Samples of a repeated pair: values per arm over all launches; pairs between the i-th launches of each arm. */
export function launchSamples<T>(
  baseline: readonly GateRecord[],
  candidate: readonly GateRecord[],
  value: (r: OkRequest) => T | null,
): { baseline: number; candidate: number; paired: number } {
  const b = baseline.map((r) => valuesByIndex(r, value))
  const c = candidate.map((r) => valuesByIndex(r, value))
  let paired = 0
  for (let i = 0; i < Math.min(b.length, c.length); i++)
    paired += pairByIndex(b[i] as Map<number, T>, c[i] as Map<number, T>).indices.length
  return { baseline: b.reduce((s, m) => s + m.size, 0), candidate: c.reduce((s, m) => s + m.size, 0), paired }
}
