import { z } from 'zod'
import { CheckName } from './gate.ts'
import { Api, PrefixCacheReset, SpecDecodeMetrics } from './run.ts'
import { CheckMeta, DecisionMeta } from './task-meta.ts'
import { GpuFactSchema, Manifest } from './manifest.ts'
import { Testbed } from './noise.ts'

export const EVIDENCE_SCHEMA_ID = 'servegate.evidence/v1'

/**
 * What became of a planned cell: `accepted` (measured, every arm ran, its pair checks held),
 * `failed` (an engine failed, or the pair is not matched), `blocked` (its measurement threw
 * before a record existed), `pending` (declared but never run in this run).
 */
export const Disposition = z.enum(['accepted', 'failed', 'blocked', 'pending'])
export type Disposition = z.infer<typeof Disposition>

/** A file of the evidence directory, by path relative to it, with its size and sha256. */
export const FileRef = z.object({ path: z.string(), bytes: z.int().nonnegative(), sha256: z.string().regex(/^[0-9a-f]{64}$/) })
export type FileRef = z.infer<typeof FileRef>

/** Nearest-rank percentiles of one metric over one arm's ok requests; null when it had none. */
export const Percentiles = z.object({
  p50: z.number().nullable(),
  p95: z.number().nullable(),
  p99: z.number().nullable(),
  samples: z.int().nonnegative(),
})
export type Percentiles = z.infer<typeof Percentiles>

/**
 * What one launch measured, from its run record's manifest, so the board names the hardware and
 * software from the index alone: the engine's commit (its kind and version are beside it), the
 * model served, the GPUs, the host and the harness.
 */
export const MeasuredFacts = z.object({
  engineCommit: z.string().nullable(),
  /** The model id as the manifest has it (what the engine served). */
  modelId: z.string(),
  modelRevision: z.string().nullable(),
  /** sha256 of the weights, where the engine's files were local; null otherwise. */
  modelFingerprint: z.string().nullable(),
  /** The GPUs the launch saw; empty when none, with `gpusAbsent` saying why. */
  gpus: z.array(GpuFactSchema),
  gpusAbsent: z.string().nullable(),
  host: Manifest.shape.host,
  harness: Manifest.shape.harness,
})
export type MeasuredFacts = z.infer<typeof MeasuredFacts>

/** An arm's share of right answers on a dataset workload, with its Wilson 95% interval (fractions in [0, 1]). */
const ArmAccuracySummary = z.object({
  samples: z.int().nonnegative(),
  correct: z.int().nonnegative(),
  rate: z.number().min(0).max(1).nullable(),
  wilson95Low: z.number().min(0).max(1).nullable(),
  wilson95High: z.number().min(0).max(1).nullable(),
})
type ArmAccuracySummary = z.infer<typeof ArmAccuracySummary>

