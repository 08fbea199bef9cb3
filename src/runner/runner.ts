import { type EngineConfig, resolveEngineConfig } from '../engines/config.ts'
import type { CapacitySearch } from '../schema/capacity-record.ts'
import type { EngineTeardown, ErrorInfo, RunRecord } from '../schema/run.ts'
import type { CellResult, PairResult } from '../schema/results.ts'
import { type CapacityHooks, type ResolvedCapacityOptions, searchCapacity } from './capacity-search.ts'
import { type CellPlan, type ResolvedCellPlan, resolveCellPlan } from './cell-options.ts'
import {
  type EngineCellHooks,
  engineFailedRecord,
  type EngineRef,
  type LiveEngine,
  measureOnEngine,
  type Started,
  startEngine,
  stopEngine,
  withTeardown,
} from './engine-lifecycle.ts'
import type { Environment } from './environment.ts'
import { type FeedContext, PhaseFeed } from './phase-feed.ts'
import { type ResolvedStopEarly, StagedPair } from './staged-pair.ts'

type Arm = 'baseline' | 'candidate'

/** How a measurement gets its engine: a launch of its own (stopped after it), or the file's shared one. */
export type Launch = 'fresh' | 'shared'

/** A cell as the runner measures it: resolved when it was declared. */
export interface CellRun {
  id: string
  engine: EngineRef
  plan: ResolvedCellPlan
  /** Launches, each a fresh process when more than one. */
  repeats: number
}

/** A pair as the runner measures it: the same plan on both arms. */
export interface PairRun {
  id: string
  baseline: EngineRef
  candidate: EngineRef
  plan: ResolvedCellPlan
  /** Launches per arm, interleaved A B B A. */
  repeats: number
  /** Measure in stages and stop at the first deciding look (one launch per arm). */
  stopEarly: ResolvedStopEarly | null
}

/** A capacity search as the runner measures it. */
export interface CapacityRun {
  id: string
  engine: EngineRef
  options: ResolvedCapacityOptions
  launch: Launch
}

/** The A B B A order of `repeats` launches per arm. */
export function interleave(repeats: number): Arm[] {
  const order: Arm[] = []
  for (let i = 0; i < repeats; i++)
    order.push(...(i % 2 === 0 ? (['baseline', 'candidate'] as const) : (['candidate', 'baseline'] as const)))
  return order
}

/** Launch k (0-based) of `repeats`, named on the feed when there is more than one. */
function launchFeed(feed: PhaseFeed, k: number, repeats: number): PhaseFeed {
  return repeats > 1 ? feed.at({ kind: 'launch', index: k + 1, of: repeats }) : feed
}

/**
 * The composition root: built once per vitest worker or CLI invocation from its environment, it
 * wires engines, the client, the workload and telemetry for every cell, pair, sweep rung and
 * capacity search. One engine lifecycle (start, measure, stop) serves them all; engines shared
 * by a file's cells live here until `stopShared()`.
 */
export class Runner {
  readonly env: Environment
  private readonly shared = new Map<string, { name: string; started: Promise<Started> }>()

  constructor(env: Environment) {
    this.env = env
  }

  /** The phases of one cell or arm, on the environment's progress channel. */
  feed(context: FeedContext): PhaseFeed {
    return new PhaseFeed(context, this.env.progress, 500, () => this.env.clock.epochMs())
  }

  /**
   * The one engine lifecycle: the engine started for this use (and stopped after it) or the
   * file's shared instance, `use` on it, or `failed` with why it did not start. `afterStop`
   * gives the result of a fresh launch how its engine went down.
   */
  async onEngine<T>(
    engine: EngineRef,
    launch: Launch,
    onPhase: EngineCellHooks['onPhase'],
    use: (live: LiveEngine) => Promise<T>,
    failed: (failure: ErrorInfo) => T | Promise<T>,
    signal?: AbortSignal,
    afterStop: (result: T, teardown: EngineTeardown | null) => T = (result) => result,
  ): Promise<T> {
    const started = await (launch === 'fresh' ? startEngine(engine.config, this.env, signal, onPhase) : this.sharedEngine(engine, onPhase))
    if ('failure' in started) {
      // A partial launch torn down (a Kubernetes rollout that failed): its record says how.
      const result = await failed(started.failure)
      return launch === 'fresh' && started.teardown !== undefined ? afterStop(result, started.teardown) : result
    }
    if (launch === 'shared') return use(started)
    const outcome = await use(started).then(
      (value) => ({ ok: true as const, value }),
      (error: unknown) => ({ ok: false as const, error }),
    )
    onPhase?.({ phase: 'tearing-down' })
    const teardown = await stopEngine(started)
    if (!outcome.ok) throw outcome.error
    return afterStop(outcome.value, teardown)
  }

  /** Measures a plan on an engine; an engine that fails makes a failed record. */
  measure(engine: EngineRef, plan: ResolvedCellPlan, launch: Launch, hooks: EngineCellHooks = {}): Promise<RunRecord> {
    return this.onEngine(
      engine,
      launch,
      hooks.onPhase,
      (live) => measureOnEngine(live, plan, this.env, hooks),
      (failure) => engineFailedRecord(plan, engine.config.model.id, failure, this.env),
      hooks.signal,
      withTeardown,
    )
  }

  /** A cell: its launches one after another (fresh processes when repeated, else the shared engine). */
  async cell(run: CellRun): Promise<CellResult> {
    const records: RunRecord[] = []
    const feed = this.feed({ cell: run.id, arm: null, engine: run.engine.name, step: null })
    for (let i = 0; i < run.repeats; i++)
      records.push(await this.measured(run.engine, run.plan, run.repeats, launchFeed(feed, i, run.repeats)))
    return { kind: 'cell', id: run.id, record: records[0] as RunRecord, records }
  }

