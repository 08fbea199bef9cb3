import { monitorEventLoopDelay } from 'node:perf_hooks'
import { monoMs } from '../client/clock.ts'
import { addPauses, ReadBatchingMeter } from '../client/read-batching.ts'
import type { WorkerMeasure } from '../client/worker-protocol.ts'
import type { HarnessHealth, ReadBatching } from '../schema/run.ts'
import type { ResolvedRunCellOptions } from './cell-options.ts'
import type { CellTransport } from './cell-transport.ts'
import type { WorkerYield } from './background-threads.ts'
import { HostSteal } from './host-steal.ts'
import { harnessHealth } from './run-record.ts'

/** The client's worker threads, as a cell measures them. */
export type MeasuredWorkers = NonNullable<CellTransport['workers']>

/**
 * What the client itself spent while a cell measured, summed over its stages (`start` to
 * `stop`): the process's CPU time and the cell thread's own, the event loop's delay, the host's
 * steal, each worker thread's figures, and the stages' span. Idle time between stages counts in
 * none of them. `health` judges them against the cell's limits: the client's CPU is the
 * process's, or beside an in-process engine (whose compute threads share the process) the cell
 * thread's own.
 * @example const meter = new CellLoadMeter(null); meter.start(); …; await meter.stop(); meter.health(o, sendLags)
 */
export class CellLoadMeter {
  readonly #loopDelay = monitorEventLoopDelay({ resolution: 2 })
  readonly #steal: HostSteal
  readonly #workers: MeasuredWorkers | null
  readonly #workerMeasures: WorkerMeasure[][] = []
  #cpuMs = 0
  #threadCpuMs = 0
  #activeMs = 0
  #cpuBefore: NodeJS.CpuUsage | undefined
  #threadCpuBefore: NodeJS.CpuUsage | undefined
  #stageStart = 0
  /** The cell thread's batched-read pauses, over every stage. */
  #batching: ReadBatching = { pauses: 0, pausedMs: 0, longestPauseMs: 0 }
  #batchingMeter: ReadBatchingMeter | null = null
  readonly #engineInProcess: boolean
  readonly #workerYield: WorkerYield | null

  /**
   * @param workers the client's worker threads; null when the cell's thread streams every request
   * @param options.engineInProcess the engine runs in this process, so its threads' CPU is not the client's
   * @param options.steal the host's steal meter; `/proc/stat`'s by default
   * @param options.workerYield lowers V8's workers while the cell's thread has room to spare, over each stage
   *   (null where client worker threads read the streams: they wait on V8's workers too)
   */
  constructor(
    workers: MeasuredWorkers | null,
    options: { engineInProcess?: boolean; steal?: HostSteal; workerYield?: WorkerYield | null } = {},
  ) {
    this.#workers = workers
    this.#engineInProcess = options.engineInProcess ?? false
    this.#workerYield = options.workerYield ?? null
    this.#steal = options.steal ?? new HostSteal()
  }

  /** The stages' wall time summed, ms. */
  get activeMs(): number {
    return this.#activeMs
  }

  /** The process's CPU time over the stages, every thread's, ms. */
  get cpuMs(): number {
    return this.#cpuMs
  }

  /** The cell thread's own CPU time over the stages, ms. */
  get threadCpuMs(): number {
    return this.#threadCpuMs
  }

  /** A stage starts. */
  start(): void {
    this.#loopDelay.enable()
    this.#steal.start()
    this.#workers?.measureStart()
    this.#cpuBefore = process.cpuUsage()
    this.#threadCpuBefore = process.threadCpuUsage()
    this.#batchingMeter?.stop() // a stage that threw before its stop() counts no more
    this.#batchingMeter = new ReadBatchingMeter()
    this.#stageStart = monoMs()
    this.#workerYield?.begin()
  }

  /** The stage ended: its figures add to the cell's (a worker's come back from its thread). */
  async stop(): Promise<void> {
    this.#workerYield?.end()
    this.#activeMs += monoMs() - this.#stageStart
    const cpu = process.cpuUsage(this.#cpuBefore)
    const threadCpu = process.threadCpuUsage(this.#threadCpuBefore)
    this.#cpuMs += (cpu.user + cpu.system) / 1000
    this.#threadCpuMs += (threadCpu.user + threadCpu.system) / 1000
    const meter = this.#batchingMeter
    if (meter !== null) {
      meter.stop()
      this.#batching = addPauses(this.#batching, meter)
    }
    this.#loopDelay.disable()
    this.#steal.stop()
    if (this.#workers !== null) this.#workerMeasures.push(await this.#workers.measureStop())
  }

  /**
   * The cell's harness figures, judged against its limits; `sendLags` are every measured
   * request's, ms, in plan order, the first `openingSends` a closed loop's opening round.
   */
  health(o: ResolvedRunCellOptions, sendLags: readonly number[], openingSends = 0): HarnessHealth {
    const workers = { count: this.#workers?.count ?? 0, cellThreadCpuMs: this.#threadCpuMs, measures: this.#workerMeasures }
    const clientCpuMs = this.#engineInProcess ? this.#threadCpuMs : this.#cpuMs
    const health = harnessHealth(o, clientCpuMs, this.#activeMs, this.#loopDelay, sendLags, workers, this.#steal.share(), openingSends)
    return { ...health, readBatching: this.#readBatching() }
  }

  /** Every reading thread's pauses to batch reads: the cell thread's and each worker's, summed. */
  #readBatching(): ReadBatching {
    return this.#workerMeasures.flat().reduce((sum, m) => addPauses(sum, m.readBatching), this.#batching)
  }
}
