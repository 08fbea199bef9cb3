import { engineCpuCores, type ResolvedEngineConfig } from '../engines/config.ts'
import { DeploymentFailed } from '../engines/kubernetes.ts'
import { type LaunchContext, launchEngine, type RunningEngine } from '../engines/launch.ts'
import { type InProcessEngine, startNodeLlamaCpp } from '../engines/node-llama-cpp.ts'
import { sanitizeMessage, ServegateError } from '../errors.ts'
import type { PhaseListener } from '../schema/progress.ts'
import { EngineKind } from '../schema/telemetry.ts'
import type { EngineTeardown, ErrorInfo, RunRecord } from '../schema/run.ts'
import type { ResolvedCellPlan } from './cell-options.ts'
import { startTelemetry } from './cell-telemetry.ts'
import type { CellTransport } from './cell-transport.ts'
import type { Environment } from './environment.ts'
import { measureCell, runCell, type RunCellHooks } from './measure-cell.ts'
import { isolatePrefixCache } from './prefix-cache-isolation.ts'
import { failedCellRecord } from './run-record.ts'

/** An engine as the runner knows it: a resolved config, a name for people, an id for sharing. */
export interface EngineRef {
  /** Equal for equal configs: cells of a file share one launch per id. */
  readonly id: string
  readonly name: string
  readonly config: ResolvedEngineConfig
}

/** What a measurement on an engine hears and obeys, besides the environment. */
export type EngineCellHooks = Pick<RunCellHooks, 'onProgress' | 'onPhase' | 'signal' | 'stages' | 'spill' | 'shard'>

/** An engine servegate started: over HTTP (a process or an external URL) or in-process. */
export type LiveEngine =
  | { shape: 'http'; model: string; engine: RunningEngine; /** CPU cores the engine takes on this machine. */ cpuCores: number }
  | { shape: 'in-process'; model: string; engine: InProcessEngine; config: Extract<ResolvedEngineConfig, { kind: 'node-llama-cpp' }> }

/**
 * A started engine, or why it did not start; with how a partial launch was torn down where
 * there was one to tear down (a Kubernetes deployment whose rollout failed).
 */
export type Started = LiveEngine | { failure: ErrorInfo; teardown?: EngineTeardown }

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
  config: ResolvedEngineConfig,
  context: LaunchContext,
  signal?: AbortSignal,
  onPhase?: PhaseListener,
): Promise<Started> {
  onPhase?.({ phase: 'launching' })
  try {
    if (config.kind === 'node-llama-cpp') {
      return { shape: 'in-process', model: config.model.id, engine: await startNodeLlamaCpp(config, context.gpuFacts), config }
    }
    const engine = await launchEngine(config, context, signal, onPhase)
    return { shape: 'http', model: engine.model, engine, cpuCores: engineCpuCores(config) }
  } catch (error) {
    const failure = startFailure(error, config)
    if (failure === null) throw error
    return error instanceof DeploymentFailed ? { failure, teardown: error.teardown } : { failure }
  }
}

/** The placeholder origin of cells that send nothing over HTTP (in-process, or failed to start). */
const NO_ORIGIN = 'http://127.0.0.1:1'

/** The record of a cell whose engine never ran it. */
export function engineFailedRecord(plan: ResolvedCellPlan, model: string, failure: ErrorInfo, env: Pick<Environment, 'clock'>): RunRecord {
  return failedCellRecord({ ...plan, baseUrl: NO_ORIGIN, model }, failure, null, env.clock)
}

/**
 * Why a cell on a launched engine could not run, found once the engine was up (its served model
 * is not the one asked for, the cell's sizes exceed its context): the cell's failure, so that the
 * launch gets its record. Null for an external endpoint (nothing was launched: the caller's
 * input was wrong) and for a bug, which are rethrown.
 */
function failureAfterLaunch(error: unknown, engine: RunningEngine): ErrorInfo | null {
  if (engine.process === null || !(error instanceof ServegateError)) return null
  if (error.code === 'INTERNAL') return null
  return { code: error.code, message: sanitizeMessage(error.message, 4000), httpStatus: null, retryAfterS: null }
}

/**
 * Measures one cell on an engine that is running (left running afterwards): the environment's
 * telemetry around it, and a mid-cell exit, or a launched engine that cannot run the cell (see
 * failureAfterLaunch), turned into the record's `cellFailure`. Never throws for an engine failure.
 */