  /** A pair: both arms launch after launch (A B B A with repeats), or in stages when it stops early. */
  async pair(run: PairRun): Promise<PairResult> {
    if (run.stopEarly !== null) return this.stagedPair(run, run.stopEarly)
    const order = interleave(run.repeats)
    const arms = { baseline: [] as RunRecord[], candidate: [] as RunRecord[] }
    const feeds = { baseline: this.armFeed(run, 'baseline'), candidate: this.armFeed(run, 'candidate') }
    for (const arm of order) {
      arms[arm].push(await this.measured(run[arm], run.plan, run.repeats, launchFeed(feeds[arm], arms[arm].length, run.repeats)))
    }
    return { kind: 'pair', id: run.id, baseline: arms.baseline, candidate: arms.candidate, launchOrder: order }
  }

  /** A capacity search on one engine: every probe a cell on the same launch, each probe reported on its own. */
  async capacity(run: CapacityRun, hooks: CapacityHooks = {}): Promise<CapacitySearch> {
    const feed = this.feed({ cell: run.id, arm: null, engine: run.engine.name, step: null })
    const axis = run.options.bracket.axis
    let probes = 0
    const probeFeed = (plan: ResolvedCellPlan): PhaseFeed => {
      // Rate probes carry the probed rate in their arrival, concurrency probes run closed.
      const value = plan.arrival === null || plan.arrival.kind === 'trace' ? plan.concurrency : plan.arrival.ratePerS
      return feed.at({ kind: 'probe', index: ++probes, value, axis })
    }
    return this.onEngine(
      run.engine,
      run.launch,
      feed.phase,
      (live) =>
        searchCapacity(
          run.options,
          (plan, signal) => {
            const at = probeFeed(plan)
            return at.measuring(() => measureOnEngine(live, plan, this.env, { onPhase: at.phase, signal }))
          },
          run.id,
          hooks,
        ),
      (failure) =>
        searchCapacity(
          run.options,
          (plan) => probeFeed(plan).measuring(async () => engineFailedRecord(plan, run.engine.config.model.id, failure, this.env)),
          run.id,
          hooks,
        ),
      hooks.signal,
    )
  }

  /** Stops every shared engine (the whole process trees), each saying so. */
  async stopShared(): Promise<void> {
    const engines = [...this.shared.values()]
    this.shared.clear()
    const settled = await Promise.all(engines.map(async ({ name, started }) => ({ name, started: await started })))
    for (const { name, started } of settled) {
      if ('failure' in started) continue
      const feed = this.feed({ cell: null, arm: null, engine: name, step: null })
      feed.phase({ phase: 'tearing-down' })
      await stopEngine(started)
      feed.phase({ phase: 'stopped' })
    }
  }

  /** One launch of a plan, reported from the launch to how it ended; fresh when the cell is repeated. */
  private measured(engine: EngineRef, plan: ResolvedCellPlan, repeats: number, feed: PhaseFeed): Promise<RunRecord> {
    return feed.measuring(() => this.measure(engine, plan, repeats > 1 ? 'fresh' : 'shared', { onPhase: feed.phase }))
  }

  private armFeed(run: PairRun, arm: Arm): PhaseFeed {
    return this.feed({ cell: run.id, arm, engine: run[arm].name, step: null })
  }

  /** Both arms of a sequential pair, in stages taking turns, stopped at the deciding look. */
  private async stagedPair(run: PairRun, stopEarly: ResolvedStopEarly): Promise<PairResult> {
    const staged = new StagedPair(stopEarly, run.plan.requests)
    const arm = async (which: Arm): Promise<RunRecord> => {
      const feed = this.armFeed(run, which)
      try {
        return await feed.measuring(() =>
          this.measure(run[which], run.plan, 'shared', { onPhase: feed.phase, stages: staged.stagesFor(which) }),
        )
      } finally {
        staged.leave(which)
      }
    }
    const records = await Promise.all([arm('baseline'), arm('candidate')])
    const [b, c] = records.map((r) => ({ ...r, plan: { ...r.plan, sequential: staged.plan() } })) as [RunRecord, RunRecord]
    return { kind: 'pair', id: run.id, baseline: [b], candidate: [c], launchOrder: ['baseline', 'candidate'] }
  }

  /** The shared instance of an engine, launched on first use; `onPhase` hears its start-up when this call launches it. */
  private sharedEngine(engine: EngineRef, onPhase: EngineCellHooks['onPhase']): Promise<Started> {
    let entry = this.shared.get(engine.id)
    if (entry === undefined) {
      entry = { name: engine.name, started: startEngine(engine.config, this.env, undefined, onPhase) }
      this.shared.set(engine.id, entry)
    }
    return entry.started
  }
}

/**
 * Launches an engine, measures one cell on it and tears it down whatever happens: what
 * `servegate run --engine` does. An engine that fails to start, or exits mid-cell, yields a
 * record with `cellFailure` (exit code and log tail) and whatever was measured before.
 * @throws ServegateError CONFIG_INVALID for a bad engine or cell config, before anything starts
 */
export function runEngineCell(env: Environment, config: EngineConfig, plan: CellPlan, hooks: EngineCellHooks = {}): Promise<RunRecord> {
  const engine = resolveEngineConfig(config)
  const resolved = resolveCellPlan(plan)
  return new Runner(env).measure({ id: 'once', name: `${engine.kind}:${engine.model.id}`, config: engine }, resolved, 'fresh', hooks)
}
