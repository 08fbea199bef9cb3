import { createHash } from 'node:crypto'
import { fileURLToPath } from 'node:url'
import { afterAll, inject } from 'vitest'
import { type EngineConfig, type ResolvedEngineConfig, resolveEngineConfig } from '../engines/config.ts'
import type { GpuFactsProbe } from '../engines/launch.ts'
import { requireNodeLlamaCpp } from '../engines/node-llama-cpp.ts'
import { ServegateError } from '../errors.ts'
import { type LiveEngine, startEngine, stopEngine } from '../runner/engine-lifecycle.ts'
import { nvidiaSmiGpuFacts } from '../runner/gpu-facts.ts'
import type { PhaseListener } from '../schema/progress.ts'
import type { ErrorInfo } from '../schema/run.ts'
import { resolveSimOptions, type SimOptions } from '../sim/sim-options.ts'
import { PhaseFeed, progressChannel } from '../runner/phase-feed.ts'

/** servegate's own CLI (the compiled one where the package is installed). */
const SERVEGATE_BIN = fileURLToPath(new URL('../../bin/servegate.js', import.meta.url))

/** The simulated engine as a spec declares it: a model name and the sim's own options. */
export interface SimEngineConfig {
  /** Spec-facing name of the arm's engine. @default 'sim:<model id>' */
  name?: string
  /** The served model name. @default { id: 'sim-model' } */
  model?: { id: string; revision?: string | null }
  /** The simulated engine's speed, batching, faults… (`servegate sim --help`); host, port and model are set by the cell. */
  sim?: Omit<SimOptions, 'host' | 'port' | 'model'>
  /** Deadline for the simulated engine to answer `/health`, ms. @default 30000 */
  startupTimeoutMs?: number
}

/** An engine declared in a spec: its config and an id derived from it. Launched on first use. */
export interface EngineHandle {
  readonly id: string
  readonly name: string
  readonly config: ResolvedEngineConfig
}

type Without<K extends EngineConfig['kind']> = Omit<Extract<EngineConfig, { kind: K }>, 'kind'> & { name?: string }

function handle(input: EngineConfig & { name?: string }): EngineHandle {
  const { name, ...raw } = input
  const config = resolveEngineConfig(raw)
  const id = createHash('sha256').update(JSON.stringify(config)).digest('hex').slice(0, 12)
  return { id, name: name ?? `${config.kind}:${config.model.id}`, config }
}

/**
 * Engine declarations for specs. Each returns a handle; the engine is launched the first time a
 * cell needs it, shared by every cell of the file that uses the same config, and torn down
 * after the file.
 * @example const baseline = engine.vllm({ model: { id: 'Qwen/Qwen3-8B', revision: '5112966d' } })
 */
export const engine = {
  vllm: (c: Without<'vllm'>): EngineHandle => handle({ kind: 'vllm', ...c }),
  sglang: (c: Without<'sglang'>): EngineHandle => handle({ kind: 'sglang', ...c }),
  llamaServer: (c: Without<'llama-server'>): EngineHandle => handle({ kind: 'llama-server', ...c }),
  trtllm: (c: Without<'trtllm'>): EngineHandle => handle({ kind: 'trtllm', ...c }),
  command: (c: Without<'command'>): EngineHandle => handle({ kind: 'command', ...c }),
  external: (c: Without<'external'>): EngineHandle => handle({ kind: 'external', ...c }),
  /** llama.cpp in-process; needs the optional peer dependency `node-llama-cpp` (checked here, at declaration). */
  nodeLlamaCpp: (c: Without<'node-llama-cpp'>): EngineHandle => {
    requireNodeLlamaCpp()
    return handle({ kind: 'node-llama-cpp', ...c })
  },
  /**
   * servegate's simulated engine (no GPU, no model) in a child process: a batching
   * OpenAI-compatible server whose speeds you set, for trying a suite on any machine.
   * @example const candidate = engine.sim({ model: { id: 'sim-model' }, sim: { decodeTokPerS: 120 } })
   */
  sim: (c: SimEngineConfig = {}): EngineHandle => {
    const model = { id: c.model?.id ?? 'sim-model', revision: c.model?.revision ?? null }
    const options = { ...(c.sim ?? {}) }
    for (const key of ['host', 'port', 'model'] as const) {
      if (key in options)
        throw new ServegateError('CONFIG_INVALID', `engine.sim: sim.${key} is set by the cell; remove it (the model name goes in model.id)`)
    }
    resolveSimOptions({ ...options, model: model.id })
    return handle({
      kind: 'command',
      name: c.name ?? `sim:${model.id}`,
      argv: [process.execPath, SERVEGATE_BIN, 'sim', '--port', '{port}', '--model', '{modelId}', '--options', JSON.stringify(options)],
      model,
      startupTimeoutMs: c.startupTimeoutMs ?? 30_000,
    })
  },
}

type Started = LiveEngine | { failure: ErrorInfo }

/** Engines of this file (one vitest worker runs one file at a time): shared per config, stopped after the file. */
const shared = new Map<string, { name: string; started: Promise<Started> }>()
let hookRegistered = false

function gpuFacts(): GpuFactsProbe {
  let executable: string | undefined
  try {
    executable = (inject as (key: string) => { nvidiaSmi?: string } | undefined)('servegate')?.nvidiaSmi
  } catch {
    executable = undefined
  }
  return nvidiaSmiGpuFacts(executable)
}

/** Set by the plugin's setup file, whose file-level hook then stops the engines after the whole file. */
let fileHookInstalled = false

/** Called by the plugin's setup file: engines are stopped by its file-level hook, not a suite's. */
export function useFileTeardown(): void {
  fileHookInstalled = true
}

/** Stops every shared engine of this file (the whole process trees), each saying so. */
export async function stopSharedEngines(): Promise<void> {
  const engines = [...shared.values()]
  shared.clear()
  const settled = await Promise.all(engines.map(async ({ name, started }) => ({ name, started: await started })))
  const send = progressChannel()
  for (const { name, started } of settled) {
    if ('failure' in started) continue
    const feed = new PhaseFeed({ cell: null, arm: null, engine: name, step: null }, send)
    feed.phase({ phase: 'tearing-down' })
    await stopEngine(started)
    feed.phase({ phase: 'stopped' })
  }
}

/**
 * Registers the file's teardown when the plugin's setup file did not (a spec run without the
 * plugin): an `afterAll` of the suite being collected.
 */
export function registerTeardown(): void {
  if (hookRegistered || fileHookInstalled) return
  hookRegistered = true
  afterAll(async () => {
    hookRegistered = false
    await stopSharedEngines()
  })
}

/** The file's shared instance of an engine, launched on first use; `onPhase` hears its start-up when this call launches it. */
export function sharedEngine(h: EngineHandle, onPhase?: PhaseListener): Promise<Started> {
  let entry = shared.get(h.id)
  if (entry === undefined) {
    entry = { name: h.name, started: startEngine(h.config, gpuFacts(), undefined, onPhase) }
    shared.set(h.id, entry)
  }
  return entry.started
}

/** A fresh launch of an engine, for repeats (launch-to-launch variation needs new processes). */
export function freshEngine(h: EngineHandle, onPhase?: PhaseListener): Promise<Started> {
  return startEngine(h.config, gpuFacts(), undefined, onPhase)
}
