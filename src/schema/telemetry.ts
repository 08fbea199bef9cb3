import { z } from 'zod'
import { PERCENTILE_METHOD } from './constants.ts'
import { GpuFactSchema } from './manifest.ts'

/**
 * What servegate observed beside the client during a cell: GPU power/memory (nvidia-smi), engine
 * occupancy and engine-reported timings (Prometheus `/metrics`), host memory (cgroup), and whether
 * the engine's timings agree with the client's. A fact that could not be observed is absent with
 * its reason (a block) or null with its reason in `reasons` (a field): never invented, never 0.
 */

/** A block that could not be observed at all, and why (no GPU, no `/metrics`, no cgroup…). */
const Absent = z.object({ status: z.literal('absent'), reason: z.string() })
type Absent = z.infer<typeof Absent>

/** Why each null field of a summary is null, keyed by field name. Fields with a value have no entry. */
export const NullReasons = z.record(z.string(), z.string())
export type NullReasons = z.infer<typeof NullReasons>

/** One GPU as `nvidia-smi --query-gpu=index,name,uuid,driver_version,memory.total` reports it. */
export const GpuFact = GpuFactSchema
export type GpuFact = z.infer<typeof GpuFact>

/** One nvidia-smi row: one device at one instant. A field printed `[N/A]`/`[Not Supported]` is null. */
export const GpuSample = z.object({
  index: z.int().nonnegative(),
  /** nvidia-smi's own timestamp (its local clock, ms resolution) as epoch milliseconds. */
  timestampMs: z.number(),
  powerW: z.number().nullable(),
  memoryUsedMiB: z.number().nullable(),
  temperatureC: z.number().nullable(),
  utilizationPct: z.number().nullable(),
})
export type GpuSample = z.infer<typeof GpuSample>

/** What a GPU sampler collected between its start and `stop()`. Epoch milliseconds throughout. */
export const GpuSamples = z.discriminatedUnion('status', [
  z.object({
    status: z.literal('ok'),
    intervalMs: z.number().positive(),
    /** nvidia-smi indices of the devices kept (the engine's, after `CUDA_VISIBLE_DEVICES`). */
    devices: z.array(z.int().nonnegative()),
    samples: z.array(GpuSample),
    startedAt: z.number(),
    stoppedAt: z.number(),
    /** When `markLoadStart()` was called; null when it never was (no baseline/load split). */
    loadStartedAt: z.number().nullable(),
    polls: z.int().nonnegative(),
    pollErrors: z.int().nonnegative(),
    /** The last failed poll's reason, sanitized; null when every poll succeeded. */
    lastPollError: z.string().nullable(),
  }),
  Absent,
])
export type GpuSamples = z.infer<typeof GpuSamples>

/** The per-device figures of a cell; each null one has its reason in `reasons`. */
export const GpuDeviceSummary = z.object({
  index: z.int().nonnegative(),
  /** Samples before the load started (the idle baseline) and during the load window. */
  baselineSamples: z.int().nonnegative(),
  loadSamples: z.int().nonnegative(),
  /** Median power of the baseline samples, W. */
  idlePowerW: z.number().nullable(),
  /** Largest memory used of any sample, MiB. */
  peakMemoryUsedMiB: z.number().nullable(),
  /**
   * Peak memory used during the load minus the median of the baseline, MiB: the engine's whole VRAM
   * when the baseline was sampled before the engine started, its growth under load otherwise.
   */
  peakProcessVramEstimateMiB: z.number().nullable(),
  activePowerMeanW: z.number().nullable(),
  /** Nearest-rank p95 of the power samples in the load window, W. */
  activePowerP95W: z.number().nullable(),
  temperatureP95C: z.number().nullable(),
  utilizationMeanPct: z.number().nullable(),
  /** Energy over the load window, J: trapezoid over the power samples, clipped to the window. */
  energyJ: z.number().nullable(),
  /** energyJ − idlePowerW × load seconds, J. */
  idleSubtractedEnergyJ: z.number().nullable(),
  /** idleSubtractedEnergyJ / output tokens of the cell, J per token. */
  idleSubtractedJPerOutputToken: z.number().nullable(),
  reasons: NullReasons,
})
export type GpuDeviceSummary = z.infer<typeof GpuDeviceSummary>

/** The worst single device for one figure: the largest per-device value, never a sum across GPUs. */
export const GpuWorstValue = z.object({
  value: z.number().nullable(),
  deviceIndex: z.int().nonnegative().nullable(),
  /** Why no device had a value; null when one had. */
  reason: z.string().nullable(),
})
export type GpuWorstValue = z.infer<typeof GpuWorstValue>

