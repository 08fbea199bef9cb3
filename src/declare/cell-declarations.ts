import { ServegateError } from '../errors.ts'
import { type CellPlan, type ResolvedCellPlan, resolveCellPlan } from '../runner/cell-options.ts'
import type { PairRun } from '../runner/runner.ts'
import { resolveStopEarly, type StopEarly } from '../runner/staged-pair.ts'
import { lengthLabel } from '../schema/lengths.ts'
import type { CellResult, PairResult } from '../schema/results.ts'
import { readDeclaredFiles } from '../runner/declared-files.ts'
import { declaring } from './declaration-errors.ts'
import { type EngineHandle, isEngineHandle } from './engine-handles.ts'
import { declareCell, tracked } from '../worker/cell-registry.ts'
import { registerTeardown, workerRunner } from './worker-environment.ts'

export type { CellResult, LadderStep, PairResult } from '../schema/results.ts'

export interface CellSpec extends CellPlan {
  engine: EngineHandle
  /** Shown in evidence; defaults to engine, workload, context and concurrency. */
  id?: string
  /** Promotion needs every required cell accepted. @default true */
  required?: boolean
  /** Launches of the engine, each a fresh process; 1 reuses the file's shared engine. @default 1 */
  repeats?: number
  /** The most of its requests that may fail (a share, 0–1) before the cell is `failed`. @default 0 when required, else no limit */
  maxFailedShare?: number
}

export interface PairSpec extends CellPlan {
  baseline: EngineHandle
  candidate: EngineHandle
  id?: string
  /** Promotion needs every required pair accepted. @default true */
  required?: boolean
  /** Launches per arm, interleaved A B B A; 1 reuses the file's shared engines. @default 1 */
  repeats?: number
  /** The most of an arm's requests that may fail (a share, 0–1) before the pair is `failed`. @default 0 when required, else no limit */
  maxFailedShare?: number
  /**
   * Measure both arms in stages ending at these looks (A B B A) and stop at the first look where
   * every listed win gate decided, with α spent across looks; the record says where and why.
   * One launch per arm only.
   * @example stopEarly: { looks: [16, 32, 64], gates: [{ gate: 'toWinDecode', margin: 0.05 }] }
   */
  stopEarly?: StopEarly
}

/** A cell or pair that runs once, lazily, however many tests await it. */
export interface Lazy<T> extends PromiseLike<T> {
  /** Starts it now (it would start at the first `await` anyway). */
  run(): Promise<T>
}

/** Runs `work` once, at the first `run()` or `await`. */
export function lazy<T>(work: () => Promise<T>): Lazy<T> {
  let running: Promise<T> | null = null
  const run = (): Promise<T> => (running ??= work())
  return {
    run,
    then: (onFulfilled, onRejected) => run().then(onFulfilled, onRejected),
  }
}

/**
 * `<engine>-<workload>-ctx<prompt tokens>`: how every id of a plan on an engine starts. A drawn
 * size reads short (`ctxu100-200`, `ctxln512s0.5`); shared-prefix groups, systemTokens + questionTokens.
 */
export function planId(engineName: string, plan: ResolvedCellPlan): string {
  const w = plan.workload
  const grouped = w.kind === 'shared-prefix' && w.groups !== undefined
  const prompt = grouped ? String((w.systemTokens ?? 0) + (w.questionTokens ?? 0)) : lengthLabel(w.promptTokens)
  return `${engineName}-${w.kind}-ctx${prompt}`
}

/** The plan's id then `c<concurrency>` (closed loop), `r<rate>` (open loop, one decimal) or `trace`. */
function cellId(engineName: string, plan: ResolvedCellPlan): string {
  const arrival = plan.arrival
  const load = arrival === null ? `c${plan.concurrency}` : arrival.kind === 'trace' ? 'trace' : `r${arrival.ratePerS.toFixed(1)}`
  return `${planId(engineName, plan)}-${load}`
}

function invalid(where: string, message: string): never {
  throw new ServegateError('CONFIG_INVALID', `invalid ${where} options: ${message}`)
}

/** How a declaration is named in its errors: `cell "my-id"` when it has an id, else `cell`. */
export function named(kind: string, id: unknown): string {
  return typeof id === 'string' ? `${kind} "${id}"` : kind
}

