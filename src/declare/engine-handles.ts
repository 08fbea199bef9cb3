import { createHash } from 'node:crypto'
import { fileURLToPath } from 'node:url'
import { readEngineFiles } from '../engines/adapters.ts'
import { type EngineConfig, resolveEngineConfig } from '../engines/config.ts'
import { requireNodeLlamaCpp } from '../engines/node-llama-cpp.ts'
import { ServegateError } from '../errors.ts'
import type { EngineRef } from '../runner/engine-lifecycle.ts'
import { resolveSimOptions, type SimOptions } from '../sim/sim-options.ts'
import { declaring } from './declaration-errors.ts'

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
export type EngineHandle = EngineRef

/** Whether a value is an engine handle (what `engine.*` returns). */
export function isEngineHandle(value: unknown): value is EngineHandle {
  const h = value as Partial<EngineHandle> | null
  return typeof h?.id === 'string' && typeof h.name === 'string' && typeof h.config === 'object' && h.config !== null
}

type Without<K extends EngineConfig['kind']> = Omit<Extract<EngineConfig, { kind: K }>, 'kind'> & { name?: string }

/** A declared engine: its config resolved and the files servegate reads at its launch read now. */
function handle(input: EngineConfig & { name?: string }): EngineHandle {
  return declaring(() => {
    const { name, ...raw } = input
    const config = resolveEngineConfig(raw)
    readEngineFiles(config)
    const id = createHash('sha256').update(JSON.stringify(config)).digest('hex').slice(0, 12)
    return { id, name: name ?? `${config.kind}:${config.model.id}`, config }
  })
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