/** One measured launch of one arm, summarized from its run record. */
export const ArmSummary = z.object({
  /** `baseline`, `candidate`, or `cell` for a single-arm cell. */
  arm: z.enum(['baseline', 'candidate', 'cell']),
  /** 1-based launch number (repeats). */
  launch: z.int().positive(),
  engine: z.string().nullable(),
  engineVersion: z.string().nullable(),
  model: z.string(),
  completed: z.int().nonnegative(),
  /** Null when the run record's source never recorded its failed count (a summary-only import). */
  failed: z.int().nonnegative().nullable(),
  cellFailure: z.string().nullable(),
  timings: z.object({
    ttftMs: Percentiles,
    timeToFirstOutputMs: Percentiles,
    tpotMs: Percentiles,
    itlMs: Percentiles,
    e2eMs: Percentiles,
    decodeTokPerS: Percentiles,
    effectivePrefillTokPerS: Percentiles,
  }),
  /** Total output tokens of ok requests per second of the cell's wall clock. */
  outputThroughputTokPerS: z.number().nullable(),
  /** Inter-token jitter: the sd of all ITL gaps, ms. */
  itlJitterMs: z.number().nullable(),
  concurrency: z.object({
    requested: z.int().positive(),
    /** Most requests the client had in flight at once (from send and end times). */
    clientObservedMax: z.int().nonnegative(),
    /** The engine's own running and waiting maxima (Prometheus), null when not observed. */
    engineRunningMax: z.number().nullable(),
    engineWaitingMax: z.number().nullable(),
  }),
  memory: z.object({
    /** Worst device's VRAM peak during the load, MiB. */
    peakVramMiB: z.number().nullable(),
    vramGrowthMiB: z.number().nullable(),
    hostPeakMiB: z.number().nullable(),
  }),
  gpu: z.object({
    activePowerMeanW: z.number().nullable(),
    temperatureP95C: z.number().nullable(),
    joulesPerToken: z.number().nullable(),
  }),
  /** Open loop and SLOs: the good share with its Wilson 95% interval, goodput, send lag; nulls where the cell had none. */
  load: z.object({
    goodFraction: z.number().min(0).max(1).nullable(),
    goodFractionLow: z.number().min(0).max(1).nullable(),
    goodFractionHigh: z.number().min(0).max(1).nullable(),
    goodputReqPerS: z.number().nonnegative().nullable(),
    sendLagP99Ms: z.number().nullable(),
    /** Open loop: the most requests in flight at once. */
    inFlightMax: z.int().nonnegative().nullable(),
  }),
  harnessLimited: z.boolean(),
  /**
   * The share of the machine's CPU time the hypervisor gave to other guests while the arm measured
   * (the record's `harness.hostStealShare`); null where unread, absent in indexes written before it was kept.
   */
  hostStealShare: z.number().min(0).max(1).nullable().optional(),
  /** Conversations: TTFT per turn (1-based) over its ok requests; null for single-turn cells, absent in older indexes. */
  ttftByTurn: z
    .array(z.object({ turn: z.int().positive(), ttftMs: Percentiles }))
    .nullable()
    .optional(),
  /** Metric names whose p99 is descriptive only (fewer samples than p99 needs). */
  p99DescriptiveOnly: z.array(z.string()),
  /** Where the stage-wise sequential pair stopped, if it was one. */
  sequential: z.object({ stoppedAt: z.int().nonnegative(), plannedRequests: z.int().positive(), reason: z.string() }).nullable(),
  record: FileRef,
  /** What was measured (null: the record has no manifest); absent in indexes written before it was kept. */
  measured: MeasuredFacts.nullable().optional(),
  /** Dataset workloads: the arm's accuracy (null: nothing scored); absent in indexes written before it was kept. */
  accuracy: ArmAccuracySummary.nullable().optional(),
  /**
   * The engine-reported prefix cache (the record's `metrics.cachedPromptShare`,
   * `totalCachedPromptTokens` and why they are unknown) and the reset before the cell
   * (`plan.prefixCacheReset.status`); absent where the engine reported none and nothing was reset.
   */
  prefixCache: z
    .object({
      cachedPromptShare: z.number().nonnegative().nullable(),
      totalCachedPromptTokens: z.int().nonnegative().nullable(),
      unknownReason: z.string().nullable(),
      reset: PrefixCacheReset.shape.status.nullable(),
    })
    .optional(),
  /** Requests the cell's `cancel` plan aborted (the record's `cancelled`); absent when none was. */
  cancelled: z.int().positive().optional(),
  /** Speculative decoding's draft acceptance as the engine reported it (the record's `metrics.specDecode`); absent if none. */
  specDecode: z
    .object({
      source: SpecDecodeMetrics.shape.source,
      acceptanceRate: z.number().nonnegative().nullable(),
      meanAcceptanceLength: z.number().nonnegative().nullable(),
      draftTokens: z.int().nonnegative().nullable(),
    })
    .optional(),
  /**
   * A remote target's round trips and its TTFT and e2e less them (the record's `network`); absent
   * for a loopback target. `rttMs` is what was subtracted, by `estimator`; null when no probe answered.
   */
  network: z
    .object({
      host: z.string(),
      httpEndpoint: z.string().nullable(),
      httpRttP50Ms: z.number().nonnegative().nullable(),
      handshakeP50Ms: z.number().nonnegative().nullable(),
      estimator: z.enum(['http-p50-before', 'handshake-p50-before']).nullable(),
      rttMs: z.number().nonnegative().nullable(),
      adjustedTtftMs: Percentiles.nullable(),
      adjustedE2eMs: Percentiles.nullable(),
    })
    .optional(),
})
export type ArmSummary = z.infer<typeof ArmSummary>

