import type { FaultKind, ResolvedSimOptions } from './sim-options.ts'
import { createRandom, mixSeed } from '../random.ts'

/** Decides the fault of each completion request, called once per request in arrival order. */
export type FaultPlan = (requestIndex: number) => FaultKind | null

const FAULT_STREAM = 0x66_61_75_6c

/**
 * Builds the deterministic fault plan: a request listed in `faults` takes that kind; otherwise it
 * draws against `faultRate` and, when hit, takes the next of `faultKinds` round-robin. Every
 * request draws, listed or not, so adding a listed fault does not shift the random ones.
 * @example const plan = createFaultPlan({ faults: [{ kind: 'drop', requests: [1] }], faultRate: 0, faultKinds: ['stall'], seed: 0 })
 * plan(0) // null
 * plan(1) // 'drop'
 */
export function createFaultPlan(options: Pick<ResolvedSimOptions, 'faults' | 'faultRate' | 'faultKinds' | 'seed'>): FaultPlan {
  const listed = new Map<number, FaultKind>()
  for (const { kind, requests } of options.faults) {
    for (const index of requests) if (!listed.has(index)) listed.set(index, kind)
  }
  const random = createRandom(mixSeed(options.seed, FAULT_STREAM))
  let hits = 0
  return (requestIndex) => {
    const draw = random()
    const kind = listed.get(requestIndex)
    if (kind) return kind
    if (draw >= options.faultRate) return null
    return options.faultKinds[hits++ % options.faultKinds.length] ?? null
  }
}
