import { type CellMetrics, PERCENTILE_METHOD, P99_MIN_SAMPLES, REQUEST_METRIC_NAMES, type RequestRecord } from '../schema/run.ts'
import type { ResolvedSlo } from '../schema/load.ts'
import { wilsonInterval } from '../stats/wilson.ts'
import { distribution, p99IsDescriptive } from './distribution.ts'
import { computeGoodput } from './goodput.ts'

type Distributions = CellMetrics['distributions']

function pick(records: readonly RequestRecord[], key: keyof RequestRecord & keyof Distributions): number[] {
  const out: number[] = []
  for (const r of records) {
    const v = r[key]
    if (typeof v === 'number') out.push(v)
  }
  return out
}

/** Failed requests counted by error code, the run record's `failures`. */
export function countFailures(records: readonly RequestRecord[]): Record<string, number> {
  const failures: Record<string, number> = {}
  for (const r of records) if (r.status === 'failed') failures[r.error.code] = (failures[r.error.code] ?? 0) + 1
  return failures
}

/** Canary, output-control and accuracy counts over every checked request; null where none was checked. */
function checks(records: readonly RequestRecord[]): Pick<CellMetrics, 'canaries' | 'outputControl' | 'accuracy'> {
  const canaried = records.filter((r) => r.canary !== null)
  const controlled = records.filter((r) => r.outputAdherence !== null)
  const observable = controlled.filter((r) => r.outputAdherence !== 'unobservable').length
  const exact = controlled.filter((r) => r.outputAdherence === 'exact').length
  const scored = records.filter((r) => r.score !== null)
  const correct = scored.filter((r) => r.score?.correct === true).length
  const wilson = wilsonInterval(correct, scored.length)
  return {
    canaries: canaried.length === 0 ? null : { samples: canaried.length, passed: canaried.filter((r) => r.canary?.passed === true).length },
    outputControl:
      controlled.length === 0
        ? null
        : { samples: observable, exact, rate: observable > 0 ? exact / observable : null, unobservable: controlled.length - observable },
    accuracy:
      scored.length === 0
        ? null
        : { samples: scored.length, correct, rate: correct / scored.length, wilson95Low: wilson.low, wilson95High: wilson.high },
  }
}

/**
 * Cell-level metrics over the ok requests only (failed ones keep their record but enter no
 * distribution). Throughput and request rate divide by the cell's wall clock. With an SLO,
 * goodput is judged over every measured request (a failed one is never good).
 */
export function computeCellMetrics(records: readonly RequestRecord[], wallClockMs: number, slo: ResolvedSlo | null = null): CellMetrics {
  const ok = records.filter((r) => r.status === 'ok')
  const itl: number[] = []
  for (const r of ok) if (r.itlMs !== null) for (const gap of r.itlMs) itl.push(gap)

  const distributions = {
    ttftMs: distribution(pick(ok, 'ttftMs')),
    timeToFirstOutputMs: distribution(pick(ok, 'timeToFirstOutputMs')),
    e2eMs: distribution(pick(ok, 'e2eMs')),
    generationMs: distribution(pick(ok, 'generationMs')),
    tpotMs: distribution(pick(ok, 'tpotMs')),
    decodeTokPerS: distribution(pick(ok, 'decodeTokPerS')),
    effectivePrefillTokPerS: distribution(pick(ok, 'effectivePrefillTokPerS')),
    promptTokens: distribution(pick(ok, 'promptTokens')),
    completionTokens: distribution(pick(ok, 'completionTokens')),
    itlMs: distribution(itl),
    queueDelayMs: distribution(pick(ok, 'queueDelayMs')),
    sendLagMs: distribution(pick(ok, 'sendLagMs')),
  } satisfies Distributions

  const sources = { usage: 0, 'client-count': 0 }
  let totalCompletionTokens = 0
  let totalPromptTokens = 0
  for (const r of ok) {
    if (r.completionTokenSource !== null) sources[r.completionTokenSource]++
    totalCompletionTokens += r.completionTokens ?? 0
    totalPromptTokens += r.promptTokens ?? 0
  }
  const seconds = wallClockMs / 1000
  return {
    percentileMethod: PERCENTILE_METHOD,
    p99MinSamples: P99_MIN_SAMPLES,
    p99DescriptiveOnly: REQUEST_METRIC_NAMES.filter((name) => {
      const d = distributions[name]
      return d.samples > 0 && p99IsDescriptive(d)
    }),
    distributions,
    totalCompletionTokens,
    totalPromptTokens,
    completionTokenSources: sources,
    outputThroughputTokPerS: seconds > 0 && ok.length > 0 ? totalCompletionTokens / seconds : null,
    requestRateReqPerS: seconds > 0 && ok.length > 0 ? ok.length / seconds : null,
    wallClockMs,
    ...checks(records),
    goodput: slo === null ? null : computeGoodput(records, wallClockMs, slo),
    openLoop: null,
  }
}
