import { type GpuFactsProbe, launchEngine, type RunningEngine } from '../engines/launch.ts'
import type { EngineConfig } from '../engines/config.ts'
import { sanitizeMessage, ServegateError } from '../errors.ts'
import type { RunRecord } from '../schema/run.ts'
import { failedCellRecord, runCell, type RunCellHooks } from './cell.ts'
import type { CellOptions } from './options.ts'

/** A cell on an engine servegate launches: everything but where to send and the model name. */
export type EngineCellOptions = Omit<CellOptions, 'baseUrl' | 'model'>

export interface EngineCellHooks extends Omit<RunCellHooks, 'engine'> {
  /** GPU facts for the manifest (nvidia-smi); injected by the composition root. */
  gpuFacts: GpuFactsProbe
  /** Called once the engine is ready, before load (e.g. to start telemetry). */
  onReady?: (engine: RunningEngine) => void | Promise<void>
}

/**
 * Launches an engine, measures one cell on it, and tears it down whatever happens. An engine
 * that fails to start, or exits mid-cell, yields a record with `cellFailure` (exit code and log
 * tail) and whatever was measured before; it never throws for an engine failure.
 * @throws ServegateError CONFIG_INVALID for a bad engine or cell config
 */
export async function runEngineCell(engineConfig: EngineConfig, cell: EngineCellOptions, hooks: EngineCellHooks): Promise<RunRecord> {
  const modelOf = (e: EngineConfig): string => e.model.id
  let engine: RunningEngine
  try {
    engine = await launchEngine(engineConfig, hooks.gpuFacts, hooks.signal)
  } catch (error) {
    if (error instanceof ServegateError && error.code !== 'CONFIG_INVALID') {
      return failedCellRecord(
        { ...cell, baseUrl: 'http://127.0.0.1:1', model: modelOf(engineConfig) },
        { code: error.code, message: sanitizeMessage(error.message, 4000), httpStatus: null, retryAfterS: null },
      )
    }
    throw error
  }
  try {
    await hooks.onReady?.(engine)
    const exited = engine.process?.exited ?? new Promise<never>(() => {})
    const record = await runCell(
      { ...cell, baseUrl: engine.baseUrl, model: engine.model },
      { onProgress: hooks.onProgress, signal: hooks.signal, engine: { exited, failure: () => engine.failure() } },
    )
    return { ...record, manifest: engine.manifest, cellFailure: engine.failure() ?? record.cellFailure }
  } catch (error) {
    const failure = engine.failure()
    if (failure === null) throw error
    // The engine died before load began (e.g. during the endpoint probe): the cell failed with it.
    return failedCellRecord({ ...cell, baseUrl: engine.baseUrl, model: engine.model }, failure, engine.manifest)
  } finally {
    await engine.stop()
  }
}
