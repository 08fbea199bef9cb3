export {
  compareEngineHistograms,
  compareHistogramTotals,
  compareLlamaServerTimings,
  compareTimings,
  DEFAULT_TOLERANCE,
} from './agreement.ts'
export type { AgreementTolerance, ComparisonLabel, LlamaServerRequestTimings, TimingPair } from './agreement.ts'
export { findMemoryCgroup, parseMountinfo, parseProcCgroup, startHostMemorySampler } from './cgroup.ts'
export type { CgroupLocation, HostMemorySampler, HostMemorySamplerOptions, MemoryCgroup } from './cgroup.ts'
export { parseExposition } from './exposition.ts'
export type { Exposition, ExpositionSample } from './exposition.ts'
export { integrateEnergy, summarizeGpu } from './gpu-summary.ts'
export type { GpuLoadWindow } from './gpu-summary.ts'
export { parseGpuFacts, parseGpuSamples, queryGpuFacts, selectVisibleGpus, startGpuSampler } from './nvidia-smi.ts'
export type { GpuFactsResult, GpuSampler, GpuSamplerOptions, NvidiaSmiOptions } from './nvidia-smi.ts'
export { ENGINE_METRIC_NAMES, metricsUrl, reachedConcurrency, readEngineMetrics, startMetricsScraper, timingDeltas } from './prometheus.ts'
export type {
  EngineMetricNames,
  EngineReading,
  EngineSnapshot,
  MetricRef,
  MetricSource,
  MetricsScraper,
  MetricsScraperOptions,
} from './prometheus.ts'
