import { ServegateError } from '../errors.ts'
import type { ArrivalPlan } from '../schema/load.ts'
import { arrivalPlan, arrivalSchedule } from './arrival.ts'
import type { ResolvedArrivalSpec } from './arrival-spec.ts'
import { loadTrace, traceReuseShare } from './trace.ts'

/** Per-request sizes a trace imposes on the workload (the synthetic prompts are sized to them), and the blocks it shares. */
interface RequestSize {
  promptTokens: number
  maxTokens: number
  /** The row's `hash_ids`: its prompt is these blocks, in order; null when the row has none. */
  hashIds: readonly number[] | null
}

/** Everything an open-loop cell needs before it starts: when each request goes, and its size when a trace says. */
export interface ArrivalSchedule {
  /** Send offset of each measured request, ms from the start of the measured phase. */
  offsetsMs: number[]
  /** Per-request sizes from a trace; null when the workload's own sizes apply. */
  sizes: RequestSize[] | null
  /** Tokens per block of the sizes' `hashIds`; null unless a replayed row has `hash_ids`. */
  blockTokens: number | null
  plan: ArrivalPlan
}

/**
 * Draws (or reads) the schedule of `requests` measured requests. A trace replays its first
 * `requests` rows, offsets multiplied by its `timeScale`; the plan states their reuse share.
 * @throws ServegateError `CONFIG_INVALID` when the trace has fewer rows than `requests`;
 *   `FILE_INVALID` for an unreadable or malformed trace
 */
export async function planArrivals(spec: ResolvedArrivalSpec, requests: number): Promise<ArrivalSchedule> {
  if (spec.kind !== 'trace') {
    const offsetsMs = arrivalSchedule(spec, requests)
    return { offsetsMs, sizes: null, blockTokens: null, plan: arrivalPlan(spec, offsetsMs, null) }
  }
  const trace = await loadTrace(spec.path)
  if (requests > trace.rows.length) {
    throw new ServegateError(
      'CONFIG_INVALID',
      `requests: ${requests} but the trace ${spec.path} has ${trace.rows.length} rows; ` +
        `pass requests ≤ ${trace.rows.length} (its first rows are replayed)`,
    )
  }
  const rows = trace.rows.slice(0, requests)
  const offsetsMs = rows.map((r) => r.offsetMs * spec.timeScale)
  const { blockTokens } = spec
  const facts = {
    path: trace.path,
    sha256: trace.sha256,
    rows: trace.rows.length,
    replayed: rows.length,
    timeScale: spec.timeScale,
    blockTokens,
  }
  const reuseShare = traceReuseShare(rows, blockTokens)
  return {
    offsetsMs,
    sizes: rows.map((r) => ({ promptTokens: r.promptTokens, maxTokens: r.outputTokens, hashIds: r.hashIds })),
    blockTokens: reuseShare === null ? null : blockTokens,
    plan: arrivalPlan(spec, offsetsMs, facts, reuseShare),
  }
}

/**
 * The arrival block of a cell that failed before its schedule was made: a rate schedule is
 * drawn (it needs no I/O), a trace is not read (its facts are null and its schedule empty).
 */
export function arrivalPlanUnread(spec: ResolvedArrivalSpec, requests: number): ArrivalPlan {
  return spec.kind === 'trace' ? arrivalPlan(spec, [], null) : arrivalPlan(spec, arrivalSchedule(spec, requests), null)
}
