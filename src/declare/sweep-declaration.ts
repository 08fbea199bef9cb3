import { type ResolvedCellPlan, resolveCellPlan } from '../runner/cell-options.ts'
import type { SweepResult } from '../schema/results.ts'
import { expandLadder, type Ladder } from '../load/ladder.ts'
import { joinLadder } from '../worker/cell-registry.ts'
import { declaring } from './declaration-errors.ts'
import {
  cell,
  type CellResult,
  type CellSpec,
  type LadderStep,
  lazy,
  type Lazy,
  pair,
  type PairResult,
  type PairSpec,
  planId,
} from './cell-declarations.ts'
import { rungIds } from './rung-id.ts'

/**
 * A declared sweep: awaiting it measures every rung in order; each rung can also be awaited on its
 * own (`steps[i].result`), e.g. from `describe.each(s.steps)`.
 */
export interface Sweep<R extends CellResult | PairResult> extends Lazy<SweepResult<R>> {
  readonly id: string
  readonly axis: 'rate' | 'concurrency'
  readonly steps: ReadonlyArray<{ readonly id: string; readonly value: number; readonly result: Lazy<R> }>
}

export type CellSweepSpec = CellSpec & { ladder: Ladder }
export type PairSweepSpec = PairSpec & { ladder: Ladder }

function withLadder<R extends CellResult | PairResult>(result: Lazy<R>, step: LadderStep): Lazy<R> {
  return lazy(async () => ({ ...(await result), ladder: step }))
}

/**
 * Declares a ladder of cells (one engine) or pairs (baseline and candidate) once: a rung per rate
 * (open loop) or concurrency (closed loop), each an ordinary cell with a short, distinct id: the
 * sweep's `id` (or `<engine>-<workload>-ctx<prompt>`) then `-r<rate>` or `-c<concurrency>`, e.g.
 * `candidate-synthetic-summary-ctx10240-r8` or, with `id: 'ttft'`, `ttft-r8`. Rungs share the file's
 * engine launches, run lazily, and carry their place on the ladder (`ladder`) so the evidence keeps them together.
 * @example const s = sweep({ engine: candidate, ladder: { rates: [2, 4, 8], durationS: 20 }, arrival: { kind: 'poisson', ratePerS: 1 } })
 * test('meets its SLO at 4 req/s', async () => expect(await s).toMeetSLO({ ttftMs: 500, atRate: 4 }))
 */
export function sweep(spec: CellSweepSpec): Sweep<CellResult>
export function sweep(spec: PairSweepSpec): Sweep<PairResult>
export function sweep(spec: CellSweepSpec | PairSweepSpec): Sweep<CellResult> | Sweep<PairResult> {
  return declaring(() => {
    const { ladder, id, ...options } = spec
    const rungs = expandLadder(ladder, options)
    const name = 'engine' in spec ? spec.engine.name : `${spec.baseline.name}-vs-${spec.candidate.name}`
    const axis = rungs[0]?.axis ?? 'rate'
    // The plan alone (no engines, ids or launches), resolved for the ids; each rung's cell checks its own.
    const planOf = (o: object): ResolvedCellPlan => {
      const { engine: _e, baseline: _b, candidate: _c, repeats: _r, required: _q, stopEarly: _s, ...plan } = o as Record<string, unknown>
      return resolveCellPlan(plan, id === undefined ? 'sweep' : `sweep "${id}"`)
    }
    const prefix = id ?? planId(name, planOf(options))
    const sweepId = id ?? `${prefix}-${axis}-sweep`
    // Each rung's plan is checked here, before any engine starts; its id is the ladder's name and its value.
    for (const rung of rungs) planOf(rung.options)
    const ids = rungIds(
      prefix,
      axis,
      rungs.map((r) => r.value),
    )
    const steps = rungs.map((rung, index) => {
      const stepId = ids[index] as string
      const place: LadderStep = { sweep: sweepId, axis, value: rung.value, index, of: rungs.length }
      const result =
        'engine' in rung.options
          ? withLadder(cell({ ...(rung.options as CellSpec), id: stepId }), place)
          : withLadder(pair({ ...(rung.options as PairSpec), id: stepId }), place)
      joinLadder(stepId, sweepId)
      return { id: stepId, value: rung.value, result }
    })
    const all = lazy(async () => {
      const measured = []
      for (const step of steps) measured.push({ id: step.id, value: step.value, result: await step.result })
      return { kind: 'sweep' as const, id: sweepId, axis, steps: measured }
    })
    return { id: sweepId, axis, steps, run: all.run, then: all.then } as Sweep<CellResult> | Sweep<PairResult>
  })
}

export type { SweepResult } from '../schema/results.ts'
