import { type CapacityOptions, resolveCapacityOptions } from '../runner/capacity-search.ts'
import type { CellPlan } from '../runner/cell-options.ts'
import type { CapacitySearch } from '../schema/capacity-record.ts'
import { readDeclaredFiles } from '../runner/declared-files.ts'
import { declaring } from './declaration-errors.ts'
import { engineField, lazy, type Lazy, named, planId } from './cell-declarations.ts'
import type { EngineHandle } from './engine-handles.ts'
import { cellThrew, declareCell, searchMeasured } from '../worker/cell-registry.ts'
import { registerTeardown, workerRunner } from './worker-environment.ts'
import { rungIds } from './rung-id.ts'

/** A capacity search in a spec: the probe cell's options, the engine, and the search's own options (see `CapacityOptions`). */
export interface CapacitySpec extends Omit<CellPlan, 'slo'>, Omit<CapacityOptions, 'cell'> {
  engine: EngineHandle
  /** Shown in evidence; defaults to `<engine>-<workload>-ctx<prompt>-capacity-<axis>`. */
  id?: string
}

/**
 * Declares a capacity search on one engine: the highest rate (or concurrency) at which it still
 * meets the SLO, found by a bracketing search of probe cells on the file's shared engine, each
 * named by its value after the search's id (`…-capacity-rate-r20`, `…-capacity-concurrency-c8`). Its
 * options are checked and resolved here, before any engine starts. Runs once, lazily; the result
 * is a `servegate.capacity/v1` record with every probe.
 * @throws ServegateError CONFIG_INVALID for a bad option
 * @example
 * const c = capacity({ engine: candidate, slo: { ttftMs: 500, tpotMs: 50 }, bracket: { start: 4 }, workload: { promptTokens: 1024 } })
 * test('sustains 10% more than vLLM', async () => expect(await c).toSustainMoreThan(await b, { by: 0.1 }))
 */
export function capacity(spec: CapacitySpec): Lazy<CapacitySearch> {
  return declaring(() => {
    const { engine: h, id, slo, percentile, confidence, bracket, requestsPerProbe, probeSeconds, ...cell } = spec
    const where = named('capacity', id)
    const engine = engineField(where, 'engine', h)
    const options = resolveCapacityOptions({ cell, slo, percentile, confidence, bracket, requestsPerProbe, probeSeconds }, where)
    readDeclaredFiles(options.cell, `${where} cell`)
    const name = id ?? `${planId(engine.name, options.cell)}-capacity-${options.bracket.axis}`
    registerTeardown()
    // In the evidence the search is one pending cell until it runs, then its probes on one ladder.
    declareCell({ id: name, kind: 'cell', required: true, ladder: name, engines: { cell: engine.name } })
    return lazy(async () => {
      try {
        const search = await workerRunner().capacity({ id: name, engine, options, launch: 'shared' })
        // Each probe is a cell named by its value (`…-r20`, `…-c8`), in the order the search ran them
        // (the search keeps a probe and its record together, so the k-th of each are one probe).
        const ids = rungIds(
          name,
          search.axis,
          search.probes.map((p) => p.value),
        )
        searchMeasured(
          name,
          search.records.map((record, k) => ({ suffix: ids[k]?.slice(name.length + 1) ?? `probe${k + 1}`, record })),
        )
        return search
      } catch (error) {
        cellThrew(name, error)
        throw error
      }
    })
  })
}