export async function measureOnEngine(
  live: LiveEngine,
  plan: ResolvedCellPlan,
  env: Environment,
  hooks: EngineCellHooks = {},
): Promise<RunRecord> {
  if (live.shape === 'in-process') return measureInProcess(live, plan, env, hooks)
  const { engine } = live
  const already = engine.failure()
  if (already !== null) return engineFailedRecord(plan, engine.model, already, env)
  const telemetry = env.telemetry === false ? null : startTelemetry(engine, plan.concurrency, env.telemetry)
  let finished = false
  try {
    const exited = engine.process?.exited ?? new Promise<never>(() => {})
    const isolation = { kind: engine.kind, baseUrl: engine.baseUrl, argv: engine.manifest.engine.argv }
    const prefixCacheReset = await isolatePrefixCache(isolation, plan, hooks.signal)
    const record = await runCell(
      { ...plan, baseUrl: engine.baseUrl, model: engine.model, ...engine.access },
      {
        ...hooks,
        clock: env.clock,
        engine: { exited, failure: () => engine.failure() },
        engineCores: live.cpuCores,
        metrics: metricsOf(engine),
        onMeasureStart: () => telemetry?.markLoadStart(),
      },
    )
    finished = true
    const observed = telemetry === null ? null : await telemetry.finish(record, hooks.spill?.inOrder() ?? record.requests)
    // The engine's own counters (drafts included) over its replies' timings, where it exports them.
    const specDecode = telemetry?.specDecode() ?? record.metrics.specDecode
    return {
      ...record,
      metrics: { ...record.metrics, specDecode },
      plan: { ...record.plan, prefixCacheReset },
      manifest: engine.manifest,
      telemetry: observed,
      cellFailure: engine.failure() ?? record.cellFailure,
    }
  } catch (error) {
    const failure = engine.failure() ?? failureAfterLaunch(error, engine)
    if (failure === null) throw error
    // The engine died before load began (e.g. during the endpoint probe), or cannot serve the
    // cell: the cell failed with it.
    return failedCellRecord({ ...plan, baseUrl: engine.baseUrl, model: engine.model }, failure, engine.manifest, env.clock)
  } finally {
    if (!finished) await telemetry?.cancel()
  }
}

/** A launched engine's Prometheus endpoint, its names known by its kind (recognized from a scrape for a command or an external URL). */
function metricsOf(engine: RunningEngine): RunCellHooks['metrics'] {
  if (engine.metricsUrl === null) return null
  const kind = EngineKind.safeParse(engine.kind)
  return { url: engine.metricsUrl, kind: kind.success ? kind.data : null, modelName: engine.model }
}

/**
 * An in-process engine measured by the same core as HTTP ones: the same bodies, the same
 * observation per request, the same record; only the transport differs (and is recorded).
 */
async function measureInProcess(
  live: Extract<LiveEngine, { shape: 'in-process' }>,
  plan: ResolvedCellPlan,
  env: Environment,
  hooks: EngineCellHooks,
): Promise<RunRecord> {
  const o = { ...plan, baseUrl: NO_ORIGIN, model: live.model, remote: false }
  const transport: CellTransport = {
    send: (body, capture, signal) => live.engine.send(body, capture, signal, o.requestTimeoutMs),
    tokenizer: async () => ({ tokenizer: live.engine.tokenizer, warning: null }),
    engineInProcess: true,
    close: async () => {},
  }
  const prefixCacheReset = await isolatePrefixCache('in-process', plan)
  const record = await measureCell(o, transport, 'in-process', { ...hooks, clock: env.clock })
  return { ...record, plan: { ...record.plan, prefixCacheReset }, manifest: live.engine.manifest }
}

/**
 * Stops a started engine (the whole process tree, or the in-process model): how a launched
 * process tree went down, or null when servegate launched no process.
 */
export async function stopEngine(live: LiveEngine): Promise<EngineTeardown | null> {
  if (live.shape === 'in-process') {
    await live.engine.stop()
    return null
  }
  return live.engine.stop()
}

/** The record of a cell measured on an engine launched for it alone, with how that engine went down. */
export function withTeardown(record: RunRecord, teardown: EngineTeardown | null): RunRecord {
  return teardown === null ? record : { ...record, teardown }
}
