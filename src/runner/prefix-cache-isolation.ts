import { resetPrefixCache } from '../engines/prefix-cache-reset.ts'
import type { PrefixCacheReset } from '../schema/run.ts'
import type { ResolvedCellPlan } from './cell-options.ts'

/**
 * Whether a cell's requests reuse prompt prefixes, so that what an earlier cell left in the
 * engine's prefix cache would change its figures: shared-prefix groups, conversations, a shared
 * prefix block on any workload, and a replayed trace (whose requests share blocks by `hash_ids`).
 * @example reusesPrefixes({ workload: { kind: 'conversation', … }, arrival: null }) // true
 */
export function reusesPrefixes(plan: {
  workload: Pick<ResolvedCellPlan['workload'], 'kind' | 'prefixCache'>
  arrival: Pick<NonNullable<ResolvedCellPlan['arrival']>, 'kind'> | null
}): boolean {
  const { workload, arrival } = plan
  return (
    workload.kind === 'shared-prefix' ||
    workload.kind === 'conversation' ||
    workload.prefixCache.mode === 'shared' ||
    arrival?.kind === 'trace'
  )
}

/** Why an in-process engine's cache is not reset. */
const IN_PROCESS: PrefixCacheReset = {
  status: 'not-offered',
  endpoints: [],
  reason: 'an in-process engine (node-llama-cpp): servegate has no reset for the cache of its context',
}

/**
 * Before a cell whose requests reuse prefixes, empties the engine's prefix cache as the engine
 * offers it (see `resetPrefixCache`) and says how that went, for the record's
 * `plan.prefixCacheReset`; null for a cell that reuses none (nothing is called). Never throws.
 * @param engine an HTTP engine (its kind, origin and launch argv), or `'in-process'`
 */
export async function isolatePrefixCache(
  engine: { kind: string; baseUrl: string; argv: readonly string[] | null } | 'in-process',
  plan: Pick<ResolvedCellPlan, 'workload' | 'arrival' | 'apiKey'>,
  signal?: AbortSignal,
): Promise<PrefixCacheReset | null> {
  if (!reusesPrefixes(plan)) return null
  if (engine === 'in-process') return IN_PROCESS
  return resetPrefixCache({ ...engine, apiKey: plan.apiKey }, signal)
}
