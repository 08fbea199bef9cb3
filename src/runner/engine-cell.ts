import { type GpuFactsProbe, launchEngine, type RunningEngine } from '../engines/launch.ts'
import { type EngineConfig, type ResolvedEngineConfig, resolveEngineConfig } from '../engines/config.ts'
import { type InProcessEngine, startNodeLlamaCpp } from '../engines/node-llama-cpp.ts'
import { sanitizeMessage, ServegateError } from '../errors.ts'
import type { RunRecord } from '../schema/run.ts'
import { type CellTransport, failedCellRecord, measureCell, runCell, type RunCellHooks } from './cell.ts'
import { type CellOptions, resolveCellOptions } from './options.ts'
import { startTelemetry, type TelemetryOptions } from './telemetry.ts'

/** A cell on an engine servegate launches: everything but where to send and the model name. */
export type EngineCellOptions = Omit<CellOptions, 'baseUrl' | 'model'>

export interface EngineCellHooks extends Omit<RunCellHooks, 'engine'> {
  /** GPU facts for the manifest (nvidia-smi); injected by the composition root. */
  gpuFacts: GpuFactsProbe
  /** GPU sampling, Prometheus scraping and host memory during the cell; false turns them off. */
  telemetry?: TelemetryOptions | false
}

/**
 * Launches an engine, measures one cell on it, and tears it down whatever happens. An engine
 * that fails to start, or exits mid-cell, yields a record with `cellFailure` (exit code and log
 * tail) and whatever was measured before; it never throws for an engine failure.
 * @throws ServegateError CONFIG_INVALID for a bad engine or cell config
 */
export async function runEngineCell(engineConfig: EngineConfig, cell: EngineCellOptions, hooks: EngineCellHooks): Promise<RunRecord> {
  const config = resolveEngineConfig(engineConfig)
  if (config.kind === 'node-llama-cpp') return runInProcessCell(config, cell, hooks)
  const modelOf = (e: EngineConfig): string => e.model.id
  let engine: RunningEngine
  try {
    engine = await launchEngine(engineConfig, hooks.gpuFacts, hooks.signal)
  } catch (error) {
    if (error instanceof ServegateError && error.code !== 'CONFIG_INVALID') {
      return failedCellRecord(
        { ...cell, baseUrl: NO_ORIGIN, model: modelOf(engineConfig) },
        { code: error.code, message: sanitizeMessage(error.message, 4000), httpStatus: null, retryAfterS: null },
      )
    }
    throw error
  }
  const telemetry = hooks.telemetry === false ? null : startTelemetry(engine, cell.concurrency ?? 1, hooks.telemetry)
  let finished = false
  try {
    const exited = engine.process?.exited ?? new Promise<never>(() => {})
    const record = await runCell(
      { ...cell, baseUrl: engine.baseUrl, model: engine.model },
      {
        onProgress: hooks.onProgress,
        signal: hooks.signal,
        engine: { exited, failure: () => engine.failure() },
        onMeasureStart: () => telemetry?.markLoadStart(),
      },
    )
    finished = true
    const observed = telemetry === null ? null : await telemetry.finish(record)
    return { ...record, manifest: engine.manifest, telemetry: observed, cellFailure: engine.failure() ?? record.cellFailure }
  } catch (error) {
    const failure = engine.failure()
    if (failure === null) throw error
    // The engine died before load began (e.g. during the endpoint probe): the cell failed with it.
    return failedCellRecord({ ...cell, baseUrl: engine.baseUrl, model: engine.model }, failure, engine.manifest)
  } finally {
    if (!finished) await telemetry?.cancel()
    await engine.stop()
  }
}

/** The placeholder origin of cells that send nothing over HTTP (in-process, or failed to start). */
const NO_ORIGIN = 'http://127.0.0.1:1'

/**
 * An in-process engine measured by the same core as HTTP ones: the same bodies, the same
 * observation per request, the same record; only the transport differs (and is recorded).
 */
async function runInProcessCell(config: Extract<ResolvedEngineConfig, { kind: 'node-llama-cpp' }>, cell: EngineCellOptions, hooks: EngineCellHooks): Promise<RunRecord> {
  const o = resolveCellOptions({ ...cell, baseUrl: NO_ORIGIN, model: config.model.id })
  let engine: InProcessEngine
  try {
    engine = await startNodeLlamaCpp(config, hooks.gpuFacts)
  } catch (error) {
    const message = sanitizeMessage(`node-llama-cpp could not load ${config.model.path}: ${(error as Error).message}`, 4000)
    return failedCellRecord({ ...cell, baseUrl: NO_ORIGIN, model: config.model.id }, { code: 'ENGINE_EXITED', message, httpStatus: null, retryAfterS: null })
  }
  try {
    const transport: CellTransport = {
      send: (body, captureChars, signal) => engine.send(body, captureChars, signal, o.requestTimeoutMs),
      tokenizer: async () => ({ tokenizer: engine.tokenizer, warning: null }),
      close: async () => {},
    }
    const record = await measureCell(o, transport, 'in-process', { onProgress: hooks.onProgress, signal: hooks.signal })
    return { ...record, manifest: engine.manifest }
  } finally {
    await engine.stop()
  }
}