export const GpuSummary = z.discriminatedUnion('status', [
  z.object({
    status: z.literal('ok'),
    percentileMethod: z.literal(PERCENTILE_METHOD),
    intervalMs: z.number().positive(),
    loadStartedAt: z.number().nullable(),
    loadEndedAt: z.number().nullable(),
    outputTokens: z.int().nonnegative().nullable(),
    devices: z.array(GpuDeviceSummary),
    worst: z.object({
      idlePowerW: GpuWorstValue,
      peakMemoryUsedMiB: GpuWorstValue,
      peakProcessVramEstimateMiB: GpuWorstValue,
      activePowerMeanW: GpuWorstValue,
      activePowerP95W: GpuWorstValue,
      temperatureP95C: GpuWorstValue,
      utilizationMeanPct: GpuWorstValue,
      energyJ: GpuWorstValue,
      idleSubtractedEnergyJ: GpuWorstValue,
      idleSubtractedJPerOutputToken: GpuWorstValue,
    }),
    pollErrors: z.int().nonnegative(),
    lastPollError: z.string().nullable(),
  }),
  Absent,
])
export type GpuSummary = z.infer<typeof GpuSummary>

export const EngineKind = z.enum(['vllm', 'sglang', 'llama-server', 'trtllm'])
export type EngineKind = z.infer<typeof EngineKind>

/** How much an engine-side timing grew between two scrapes: seconds, and requests where counted. */
export const TimingDelta = z.object({
  secondsSum: z.number().nonnegative(),
  /** Observations (requests) added; null when the engine keeps a plain counter (llama-server). */
  count: z.number().nonnegative().nullable(),
})
export type TimingDelta = z.infer<typeof TimingDelta>

/** Engine-reported totals between the load-start scrape (or the first) and the last scrape. */
export const EngineTimingDeltas = z.object({
  windowMs: z.number().nonnegative().nullable(),
  /** Model prefill time (vLLM: first scheduled → first token; llama-server: prompt processing). */
  prefill: TimingDelta.nullable(),
  /** Decode time (vLLM: first → last token; llama-server: token generation). */
  decode: TimingDelta.nullable(),
  /** Engine-side time to first token (arrival at the engine → first token), where exposed. */
  ttft: TimingDelta.nullable(),
  /** Time requests waited in the engine's queue, where exposed. */
  queue: TimingDelta.nullable(),
  promptTokens: z.number().nonnegative().nullable(),
  generationTokens: z.number().nonnegative().nullable(),
})
export type EngineTimingDeltas = z.infer<typeof EngineTimingDeltas>

/** What the engine's Prometheus `/metrics` said while a cell ran. */
export const EngineOccupancy = z.object({
  kind: EngineKind,
  /** The scraped URL (loopback, no credentials). */
  url: z.string(),
  intervalMs: z.number().positive(),
  /** Successful scrapes. */
  scrapes: z.int().nonnegative(),
  /** Failed scrapes (refused, timed out, non-200): counted, never fatal. */
  scrapeErrors: z.int().nonnegative(),
  lastScrapeError: z.string().nullable(),
  /** Largest number of requests the engine was running at once (summed over data-parallel ranks). */
  runningMax: z.number().nonnegative().nullable(),
  /** Largest number of requests waiting in the engine's queue. */
  waitingMax: z.number().nonnegative().nullable(),
  /** Largest KV-cache usage as a fraction (1 = full), worst rank. */
  kvUsageMax: z.number().nonnegative().nullable(),
  /**
   * Requests the engine sent back to its queue for lack of KV cache during the measured phase
   * (vLLM `vllm:num_preemptions_total`, SGLang `sglang:num_retracted_requests_total`): the
   * counter's growth from the load-start scrape to the last. Null with its reason when the engine
   * exports no such counter; absent in records written before it was kept.
   */
  preemptions: z.number().nonnegative().nullable().default(null),
  timings: EngineTimingDeltas,
  /** Why each null field (or `timings.<field>`) is null. */
  reasons: NullReasons,
})
export type EngineOccupancy = z.infer<typeof EngineOccupancy>

/** Whether the engine actually ran as many requests at once as the cell asked for. */
export const ConcurrencyCheck = z.object({
  requested: z.int().positive(),
  runningMax: z.number().nonnegative().nullable(),
  /** Null when the engine does not report running requests or too few scrapes succeeded. */
  reached: z.boolean().nullable(),
  reason: z.string(),
})
export type ConcurrencyCheck = z.infer<typeof ConcurrencyCheck>