/** The declaration-level fields every cell and pair has, checked before the plan. */
function declarationFields(
  where: string,
  id: unknown,
  required: unknown,
  repeats: unknown,
  maxFailedShare: unknown,
): { required: boolean; repeats: number; maxFailedShare: number | null } {
  if (id !== undefined && (typeof id !== 'string' || id === '')) invalid(where, `${where}.id: a non-empty string, or leave it out`)
  if (required !== undefined && typeof required !== 'boolean') invalid(where, `${where}.required: true or false`)
  if (repeats !== undefined && !(Number.isInteger(repeats) && (repeats as number) >= 1)) {
    invalid(where, `${where}.repeats: an integer of at least 1 (launches per arm), got ${JSON.stringify(repeats)}`)
  }
  if (maxFailedShare !== undefined && !(typeof maxFailedShare === 'number' && maxFailedShare >= 0 && maxFailedShare <= 1)) {
    invalid(
      where,
      `${where}.maxFailedShare: a share from 0 to 1 (0.05 lets 5% of an arm's requests fail), got ${JSON.stringify(maxFailedShare)}`,
    )
  }
  return {
    required: (required as boolean | undefined) ?? true,
    repeats: (repeats as number | undefined) ?? 1,
    maxFailedShare: (maxFailedShare as number | undefined) ?? null,
  }
}

/** The engine handle of a declaration's `field`, or a CONFIG_INVALID error naming it. */
export function engineField(where: string, field: string, value: unknown): EngineHandle {
  if (!isEngineHandle(value)) invalid(where, `${where}.${field}: an engine from engine.vllm(…), engine.sim(…) or another engine.* call`)
  return value
}

/**
 * Declares a cell in a spec: one engine, one plan. Its options are checked and resolved here, so
 * a bad one fails at once, naming the field, before any engine starts. It runs once, when a test
 * first awaits it.
 * @throws ServegateError CONFIG_INVALID for a bad option
 * @example const c = cell({ engine: candidate, concurrency: 4, requests: 64, workload: { promptTokens: 1024 } })
 * test('reaches its concurrency', async () => expect(await c).toReachConcurrency())
 */
export function cell(spec: CellSpec): Lazy<CellResult> {
  return declaring(() => {
    const { engine: h, id, repeats: r, required: q, maxFailedShare: m, ...options } = spec
    const where = named('cell', id)
    const engine = engineField(where, 'engine', h)
    const { required, repeats, maxFailedShare } = declarationFields(where, id, q, r, m)
    const plan = resolveCellPlan(options, where)
    readDeclaredFiles(plan, where)
    const name = id ?? cellId(engine.name, plan)
    registerTeardown()
    declareCell({ id: name, kind: 'cell', required, ladder: null, engines: { cell: engine.name }, maxFailedShare })
    return lazy(() =>
      tracked(
        name,
        () => workerRunner().cell({ id: name, engine, plan, repeats }),
        (result) => ({ cell: [...result.records] }),
      ),
    )
  })
}

/**
 * Declares a pair: the same plan (and so the same request bytes) on a baseline and a candidate
 * engine. Checked and resolved here, before any engine starts. With repeats, arms are launched
 * fresh and interleaved A B B A.
 * @throws ServegateError CONFIG_INVALID for a bad option; TypeError for a bad stopEarly design
 * @example const p = pair({ baseline, candidate, concurrency: 4, requests: 64 })
 * test('wins decode', async () => expect(await p).toWinDecode({ margin: 0.05 }))
 */
export function pair(spec: PairSpec): Lazy<PairResult> {
  return declaring(() => {
    const { baseline: b, candidate: c, id, repeats: r, stopEarly, required: q, maxFailedShare: m, ...options } = spec
    const where = named('pair', id)
    const baseline = engineField(where, 'baseline', b)
    const candidate = engineField(where, 'candidate', c)
    const { required, repeats, maxFailedShare } = declarationFields(where, id, q, r, m)
    const plan = resolveCellPlan(options, where)
    const name = id ?? cellId(`${baseline.name}-vs-${candidate.name}`, plan)
    if (stopEarly !== undefined && repeats > 1) {
      throw new TypeError('pair: stopEarly needs one launch per arm (repeats 1); the launch-level test of repeated launches has no looks')
    }
    if (stopEarly !== undefined && plan.arrival !== null) {
      throw new TypeError(
        'pair: stopEarly needs the closed loop (no `arrival`): an open-loop schedule cannot be cut into stages that take turns',
      )
    }
    readDeclaredFiles(plan, where)
    const run: PairRun = {
      id: name,
      baseline,
      candidate,
      plan,
      repeats,
      stopEarly: stopEarly === undefined ? null : resolveStopEarly(stopEarly),
    }
    registerTeardown()
    const engines = { baseline: baseline.name, candidate: candidate.name }
    declareCell({ id: name, kind: 'pair', required, ladder: null, engines, maxFailedShare })
    return lazy(() =>
      tracked(
        name,
        () => workerRunner().pair(run),
        (result) => ({ baseline: [...result.baseline], candidate: [...result.candidate] }),
      ),
    )
  })
}
