import type { GpuFactsProbe, LaunchContext } from '../engines/launch.ts'
import type { ProgressEvent } from '../schema/progress.ts'
import { queryDcgmGpuFacts } from '../telemetry/dcgm-exporter.ts'
import { queryGpuFacts } from '../telemetry/nvidia-smi.ts'
import type { TelemetryOptions } from './cell-telemetry.ts'

/** Sends one event to the progress reporter; never throws. */
export type SendProgress = (event: ProgressEvent) => void

/**
 * The wall clock of records and progress events. Request timings never read it: they use the
 * process-wide monotonic clock (`monoMs()`, from `process.hrtime`), whatever clock is set here.
 */
export interface Clock {
  /** Now, for a record's `startedAt`, `finishedAt` and run id. */
  date(): Date
  /** Now in ms since the epoch, for progress events (the reporter compares them with its own). */
  epochMs(): number
}

export const systemClock: Clock = { date: () => new Date(), epochMs: () => Date.now() }

/**
 * Everything a cell reads of where it runs, built once per vitest worker or CLI invocation (the
 * composition root) and handed down: nothing below it constructs its own.
 */
export interface Environment extends LaunchContext {
  /** GPU facts for manifests, from the configured nvidia-smi. */
  readonly gpuFacts: GpuFactsProbe
  /** GPU sampling (the same nvidia-smi), Prometheus scraping and host memory around each cell; false turns them off. */
  readonly telemetry: TelemetryOptions | false
  /** Where engine logs go unless an engine config names its own `logDir`. */
  readonly logDir: string
  readonly clock: Clock
  /** Where cells report their phases (the progress reporter's socket), or null. */
  readonly progress: SendProgress | null
}

/** What an environment is built from: the plugin's options in a worker, the flags in the CLI. */
export interface EnvironmentInput {
  /** nvidia-smi to query and sample. @default 'nvidia-smi' (from PATH) */
  nvidiaSmi?: string
  /** Sampling intervals, or false for no telemetry. @default {} */
  telemetry?: Omit<TelemetryOptions, 'nvidiaSmi'> | false
  /** @default '.servegate/logs' */
  logDir?: string
  /** @default the system clock */
  clock?: Clock
  /** @default null */
  progress?: SendProgress | null
}

/**
 * GPU facts for a manifest from `nvidia-smi`, limited to the engine's visible devices; absent
 * (with nvidia-smi's own reason) on a machine without a driver.
 */
function nvidiaSmiGpuFacts(executable: string | undefined): GpuFactsProbe {
  return async (visibleDevices) => {
    const result = await queryGpuFacts({ executable, visibleDevices })
    return result.status === 'ok' ? { status: 'ok', devices: result.gpus } : { status: 'absent', reason: result.reason }
  }
}

/** Builds the one environment of a worker or a CLI invocation; the same nvidia-smi serves the manifest and the sampler. */
export function createEnvironment(input: EnvironmentInput = {}): Environment {
  const nvidiaSmi = input.nvidiaSmi
  const telemetry = input.telemetry === false ? false : { ...(input.telemetry ?? {}), ...(nvidiaSmi === undefined ? {} : { nvidiaSmi }) }
  return {
    gpuFacts: nvidiaSmiGpuFacts(nvidiaSmi),
    exporterGpuFacts: (url) => queryDcgmGpuFacts(url),
    telemetry,
    logDir: input.logDir ?? '.servegate/logs',
    clock: input.clock ?? systemClock,
    progress: input.progress ?? null,
  }
}
