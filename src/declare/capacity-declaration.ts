import { engineFailedRecord, measureOnEngine } from '../runner/engine-lifecycle.ts'
import type { EngineCellOptions } from '../runner/engine-lifecycle.ts'
import { nvidiaSmiGpuFacts } from '../runner/gpu-facts.ts'
import { type CapacityOptions, searchCapacity } from '../runner/capacity-search.ts'
import type { CapacitySearch } from '../schema/capacity-record.ts'
import type { RunRecord } from '../schema/run.ts'
import { lazy, type Lazy, planId } from './cell-declarations.ts'
import { type EngineHandle, registerTeardown, sharedEngine } from './engine-handles.ts'
import { PhaseFeed, progressChannel } from '../runner/phase-feed.ts'
import { cellThrew, declareCell, searchMeasured } from './registry.ts'

/** A capacity search in a spec: the probe cell's options, the engine, and the search's own options (see `CapacityOptions`). */
export interface CapacitySpec extends Omit<EngineCellOptions, 'slo'>, Omit<CapacityOptions, 'cell'> {
  engine: EngineHandle
  /** Shown in evidence; defaults to `<engine>-<workload>-ctx<prompt>-capacity-<axis>`. */
  id?: string
}

/**
 * Declares a capacity search on one engine: the highest rate (or concurrency) at which it still
 * meets the SLO, found by a bracketing search of probe cells on the file's shared engine. Runs
 * once, lazily; the result is a `servegate.capacity/v1` record with every probe.
 * @example const c = capacity({ engine: candidate, slo: { ttftMs: 500, tpotMs: 50 }, bracket: { start: 4 }, workload: { promptTokens: 1024
 * } })
 * test('sustains 10% more than vLLM', async () => expect(await c).toSustainMoreThan(await b, { by: 0.1 }))
 */
export function capacity(spec: CapacitySpec): Lazy<CapacitySearch> {
  registerTeardown()
  const { engine: h, id, slo, percentile, confidence, bracket, requestsPerProbe, probeSeconds, ...cell } = spec
  const axis = bracket.axis ?? 'rate'
  const name = id ?? `${planId(h.name, cell)}-capacity-${axis}`
  const options: CapacityOptions = { cell, slo, percentile, confidence, bracket, requestsPerProbe, probeSeconds }
  // In the evidence the search is one pending cell until it runs, then its probes on one ladder.
  declareCell({ id: name, kind: 'cell', required: true, ladder: name, engines: { cell: h.name } })
  return lazy(async () => {
    const feed = new PhaseFeed({ cell: name, arm: null, engine: h.name, step: null }, progressChannel())
    const started = await sharedEngine(h, feed.phase)
    let probes = 0
    const probe = async (c: EngineCellOptions): Promise<RunRecord> => {
      // Rate probes carry the probed rate in their arrival, concurrency probes run closed.
      const value = c.arrival == null || c.arrival.kind === 'trace' ? (c.concurrency ?? 1) : c.arrival.ratePerS
      const at = feed.at({ kind: 'probe', index: ++probes, value, axis })
      return at.measuring(async () =>
        'failure' in started
          ? engineFailedRecord(c, h.config.model.id, started.failure)
          : measureOnEngine(started, c, { gpuFacts: nvidiaSmiGpuFacts(), onPhase: at.phase }),
      )
    }
    try {
      const search = await searchCapacity(options, probe, name)
      searchMeasured(
        name,
        search.records.map((record, k) => ({ suffix: `probe${k + 1}`, record })),
      )
      return search
    } catch (error) {
      cellThrew(name, error)
      throw error
    }
  })
}
