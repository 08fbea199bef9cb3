import type { MatcherState } from 'vitest'
import { parseOptions, ReuseCacheGateOptions } from '../gates/gate-options.ts'
import { reuseCacheGate } from '../gates/reuse-cache.ts'
import { armsOf, gateResult } from './decision.ts'
import { asSubject } from './subject.ts'

/**
 * Options of `toReuseCache`: the least cached share of prompt tokens, the arm of a pair to judge,
 * and the conversation turns.
 */
export type ReuseCacheOptions = Omit<ReuseCacheGateOptions, 'gate'>

const USAGE = "pass { atLeast, arm?: 'baseline' | 'candidate', turns?: { from, to? } }, e.g. { atLeast: 0.5 }"

/**
 * The engine's prefix cache served at least `atLeast` of the prompt tokens: the share the engine
 * reported (`usage.prompt_tokens_details.cached_tokens`, llama.cpp's `timings.cache_n`) over the
 * ok requests, by default over turns ≥ 2 of a conversation and every request otherwise. On a pair
 * both arms must reach it unless `arm` names one. An engine that reported no cached tokens fails
 * with the reason, never passes: a misconfigured prefix cache is a failed test with its figures.
 */
export function toReuseCache(this: MatcherState, received: unknown, options: ReuseCacheOptions) {
  if (options === null || typeof options !== 'object') throw new TypeError(`toReuseCache: ${USAGE}`)
  const o = parseOptions('toReuseCache', ReuseCacheGateOptions, { ...options, gate: 'toReuseCache' })
  const s = asSubject('toReuseCache', received)
  if (o.arm !== undefined && s.kind === 'cell') {
    throw new TypeError(`toReuseCache: arm '${o.arm}' names an arm of a pair, but ${s.id} is one cell; remove arm`)
  }
  const arms = armsOf(s)
  return gateResult(this, 'toReuseCache', s, () => reuseCacheGate('cell' in arms ? { cell: arms.cell } : arms, o), o)
}
