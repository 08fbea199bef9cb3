import type { CellStages } from '../runner/measure-cell.ts'
import { type EngineCellOptions, engineFailedRecord, measureOnEngine, stopEngine } from '../runner/engine-lifecycle.ts'
import { nvidiaSmiGpuFacts } from '../runner/gpu-facts.ts'
import type { RunRecord } from '../schema/run.ts'
import type { CellResult, PairResult } from '../schema/results.ts'
import { type EngineHandle, freshEngine, registerTeardown, sharedEngine } from './engine-handles.ts'
import { PhaseFeed, progressChannel } from '../runner/phase-feed.ts'
import { declareCell, tracked } from './registry.ts'
export type { CellResult, LadderStep, PairResult } from '../schema/results.ts'
import { StagedPair, type StopEarly } from '../runner/staged-pair.ts'

export interface CellSpec extends EngineCellOptions {
  engine: EngineHandle
  /** Shown in evidence; defaults to engine, workload, context and concurrency. */
  id?: string
  /** Promotion needs every required cell accepted. @default true */
  required?: boolean
  /** Launches of the engine, each a fresh process; 1 reuses the file's shared engine. @default 1 */
  repeats?: number
}

export interface PairSpec extends EngineCellOptions {
  baseline: EngineHandle
  candidate: EngineHandle
  id?: string
  /** Promotion needs every required pair accepted. @default true */
  required?: boolean
  /** Launches per arm, interleaved A B B A; 1 reuses the file's shared engines. @default 1 */
  repeats?: number
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

/** `<engine>-<workload>-ctx<prompt tokens>`: how every id of a plan on an engine starts. */
export function planId(engineName: string, o: EngineCellOptions): string {
  return `${engineName}-${o.workload?.kind ?? 'synthetic-summary'}-ctx${o.workload?.promptTokens ?? 256}`
}

/** The plan's id then `c<concurrency>` (closed loop), `r<rate>` (open loop, one decimal) or `trace`. */
export function cellId(engineName: string, o: EngineCellOptions): string {
  const arrival = o.arrival ?? null
  const load = arrival === null ? `c${o.concurrency ?? 1}` : arrival.kind === 'trace' ? 'trace' : `r${arrival.ratePerS.toFixed(1)}`
  return `${planId(engineName, o)}-${load}`
}

/**
 * Measures a cell on an engine, launched fresh or shared; an engine that fails makes a failed
 * record. `feed` hears every phase, from the launch to the measurement's end.
 */
export function measure(
  h: EngineHandle,
  options: EngineCellOptions,
  fresh: boolean,
  stages?: CellStages,
  feed = PhaseFeed.silent,
): Promise<RunRecord> {
  return feed.measuring(() => measureOn(h, options, fresh, stages, feed))
}

async function measureOn(
  h: EngineHandle,
  options: EngineCellOptions,
  fresh: boolean,
  stages: CellStages | undefined,
  feed: PhaseFeed,
): Promise<RunRecord> {
  const started = await (fresh ? freshEngine(h, feed.phase) : sharedEngine(h, feed.phase))
  if ('failure' in started) return engineFailedRecord(options, h.config.model.id, started.failure)
  try {
    return await measureOnEngine(started, options, { gpuFacts: nvidiaSmiGpuFacts(), stages, onPhase: feed.phase })
  } finally {
    if (fresh) {
      feed.phase({ phase: 'tearing-down' })
      await stopEngine(started)
    }
  }
}

/** The feed of one arm (null for a cell) of a declared cell or pair. */
function feedFor(id: string, arm: 'baseline' | 'candidate' | null, h: EngineHandle): PhaseFeed {
  return new PhaseFeed({ cell: id, arm, engine: h.name, step: null }, progressChannel())
}

/** Launch k (0-based) of `repeats`, named on the feed when there is more than one. */
function launchFeed(feed: PhaseFeed, k: number, repeats: number): PhaseFeed {
  return repeats > 1 ? feed.at({ kind: 'launch', index: k + 1, of: repeats }) : feed
}

/** The A B B A order of `repeats` launches per arm. */
export function interleave(repeats: number): Array<'baseline' | 'candidate'> {
  const order: Array<'baseline' | 'candidate'> = []
  for (let i = 0; i < repeats; i++)
    order.push(...(i % 2 === 0 ? (['baseline', 'candidate'] as const) : (['candidate', 'baseline'] as const)))
  return order
}

/**
 * Declares a cell in a spec: one engine, one plan. It runs once, when a test first awaits it.
 * @example const c = cell({ engine: candidate, concurrency: 4, requests: 64, workload: { promptTokens: 1024 } })
 * test('reaches its concurrency', async () => expect(await c).toReachConcurrency())
 */
export function cell(spec: CellSpec): Lazy<CellResult> {
  registerTeardown()
  const { engine: h, id, repeats = 1, required = true, ...options } = spec
  const name = id ?? cellId(h.name, options)
  declareCell({ id: name, kind: 'cell', required, ladder: null, engines: { cell: h.name } })
  return lazy(() =>
    tracked(
      name,
      async (): Promise<CellResult> => {
        const records: RunRecord[] = []
        const feed = feedFor(name, null, h)
        for (let i = 0; i < repeats; i++) records.push(await measure(h, options, repeats > 1, undefined, launchFeed(feed, i, repeats)))
        return { kind: 'cell', id: name, record: records[0] as RunRecord, records }
      },
      (r) => ({ cell: [...r.records] }),
    ),
  )
}

/**
 * Declares a pair: the same plan (and so the same request bytes) on a baseline and a candidate
 * engine. With repeats, arms are launched fresh and interleaved A B B A.
 * @example const p = pair({ baseline, candidate, concurrency: 4, requests: 64 })
 * test('wins decode', async () => expect(await p).toWinDecode({ margin: 0.05 }))
 */
export function pair(spec: PairSpec): Lazy<PairResult> {
  registerTeardown()
  const { baseline, candidate, id, repeats = 1, stopEarly, required = true, ...options } = spec
  const name = id ?? cellId(`${baseline.name}-vs-${candidate.name}`, options)
  if (stopEarly !== undefined && repeats > 1)
    throw new TypeError('pair: stopEarly needs one launch per arm (repeats 1); the launch-level test of repeated launches has no looks')
  if (stopEarly !== undefined && options.arrival != null)
    throw new TypeError(
      'pair: stopEarly needs the closed loop (no `arrival`): an open-loop schedule cannot be cut into stages that take turns',
    )
  const staged = stopEarly === undefined ? null : new StagedPair(stopEarly, options.requests ?? 32)
  declareCell({ id: name, kind: 'pair', required, ladder: null, engines: { baseline: baseline.name, candidate: candidate.name } })
  const work =
    staged === null
      ? () => measurePair(baseline, candidate, options, repeats, name)
      : () => measureStaged(baseline, candidate, options, staged, name)
  return lazy(() => tracked(name, work, (r) => ({ baseline: [...r.baseline], candidate: [...r.candidate] })))
}

/** Both arms of a pair, launch after launch (A B B A with repeats). */
async function measurePair(
  baseline: EngineHandle,
  candidate: EngineHandle,
  options: EngineCellOptions,
  repeats: number,
  name: string,
): Promise<PairResult> {
  const order = interleave(repeats)
  const arms = { baseline: [] as RunRecord[], candidate: [] as RunRecord[] }
  const feeds = { baseline: feedFor(name, 'baseline', baseline), candidate: feedFor(name, 'candidate', candidate) }
  for (const arm of order) {
    const h = arm === 'baseline' ? baseline : candidate
    arms[arm].push(await measure(h, options, repeats > 1, undefined, launchFeed(feeds[arm], arms[arm].length, repeats)))
  }
  return { kind: 'pair', id: name, baseline: arms.baseline, candidate: arms.candidate, launchOrder: order }
}

/** Both arms of a sequential pair, in stages taking turns, stopped at the deciding look. */
async function measureStaged(
  baseline: EngineHandle,
  candidate: EngineHandle,
  options: EngineCellOptions,
  staged: StagedPair,
  name: string,
): Promise<PairResult> {
  const arm = async (which: 'baseline' | 'candidate', h: EngineHandle) => {
    try {
      return await measure(h, options, false, staged.stagesFor(which), feedFor(name, which, h))
    } finally {
      staged.leave(which)
    }
  }
  const records = await Promise.all([arm('baseline', baseline), arm('candidate', candidate)])
  const [b, c] = records.map((r) => ({ ...r, plan: { ...r.plan, sequential: staged.plan() } })) as [RunRecord, RunRecord]
  return { kind: 'pair', id: name, baseline: [b], candidate: [c], launchOrder: ['baseline', 'candidate'] }
}