/** Host memory of the cgroup servegate (and the engines it launched) ran in. Bytes. */
export const HostMemory = z.discriminatedUnion('status', [
  z.object({
    status: z.literal('ok'),
    cgroupVersion: z.enum(['v1', 'v2']),
    cgroupDir: z.string(),
    /** The cgroup's peak since it was created (it may predate the cell); null where the kernel has none. */
    lifetimePeakBytes: z.number().nonnegative().nullable(),
    /** `memory.peak` (v2) or `memory.max_usage_in_bytes` (v1). */
    lifetimePeakSource: z.string().nullable(),
    /** Largest `memory.current` / `memory.usage_in_bytes` sampled during the cell. */
    sampledPeakBytes: z.number().nonnegative().nullable(),
    firstBytes: z.number().nonnegative().nullable(),
    lastBytes: z.number().nonnegative().nullable(),
    /** The cgroup's limit; null when unlimited or unreadable (see reasons). */
    limitBytes: z.number().nonnegative().nullable(),
    samples: z.int().nonnegative(),
    intervalMs: z.number().positive(),
    readErrors: z.int().nonnegative(),
    reasons: NullReasons,
  }),
  Absent,
])
export type HostMemory = z.infer<typeof HostMemory>

const AgreementVerdict = z.enum(['agree', 'engine-slower-than-client', 'insufficient-data'])
type AgreementVerdict = z.infer<typeof AgreementVerdict>

/**
 * Engine-reported timing against the client's for the same requests. The client's time includes
 * queueing, network and scheduling, so engine ≤ client is expected; an engine time above the
 * client's by more than the tolerance means the harness mis-measured.
 */
export const TimingAgreement = z.object({
  metric: z.enum(['prefill', 'generation', 'time-to-first-token']),
  /** e.g. `llama-server timings.prompt_ms`, `vllm:request_prefill_time_seconds (sum/count)`. */
  engineSource: z.string(),
  /** e.g. `timeToFirstOutputMs`. */
  clientSource: z.string(),
  /** Requests compared (per-request pairs, or the engine's request count for histogram totals). */
  samples: z.int().nonnegative(),
  /** Mean of client − engine, ms. */
  meanGapMs: z.number().nullable(),
  /** Nearest-rank p50 and p95 of per-request client − engine, ms; null for histogram totals. */
  medianGapMs: z.number().nullable(),
  p95GapMs: z.number().nullable(),
  /** Requests whose engine time exceeded the client's beyond tolerance; null for histogram totals. */
  engineExceedsClient: z.int().nonnegative().nullable(),
  toleranceMs: z.number().nonnegative(),
  toleranceFraction: z.number().nonnegative(),
  verdict: AgreementVerdict,
  note: z.string(),
})
export type TimingAgreement = z.infer<typeof TimingAgreement>

/**
 * llama-server's per-request `timings` object (final stream chunk or response body). `prompt_n`
 * counts only the prompt tokens evaluated (`cache_n` were reused from the cache).
 */
export const LlamaServerTimings = z.object({
  cache_n: z.number().int().nonnegative().optional(),
  prompt_n: z.number().int().nonnegative(),
  prompt_ms: z.number().nonnegative(),
  prompt_per_token_ms: z.number().optional(),
  prompt_per_second: z.number().optional(),
  predicted_n: z.number().int().nonnegative(),
  predicted_ms: z.number().nonnegative(),
  predicted_per_token_ms: z.number().optional(),
  predicted_per_second: z.number().optional(),
  draft_n: z.number().int().nonnegative().optional(),
  draft_n_accepted: z.number().int().nonnegative().optional(),
})
export type LlamaServerTimings = z.infer<typeof LlamaServerTimings>

/** The telemetry block of a run record. */
export const CellTelemetry = z.object({
  gpu: z.discriminatedUnion('status', [
    z.object({
      status: z.literal('ok'),
      facts: z.array(GpuFact),
      /** `CUDA_VISIBLE_DEVICES` the facts were filtered by; null when all GPUs were kept. */
      visibleDevices: z.string().nullable(),
      summary: GpuSummary,
    }),
    Absent,
  ]),
  engine: z.discriminatedUnion('status', [
    z.object({ status: z.literal('ok'), occupancy: EngineOccupancy, concurrency: ConcurrencyCheck.nullable() }),
    Absent,
  ]),
  hostMemory: HostMemory,
  timingAgreement: z.discriminatedUnion('status', [z.object({ status: z.literal('ok'), comparisons: z.array(TimingAgreement) }), Absent]),
})
export type CellTelemetry = z.infer<typeof CellTelemetry>
