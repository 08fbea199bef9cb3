import { runningRefreshSteps } from '../engines/adapters.ts'
import type { RunningEngine } from '../engines/launch.ts'
import type { CellTelemetry, EngineKind } from '../schema/telemetry.ts'
import type { RequestRecord, RunRecord, SpecDecodeMetrics } from '../schema/run.ts'
import { compareEngineHistograms, compareLlamaServerTimings } from '../telemetry/agreement.ts'
import { startHostMemorySampler } from '../telemetry/cgroup.ts'
import { summarizeGpu } from '../telemetry/gpu-summary.ts'
import { startGpuSampler } from '../telemetry/nvidia-smi.ts'
import { reachedConcurrency, startMetricsScraper } from '../telemetry/prometheus.ts'

export interface TelemetryOptions {
  /** nvidia-smi to run. @default 'nvidia-smi' */
  nvidiaSmi?: string
  /** GPU sampling interval, ms. @default 500 */
  gpuIntervalMs?: number
  /** Prometheus scrape interval, ms. @default 250 */
  metricsIntervalMs?: number
}

/** Telemetry of one cell: started when the engine is ready, marked at the measured phase, finished after it. */
export interface TelemetrySession {
  markLoadStart(): Promise<void>
  /** `requests`: the record's, or, for a spilled cell, read back from its spill. */
  finish(record: RunRecord, requests: Iterable<RequestRecord> | AsyncIterable<RequestRecord>): Promise<CellTelemetry>
  /** Stops every sampler without a summary (the cell failed before it had a record). */
  cancel(): Promise<void>
  /** After `finish`: speculative decoding from the engine's `/metrics` over the measured phase; null where it exports none. */
  specDecode(): SpecDecodeMetrics | null
}

const SCRAPED_KINDS = new Set<string>(['vllm', 'sglang', 'llama-server', 'trtllm'])

/** Why GPUs with facts have no samples: the sampler did not run, or they are on a remote host. */
const gpuUnsampled = (source: 'dcgm-exporter' | undefined): string =>
  source === undefined
    ? 'no GPU sampler ran'
    : `the GPUs are on the remote host: nvidia-smi here samples none (their facts come from the ${source})`

/**
 * Starts watching an engine while a cell runs: nvidia-smi samples (idle baseline until the
 * measured phase), its Prometheus occupancy, and host memory from the cgroup. Every part that
 * cannot be observed is recorded as absent with the reason.
 */
export function startTelemetry(engine: RunningEngine, concurrency: number, options: TelemetryOptions = {}): TelemetrySession {
  // nvidia-smi samples the GPUs of this host only: not those a remote deployment's exporter named.
  const gpu =
    engine.manifest.gpus.status === 'ok' && engine.manifest.gpus.source === undefined
      ? startGpuSampler({
          executable: options.nvidiaSmi,
          intervalMs: options.gpuIntervalMs ?? 500,
          visibleDevices: engine.manifest.engine.visibleDevices,
        })
      : null
  // A remote endpoint is scraped as the engine that answers it (its names at /metrics).
  const reported = engine.manifest.engine.reported?.kind.value
  const kind = SCRAPED_KINDS.has(engine.kind) ? (engine.kind as EngineKind) : reported === 'vllm' || reported === 'sglang' ? reported : null
  const scraper =
    kind !== null && engine.metricsUrl !== null
      ? startMetricsScraper({ url: engine.metricsUrl, kind, intervalMs: options.metricsIntervalMs ?? 250, modelName: engine.model })
      : null
  const memory = startHostMemorySampler()
  let loadStartedAt: number | null = null

  return {
    specDecode: () => scraper?.specDecode() ?? null,
    async cancel() {
      await Promise.all([gpu?.stop(), scraper?.stop(), memory.stop()])
    },
    async markLoadStart() {
      loadStartedAt = (await gpu?.markLoadStart()) ?? Date.now()
      await scraper?.markLoadStart()
    },
    async finish(record, requests) {
      const loadEndedAt = Date.now()
      const [samples, occupancy, hostMemory] = await Promise.all([gpu?.stop() ?? null, scraper?.stop() ?? null, memory.stop()])
      // Only the engine-timing fields of the ok requests, never whole records.
      const ok: Array<Pick<RequestRecord, 'engineTimings' | 'timeToFirstOutputMs' | 'generationMs'>> = []
      for await (const r of requests) {
        if (r.status === 'ok')
          ok.push({ engineTimings: r.engineTimings, timeToFirstOutputMs: r.timeToFirstOutputMs, generationMs: r.generationMs })
      }
      const gpus = engine.manifest.gpus
      const gpuPart: CellTelemetry['gpu'] =
        gpus.status !== 'ok' || samples === null
          ? { status: 'absent', reason: gpus.status !== 'ok' ? gpus.reason : gpuUnsampled(gpus.source) }
          : {
              status: 'ok',
              facts: gpus.devices,
              visibleDevices: engine.manifest.engine.visibleDevices,
              summary: summarizeGpu(samples, { outputTokens: record.metrics.totalCompletionTokens, loadStartedAt, loadEndedAt }),
            }
      const enginePart: CellTelemetry['engine'] =
        occupancy === null
          ? { status: 'absent', reason: `no Prometheus names are known for a ${engine.kind} engine` }
          : // An open-loop cell requests a rate, not a concurrency: there is nothing to have reached.
            {
              status: 'ok',
              occupancy,
              concurrency:
                record.plan.arrival === null
                  ? reachedConcurrency(occupancy, record.plan.concurrency, {
                      outputTokensP50: record.metrics.distributions.completionTokens.p50,
                      runningRefreshSteps: runningRefreshSteps(engine.manifest.engine.argv),
                    })
                  : null,
            }
      let agreement: CellTelemetry['timingAgreement']
      if (engine.kind === 'llama-server') {
        agreement = {
          status: 'ok',
          comparisons: compareLlamaServerTimings(
            ok.map((r) => ({ timings: r.engineTimings, timeToFirstOutputMs: r.timeToFirstOutputMs, generationMs: r.generationMs })),
          ),
        }
      } else if (occupancy !== null) {
        agreement = {
          status: 'ok',
          comparisons: compareEngineHistograms(occupancy, {
            timeToFirstOutputMs: ok.flatMap((r) => (r.timeToFirstOutputMs === null ? [] : [r.timeToFirstOutputMs])),
            generationMs: ok.flatMap((r) => (r.generationMs === null ? [] : [r.generationMs])),
          }),
        }
      } else {
        agreement = { status: 'absent', reason: 'the engine reports no timings of its own' }
      }
      return { gpu: gpuPart, engine: enginePart, hostMemory, timingAgreement: agreement }
    },
  }
}
