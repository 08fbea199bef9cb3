import type { ArrivalPlan } from '../schema/load.ts'
import { arrivalPlan, arrivalSchedule } from './arrival.ts'
import type { ResolvedArrivalSpec } from './arrival-spec.ts'
import { type TraceRow, loadTrace, replayedRows, traceReuseShare } from './trace.ts'

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
  /**
   * A trace's sessions (`session_id` with `delay`): per request, the earlier request it waits for
   * and the delay after that one ends (null for a request sent at its own offset); null when no
   * request waits for another.
   */
  chain: ReadonlyArray<{ after: number; delayMs: number } | null> | null
  /** A trace's sessions: per request, its session (0-based, in order of first appearance) and turn (1-based); null without `session_id`. */
  turns: ReadonlyArray<{ session: number; turn: number } | null> | null
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
    return { offsetsMs, sizes: null, blockTokens: null, chain: null, turns: null, plan: arrivalPlan(spec, offsetsMs, null) }
  }
  const trace = await loadTrace(spec.path)
  const rows = replayedRows(trace, spec.path, requests)
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
    ...sessionsOf(rows, spec.timeScale),
    plan: arrivalPlan(spec, offsetsMs, facts, reuseShare),
  }
}

/** A trace's sessions: which request waits for which (its delay scaled as the offsets are), and each request's session and turn. */
function sessionsOf(rows: readonly TraceRow[], timeScale: number): Pick<ArrivalSchedule, 'chain' | 'turns'> {
  const ids = new Map<string, number>()
  const turns = rows.map((r) => {
    if (r.sessionId === null || r.turn === null) return null
    let session = ids.get(r.sessionId)
    if (session === undefined) ids.set(r.sessionId, (session = ids.size))
    return { session, turn: r.turn }
  })
  const chain = rows.map((r) => (r.after === null ? null : { after: r.after, delayMs: (r.delayMs ?? 0) * timeScale }))
  return { chain: chain.some((c) => c !== null) ? chain : null, turns: turns.some((t) => t !== null) ? turns : null }
}

/**
 * The arrival block of a cell that failed before its schedule was made: a rate schedule is
 * drawn (it needs no I/O), a trace is not read (its facts are null and its schedule empty).
 */
export function arrivalPlanUnread(spec: ResolvedArrivalSpec, requests: number): ArrivalPlan {
  return spec.kind === 'trace' ? arrivalPlan(spec, [], null) : arrivalPlan(spec, arrivalSchedule(spec, requests), null)
}
