import { type EngineConfig, type ResolvedEngineConfig, resolveEngineConfig } from '../engines/config.ts'
import { type GpuFactsProbe, launchEngine, type RunningEngine } from '../engines/launch.ts'
import { type InProcessEngine, startNodeLlamaCpp } from '../engines/node-llama-cpp.ts'
import { sanitizeMessage, ServegateError } from '../errors.ts'
import type { PhaseListener } from '../schema/progress.ts'
import type { ErrorInfo, RunRecord } from '../schema/run.ts'
import { type CellTransport, failedCellRecord, measureCell, runCell, type RunCellHooks } from './measure-cell.ts'
import { type CellOptions, resolveCellOptions } from './cell-options.ts'
import { startTelemetry, type TelemetryOptions } from './cell-telemetry.ts'

/** A cell on an engine servegate launches: everything but where to send and the model name. */
export type EngineCellOptions = Omit<CellOptions, 'baseUrl' | 'model'>

export interface EngineCellHooks extends Omit<RunCellHooks, 'engine'> {
  /** GPU facts for the manifest (nvidia-smi); injected by the composition root. */
  gpuFacts: GpuFactsProbe
  /** GPU sampling, Prometheus scraping and host memory during the cell; false turns them off. */
  telemetry?: TelemetryOptions | false
}

/** An engine servegate started: over HTTP (a process or an external URL) or in-process. */
export type LiveEngine =
  | { shape: 'http'; model: string; engine: RunningEngine }
  | { shape: 'in-process'; model: string; engine: InProcessEngine; config: Extract<ResolvedEngineConfig, { kind: 'node-llama-cpp' }> }

/** Why an engine could not be started, as a cell failure; null for a config error (rethrown). */
function startFailure(error: unknown, config: ResolvedEngineConfig): ErrorInfo | null {
  if (error instanceof ServegateError && error.code !== 'CONFIG_INVALID') {
    return { code: error.code, message: sanitizeMessage(error.message, 4000), httpStatus: null, retryAfterS: null }
  }
  if (config.kind === 'node-llama-cpp' && !(error instanceof ServegateError)) {
    const message = sanitizeMessage(`node-llama-cpp could not load ${config.model.path}: ${(error as Error).message}`, 4000)
    return { code: 'ENGINE_EXITED', message, httpStatus: null, retryAfterS: null }
  }
  return null
}

/**
 * Starts an engine from its config: launches it (or connects, or loads it in-process) and
 * waits until it is ready. Returns the failure instead of throwing when it does not start.
 * `onPhase` hears `launching`, then the wait for readiness of a launched process.
 * @throws ServegateError CONFIG_INVALID for a bad config
 */
export async function startEngine(
  input: EngineConfig,
  gpuFacts: GpuFactsProbe,
  signal?: AbortSignal,
  onPhase?: PhaseListener,
): Promise<LiveEngine | { failure: ErrorInfo }> {
  const config = resolveEngineConfig(input)
  onPhase?.({ phase: 'launching' })
  try {
    if (config.kind === 'node-llama-cpp')
      return { shape: 'in-process', model: config.model.id, engine: await startNodeLlamaCpp(config, gpuFacts), config }
    const engine = await launchEngine(config, gpuFacts, signal, onPhase)
    return { shape: 'http', model: engine.model, engine }
  } catch (error) {
    const failure = startFailure(error, config)
    if (failure === null) throw error
    return { failure }
  }
}

/** The placeholder origin of cells that send nothing over HTTP (in-process, or failed to start). */
const NO_ORIGIN = 'http://127.0.0.1:1'

/** The record of a cell whose engine never ran it. */
export function engineFailedRecord(cell: EngineCellOptions, model: string, failure: ErrorInfo): RunRecord {
  return failedCellRecord({ ...cell, baseUrl: NO_ORIGIN, model }, failure)
}

/**
 * Measures one cell on an engine that is running (left running afterwards): telemetry around
 * it, and a mid-cell exit turned into the record's `cellFailure`. Never throws for an engine
 * failure.
 */
export async function measureOnEngine(live: LiveEngine, cell: EngineCellOptions, hooks: EngineCellHooks): Promise<RunRecord> {
  if (live.shape === 'in-process') return measureInProcess(live, cell, hooks)
  const { engine } = live
  const already = engine.failure()
  if (already !== null) return engineFailedRecord(cell, engine.model, already)
  const telemetry = hooks.telemetry === false ? null : startTelemetry(engine, cell.concurrency ?? 1, hooks.telemetry)
  let finished = false
  try {
    const exited = engine.process?.exited ?? new Promise<never>(() => {})
    const record = await runCell(
      { ...cell, baseUrl: engine.baseUrl, model: engine.model },
      {
        onProgress: hooks.onProgress,
        onPhase: hooks.onPhase,
        signal: hooks.signal,
        engine: { exited, failure: () => engine.failure() },
        onMeasureStart: () => telemetry?.markLoadStart(),
        stages: hooks.stages,
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
  }
}

/**
 * An in-process engine measured by the same core as HTTP ones: the same bodies, the same
 * observation per request, the same record; only the transport differs (and is recorded).
 */
async function measureInProcess(
  live: Extract<LiveEngine, { shape: 'in-process' }>,
  cell: EngineCellOptions,
  hooks: EngineCellHooks,
): Promise<RunRecord> {
  const o = resolveCellOptions({ ...cell, baseUrl: NO_ORIGIN, model: live.model })
  const transport: CellTransport = {
    send: (body, captureChars, signal) => live.engine.send(body, captureChars, signal, o.requestTimeoutMs),
    tokenizer: async () => ({ tokenizer: live.engine.tokenizer, warning: null }),
    close: async () => {},
  }
  const record = await measureCell(o, transport, 'in-process', {
    onProgress: hooks.onProgress,
    onPhase: hooks.onPhase,
    signal: hooks.signal,
    stages: hooks.stages,
  })
  return { ...record, manifest: live.engine.manifest }
}

/** Stops a started engine (the whole process tree, or the in-process model). */
export async function stopEngine(live: LiveEngine): Promise<void> {
  await live.engine.stop()
}

/**
 * Launches an engine, measures one cell on it, and tears it down whatever happens. An engine
 * that fails to start, or exits mid-cell, yields a record with `cellFailure` (exit code and log
 * tail) and whatever was measured before; it never throws for an engine failure.
 * @throws ServegateError CONFIG_INVALID for a bad engine or cell config
 */
export async function runEngineCell(engineConfig: EngineConfig, cell: EngineCellOptions, hooks: EngineCellHooks): Promise<RunRecord> {
  const started = await startEngine(engineConfig, hooks.gpuFacts, hooks.signal, hooks.onPhase)
  if ('failure' in started) return engineFailedRecord(cell, engineConfig.model.id, started.failure)
  try {
    return await measureOnEngine(started, cell, hooks)
  } finally {
    hooks.onPhase?.({ phase: 'tearing-down' })
    await stopEngine(started)
  }
}
