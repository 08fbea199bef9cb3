import { createHash } from 'node:crypto'
import { readEngineFiles } from '../engines/adapters.ts'
import { type EngineConfig, resolveEngineConfig } from '../engines/config.ts'
import { requireNodeLlamaCpp } from '../engines/node-llama-cpp.ts'
import type { EngineRef } from '../runner/engine-lifecycle.ts'
import { simCommandConfig, type SimEngineConfig } from '../sim/sim-engine.ts'
import { declaring } from './declaration-errors.ts'

export type { SimEngineConfig } from '../sim/sim-engine.ts'

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
  /**
   * A deployment on Kubernetes, through kubectl or helm: applied or installed, waited on, measured
   * at `baseUrl`, and removed and checked gone after the file (docs/engines.md#kubernetes).
   * @example const vllm = engine.kubernetes({ baseUrl: 'http://gw.internal:80', model, manifest: 'deploy/vllm.yaml', rollout: ['deployment/vllm'] })
   */
  kubernetes: (c: Without<'kubernetes'>): EngineHandle => handle({ kind: 'kubernetes', ...c }),
  /** llama.cpp in-process; needs the optional peer dependency `node-llama-cpp` (checked here, at declaration). */
  nodeLlamaCpp: (c: Without<'node-llama-cpp'>): EngineHandle => {
    declaring(requireNodeLlamaCpp)
    return handle({ kind: 'node-llama-cpp', ...c })
  },
  /**
   * servegate's simulated engine (no GPU, no model) in a child process: a batching
   * OpenAI-compatible server whose speeds you set, for trying a suite on any machine.
   * @example const candidate = engine.sim({ model: { id: 'sim-model' }, sim: { decodeTokPerS: 120 } })
   */
  sim: (c: SimEngineConfig = {}): EngineHandle => handle(declaring(() => simCommandConfig(c))),
}
