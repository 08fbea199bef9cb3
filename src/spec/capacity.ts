import type { BracketOptions } from '../load/capacity.ts'
import { engineFailedRecord, measureOnEngine } from '../runner/engine-cell.ts'
import type { EngineCellOptions } from '../runner/engine-cell.ts'
import { nvidiaSmiGpuFacts } from '../runner/gpu-facts.ts'
import { type CapacityOptions, searchCapacity } from '../runner/capacity.ts'
import type { CapacitySearch } from '../schema/capacity.ts'
import type { Slo } from '../schema/load.ts'
import { lazy, type Lazy, planId } from './cell.ts'
import { type EngineHandle, registerTeardown, sharedEngine } from './engine.ts'
import { cellThrew, declareCell, searchMeasured } from './registry.ts'

export interface CapacitySpec extends EngineCellOptions {
  engine: EngineHandle
  /** Shown in evidence; defaults to `<engine>-<workload>-ctx<prompt>-capacity-<axis>`. */
  id?: string
  /** The objectives of one request. */
  slo: Slo
  /** Percent of a probe's requests that must be good. @default 90 */
  percentile?: number
  /** Two-sided confidence of each probe's Wilson interval. @default 0.98 */
  confidence?: number
  /** How to walk the axis: start, range, probes at most, resolution. */
  bracket: BracketOptions
  /** Requests per probe (rate probes: at least this many). @default the fewest with which an all-good probe can pass (twice that for concurrency) */
  requestsPerProbe?: number
  /** Rate probes: rate × probeSeconds requests each. @default 20 */
  probeSeconds?: number
}

/**
 * Declares a capacity search on one engine: the highest rate (or concurrency) at which it still
 * meets the SLO, found by a bracketing search of probe cells on the file's shared engine. Runs
 * once, lazily; the result is a `servegate.capacity/v1` record with every probe.
 * @example const c = capacity({ engine: candidate, slo: { ttftMs: 500, tpotMs: 50 }, bracket: { start: 4 }, workload: { promptTokens: 1024 } })
 * test('sustains 10% more than vLLM', async () => expect(await c).toSustainMoreThan(await b, { by: 0.1 }))
 */
export function capacity(spec: CapacitySpec): Lazy<CapacitySearch> {
  registerTeardown()
  const { engine: h, id, slo, percentile, confidence, bracket, requestsPerProbe, probeSeconds, ...cell } = spec
  const name = id ?? `${planId(h.name, cell)}-capacity-${bracket.axis ?? 'rate'}`
  const options: CapacityOptions = { cell, slo, percentile, confidence, bracket, requestsPerProbe, probeSeconds }
  // In the evidence the search is one pending cell until it runs, then its probes on one ladder.
  declareCell({ id: name, kind: 'cell', required: true, ladder: name, engines: { cell: h.name } })
  return lazy(async () => {
    const started = await sharedEngine(h)
    const probe =
      'failure' in started
        ? async (c: EngineCellOptions) => engineFailedRecord(c, h.config.model.id, started.failure)
        : (c: EngineCellOptions) => measureOnEngine(started, c, { gpuFacts: nvidiaSmiGpuFacts() })
    try {
      const search = await searchCapacity(options, probe, name)
      searchMeasured(name, search.records.map((record, k) => ({ suffix: `probe${k + 1}`, record })))
      return search
    } catch (error) {
      cellThrew(name, error)
      throw error
    }
  })
}