/** The plan of a cell as the board shows it (the full plan is in each run record). */
export const CellPlanSummary = z.object({
  api: Api.nullable(),
  concurrency: z.int().positive(),
  /** `closed` at `concurrency`, or the open-loop arrival process. */
  arrival: z.enum(['closed', 'constant', 'poisson', 'gamma', 'trace']),
  /** Open loop: the arrival rate, requests per second (null for the closed loop or a trace). */
  arrivalRatePerS: z.number().positive().nullable(),
  requests: z.int().positive(),
  maxTokens: z.int().positive().nullable(),
  workload: z.string(),
  promptTokens: z.int().positive(),
  requestStreamSha256: z.string().nullable(),
})
export type CellPlanSummary = z.infer<typeof CellPlanSummary>

/**
 * A yes/no fact about a cell (matched pair, canaries, concurrency reached), what it found, and the
 * run records it read (by `runId`), so `servegate verify` can check it again.
 */
export const PairCheck = z.object({
  check: CheckName,
  passed: z.boolean(),
  /** Every mismatch or missing fact, in words; empty when it passed. */
  findings: z.array(z.string()),
  test: z.string(),
  /** The vitest outcome of the assertion (`.not.toBeMatchedPair()` passes on an unmatched pair). */
  testPassed: z.boolean(),
  judged: CheckMeta.shape.judged,
  isNot: CheckMeta.shape.isNot,
  unverifiable: CheckMeta.shape.unverifiable,
})
export type PairCheck = z.infer<typeof PairCheck>

/**
 * A gate decision as the evidence keeps it: which cell and test, whether the test passed, and
 * what `servegate verify` needs to decide it again: what it judged (run records by `runId`, or
 * two capacity searches), the gate's resolved options, the inconclusive policy that decided the
 * matcher's result and where that policy came from, and whether the assertion was `.not`.
 */
export const GateEntry = z.object({
  cell: z.string(),
  test: z.string(),
  /** The vitest outcome of the assertion (a non-regression gate passes on inconclusive unless its policy says `fail`). */
  testPassed: z.boolean(),
  ...DecisionMeta.omit({ cell: true }).shape,
})
export type GateEntry = z.infer<typeof GateEntry>

export const EvidenceCell = z.object({
  id: z.string(),
  kind: z.enum(['cell', 'pair']),
  /** The spec file (relative to the project root) that declared it. */
  file: z.string(),
  required: z.boolean(),
  /** The most of an arm's requests that may fail before the cell is `failed` (0–1); null: the default (0 if required, else no limit). */
  maxFailedShare: z.number().min(0).max(1).nullable(),
  disposition: Disposition,
  /** Why it is not accepted; null when it is. */
  reason: z.string().nullable(),
  /** A sweep this cell belongs to (its ladder), or null. */
  ladder: z.string().nullable(),
  plan: CellPlanSummary.nullable(),
  /** Engine names of the arms, e.g. { baseline: 'vllm:Qwen/Qwen3-8B', candidate: 'photon' }. */
  engines: z.record(z.string(), z.string()),
  arms: z.array(ArmSummary),
  checks: z.array(PairCheck),
})
export type EvidenceCell = z.infer<typeof EvidenceCell>

/** What a reviewer should look at that is not a plain pass: each names its cell. */
export const Finding = z.object({
  kind: z.enum([
    'non-win',
    'regression',
    'inconclusive',
    'quality',
    'descriptive-p99',
    'harness-limited',
    'host-noise',
    'check-failed',
    'cell-not-accepted',
    'failed-requests',
    'noise-floor',
  ]),
  cell: z.string(),
  message: z.string(),
})
export type Finding = z.infer<typeof Finding>

/** What a partial run left out, and why (see `EvidenceIndex.partial`). */
export const PartialRun = z.object({
  /** Each filter or cause in words, e.g. `tests filtered by name (-t "alpha")`; at least one. */
  reasons: z.array(z.string()).min(1),
  /** Spec files of the suite (relative to the project root) that this run did not run. */
  filesNotRun: z.array(z.string()),
  /** Cells declared by the files that ran but never measured (their disposition is `pending`). */
  cellsNotRun: z.array(z.string()),
})
export type PartialRun = z.infer<typeof PartialRun>

/** One run's figure of a cell's gated metric on the trend of main, with its 95% interval where its standard error is known. */
export const TrendPoint = z.object({
  /** The commit measured; null when unknown. */
  commit: z.string().nullable(),
  /** When the run finished, ISO 8601. */
  at: z.string(),
  value: z.number().positive(),
  /** value × exp(∓1.96 × relativeSe); null when the run's standard error is unknown. */
  low: z.number().positive().nullable(),
  high: z.number().positive().nullable(),
})
export type TrendPoint = z.infer<typeof TrendPoint>

/** One gated figure of one cell's arm across the runs of main on one testbed, and this run's point against it. */
export const HistoryTrend = z.object({
  /** The cell's arm as the history names it: the cell's id, or `<id>/baseline`, `<id>/candidate` for a pair's arms. */
  cell: z.string(),
  /** The gate decision's metric (`decodeTokPerS`, `ttftMs p95`, …). */
  metric: z.string(),
  testbed: Testbed,
  /** The last runs of main on this testbed that measured it, oldest first. */
  main: z.array(TrendPoint),
  /** This run's point; null when this run did not measure it. */
  current: TrendPoint.nullable(),
})
export type HistoryTrend = z.infer<typeof HistoryTrend>

/**
 * The history of main (the plugin's `noise.history`): whether this run was appended to it and
 * why not, and the trend of every gated figure of this run across the runs of main.
 */
export const EvidenceHistory = z.object({
  /** The history store, as the plugin's option names it. */
  path: z.string(),
  /** The branch this run was on (CI's variables, else git); null when unknown. */
  branch: z.string().nullable(),
  appended: z.boolean(),
  /** Why this run was not appended (another branch, a partial run, no gated figure…); null when it was. */
  reason: z.string().nullable(),
  trend: z.array(HistoryTrend),
})
export type EvidenceHistory = z.infer<typeof EvidenceHistory>

export const EvidenceIndex = z.object({
  schema: z.literal(EVIDENCE_SCHEMA_ID),
  /** The latest finish time of any run record: the same inputs give the same index. */
  generatedAt: z.string().nullable(),
  provenance: z.object({
    servegateVersion: z.string(),
    /** The harness hash of the records (null when none had a manifest); several when they differ. */
    harnessHashes: z.array(z.string()),
    /** `git rev-parse HEAD` of the suite, or null outside a git work tree. */
    suiteCommit: z.string().nullable(),
    /** Whether base URLs and host names were redacted in this evidence. */
    redacted: z.boolean(),
  }),
  cells: z.array(EvidenceCell),
  gates: z.array(GateEntry),
  findings: z.array(Finding),
  statistics: z.object({
    planned: z.int().nonnegative(),
    required: z.int().nonnegative(),
    accepted: z.int().nonnegative(),
    failed: z.int().nonnegative(),
    blocked: z.int().nonnegative(),
    pending: z.int().nonnegative(),
    matchedPairs: z.int().nonnegative(),
    gates: z.object({ pass: z.int().nonnegative(), fail: z.int().nonnegative(), inconclusive: z.int().nonnegative() }),
  }),
  promotion: z.object({
    /** True only when every required cell is accepted and every gate's test passed. */
    promotable: z.boolean(),
    reasons: z.array(z.string()),
  }),
  /** Charts and pages written beside index.json. */
  artifacts: z.array(FileRef),
  /**
   * Baseline records a gate judged that were not measured in this run (`storedBaseline(path)`,
   * e.g. the main branch's artifact), kept under `runs/stored/` so every verdict can be decided again.
   */
  storedBaselines: z.array(z.object({ runId: z.string(), source: z.string(), record: FileRef })).default([]),
  /**
   * A run that did not cover the suite: why (a file list, `-t`, `.only`, an interrupted run, a
   * merge without every shard), the spec files of the suite it did not run and the declared cells
   * it did not measure. Such evidence is never promotable. Null for a complete run; absent in
   * indexes written before it was kept, read as null.
   */
  partial: PartialRun.nullable().default(null),
  /** The history of main, when the plugin's `noise.history` names one; null otherwise, and in indexes written before it was kept. */
  history: EvidenceHistory.nullable().default(null),
})
export type EvidenceIndex = z.infer<typeof EvidenceIndex>
