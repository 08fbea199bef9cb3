import { z } from 'zod'
import { ERROR_CODES } from '../errors.ts'
import { PERCENTILE_METHOD } from './constants.ts'
import { LengthsPlan } from './lengths.ts'
import { ArrivalPlan, Goodput, OpenLoopStats } from './load.ts'
import { Manifest } from './manifest.ts'
import { PrefixGroupsPlan } from './prefix-groups.ts'
import { ItlPacked, unpackGaps } from './itl-packed.ts'
import { CellTelemetry } from './telemetry.ts'
import { ShardFigures } from './shards.ts'

/** Schema id of a servegate run record. Bump only with a migration. */
export const RUN_SCHEMA_ID = 'servegate.run/v1'

export { P99_MIN_SAMPLES, PERCENTILE_METHOD } from './constants.ts'

const nullableMs = z.number().nonnegative().nullable()

/** The fixed shape of every distribution: the keys `servegate summarize --json` prints. */
export const Distribution = z.object({
  samples: z.int().nonnegative(),
  mean: z.number().nullable(),
  /** Sample standard deviation (n − 1); null below 2 samples. */
  stddev: z.number().nullable(),
  /** mean − 1.96·sd/√n; null below 2 samples. */
  ci95Low: z.number().nullable(),
  /** mean + 1.96·sd/√n; null below 2 samples. */
  ci95High: z.number().nullable(),
  min: z.number().nullable(),
  p25: z.number().nullable(),
  p50: z.number().nullable(),
  p75: z.number().nullable(),
  p90: z.number().nullable(),
  p95: z.number().nullable(),
  p99: z.number().nullable(),
  max: z.number().nullable(),
})
export type Distribution = z.infer<typeof Distribution>

/** Per-request metrics that have a distribution in a cell; the names of `summarize --json`. */
export const REQUEST_METRIC_NAMES = [
  'ttftMs',
  'timeToFirstOutputMs',
  'e2eMs',
  'generationMs',
  'tpotMs',
  'decodeTokPerS',
  'effectivePrefillTokPerS',
  'promptTokens',
  'completionTokens',
] as const
export type RequestMetricName = (typeof REQUEST_METRIC_NAMES)[number]

export const ErrorInfo = z.object({
  code: z.enum(ERROR_CODES),
  /** Sanitized: no credentials, bounded length. */
  message: z.string(),
  /** HTTP status when the server answered with one. */
  httpStatus: z.int().nullable().default(null),
  /** Seconds from a 429's `Retry-After`, when sent. */
  retryAfterS: z.number().nullable().default(null),
})
export type ErrorInfo = z.infer<typeof ErrorInfo>

/** A process of a launched engine that teardown had to hunt down, and how it ended. */
export const TeardownSurvivor = z.object({
  pid: z.int().positive(),
  /** Its command line, secrets redacted, at most 200 characters. */
  command: z.string(),
  /**
   * How teardown found it: in the engine's process tree (its group or a parent walk), only by
   * the launch token in its environment (it had left the tree: a session of its own, reparented
   * to init), only in the launch's cgroup (it had also cleared its environment), or only as the
   * listener on the engine's port.
   */
  foundBy: z.enum(['process-tree', 'launch-token', 'cgroup', 'port']),
  /**
   * What ended it: SIGTERM, or SIGKILL after the grace period; null when it still ran (or was left
   * running: a port listener servegate cannot tell is this launch's).
   */
  endedBy: z.enum(['SIGTERM', 'SIGKILL']).nullable(),
})
export type TeardownSurvivor = z.infer<typeof TeardownSurvivor>

/**
 * Whether the engine went back to idle after a cell that cancelled requests: its running and
 * waiting requests to 0 and its KV usage to its pre-cell level (within `kvUsageTolerance`), read
 * from its Prometheus `/metrics` for up to `boundMs` after the cell's last request ended. An engine
 * that leaks on abort fails the cell (`cellFailure` ENGINE_NOT_DRAINED, with these figures).
 */
export const EngineDrain = z.object({
  /** False when the engine's `/metrics` could not be read or names no such gauges: nothing was judged. */
  checked: z.boolean(),
  /** The Prometheus endpoint read; null when none was known. */
  url: z.string().nullable(),
  /** How long servegate waited for the engine to settle, ms. */
  boundMs: z.number().positive(),
  /** The KV usage (a fraction, 1 = full) it may stay above its pre-cell level. */
  kvUsageTolerance: z.number().nonnegative(),
  /** From the cell's end to the first reading that met every condition, ms; null when none did within the bound. */
  settledMs: z.number().nonnegative().nullable(),
  /** Requests running and waiting at the last reading; null where the engine exports no such gauge. */
  running: z.number().nonnegative().nullable(),
  waiting: z.number().nonnegative().nullable(),
  /** KV usage before the cell's first request and at the last reading; null where the engine exports none. */
  kvUsageBefore: z.number().nonnegative().nullable(),
  kvUsageAfter: z.number().nonnegative().nullable(),
  /** Readings taken after the cell. */
  readings: z.int().nonnegative(),
  /** True when it settled within the bound, false when it did not; null when not checked. */
  passed: z.boolean().nullable(),
  /** What was judged and how it went, or why nothing was. */
  reason: z.string(),
})
export type EngineDrain = z.infer<typeof EngineDrain>

/**
 * How a Kubernetes deployment (`kind: 'kubernetes'`) was removed, and the check that it is gone:
 * `kubectl delete -f FILE` then `kubectl get -f FILE`, or `helm uninstall RELEASE` then `helm status RELEASE`.
 */
export const ReleaseTeardown = z.object({
  /** The tool that applied and removed it. */
  tool: z.enum(['kubectl', 'helm']),
  /** The Helm release's name, or the manifest file applied. */
  name: z.string(),
  namespace: z.string(),
  /** True when the check found nothing left (`helm status`: release not found; `kubectl get`: no object). */
  removed: z.boolean(),
  /** The command that checked, e.g. `helm status vllm -n bench`. */
  checkedWith: z.string(),
})
export type ReleaseTeardown = z.infer<typeof ReleaseTeardown>

/** How a launched engine's teardown went: every process that escaped its tree or outlived SIGTERM, and its port. */
export const EngineTeardown = z.object({
  /** Empty when the tree went down on SIGTERM with nothing outside it (always, for a Kubernetes deployment: no local process). */
  survivors: z.array(TeardownSurvivor),
  /**
   * False when something still accepted connections on the engine's loopback port afterwards;
   * true for a Kubernetes deployment, which servegate gave no loopback port (see `release`).
   */
  portClosed: z.boolean(),
  /** One sentence per survivor or open port, for people (also written to stderr); empty when clean. */
  findings: z.array(z.string()),
  /**
   * What held the launch's processes together: `cgroup`, a cgroup v2 of its own that teardown
   * killed whole (nothing escapes it); `process-group` where cgroup v2 was not writable (the
   * tree, the launch token and the port are hunted). Absent in records written before it.
   */
  confinement: z.enum(['cgroup', 'process-group']).optional(),
  /** A Kubernetes deployment's removal and the check that it is gone; absent for a local process. */
  release: ReleaseTeardown.optional(),
})
export type EngineTeardown = z.infer<typeof EngineTeardown>

/**
 * How a cell cross-checks each reply's `usage` against what it streamed (docs/metrics.md); a
 * reply that fails is USAGE_INVALID: kept, excluded from every distribution, counted as failed.
 */
export const UsageCheck = z.strictObject({
  /**
   * Completion tokens a reply may report per streamed chunk that carried text, where no tokenizer
   * counts it: speculative decoding and multi-token chunks (`--stream-interval`) stay within it,
   * a server that reports 50 times what it streamed does not. @default 16
   */
  maxTokensPerChunk: z.int().min(1).default(16),
  /**
   * Where the engine has a `POST /tokenize` endpoint, count each reply's streamed text (reasoning
   * and content) with it, once per request after the measured requests, and require the reported
   * count to agree within the stated tolerance. @default true
   */
  retokenize: z.boolean().default(true),
})
export type UsageCheck = z.input<typeof UsageCheck>

/**
 * The reported completion count may differ from the engine tokenizer's count of the streamed
 * text by this many tokens plus this share of it: re-tokenizing decoded text is not an identity
 * (merges across token boundaries, a leading-space token, `<think>` tags a reasoning parser
 * strips, the stop token), while a count inflated by a third or more is caught on replies of 50
 * tokens and longer.
 */
export const RETOKENIZE_TOLERANCE = { tokens: 8, share: 0.15 } as const

/** The usage cross-check a cell ran, as its record states it. */
export const UsageCheckPlan = z.object({
  maxTokensPerChunk: z.int().positive(),
  retokenize: z.boolean(),
  /** The tokenizer that counted the streamed text; null when none did (the chunk bound alone). */
  tokenizer: z.string().nullable(),
  /** The reported count may differ from the tokenizer's by this many tokens plus `toleranceShare` of it. */
  toleranceTokens: z.int().nonnegative(),
  toleranceShare: z.number().nonnegative(),
})
export type UsageCheckPlan = z.infer<typeof UsageCheckPlan>

/** A reply's usage exactly as the server sent it; a value that was not a number is null. */
const ReportedUsage = z.object({
  promptTokens: z.number().nullable(),
  completionTokens: z.number().nullable(),
})

export const CompletionTokenSource = z.enum(['usage', 'client-count'])
export type CompletionTokenSource = z.infer<typeof CompletionTokenSource>

/** A request canary's verdict: the reply must start with its own marker and hold no other. */
export const CanaryCheck = z.object({
  marker: z.string(),
  atStart: z.boolean(),
  foreignMarkers: z.array(z.string()),
  /** False when the content capture was cut short: the check then fails closed. */
  captureComplete: z.boolean(),
  passed: z.boolean(),
  /** Why it failed; null when it passed. */
  reason: z.string().nullable(),
})
export type CanaryCheck = z.infer<typeof CanaryCheck>

/** A scored reply: the answer extracted from its content (never its reasoning) and the verdict. */
const ScoreResult = z.object({
  correct: z.boolean(),
  extracted: z.string().nullable(),
  reason: z.string(),
})

const requestCommon = {
  /** 0-based index in the measured sequence (warm-up requests are not recorded here). */
  index: z.int().nonnegative(),
  /**
   * Time the request waited for a place after it was ready: closed loop, for a concurrency slot
   * (ready at cell start); open loop, for the in-flight cap (ready at its scheduled time; 0 without a cap).
   */
  queueDelayMs: nullableMs,
  /**
   * Time from the moment the request could be sent (a free slot; open loop: its scheduled time, or
   * the cap freeing later) to its bytes being on the socket: the harness's own lateness.
   */
  sendLagMs: nullableMs,
  /** Send time relative to the cell start (monotonic clock). */
  startOffsetMs: z.number().nullable(),
  /** Open loop: the scheduled send time relative to the cell start, ms; null in the closed loop. */
  scheduledOffsetMs: z.number().nonnegative().nullable().default(null),
  ttftMs: nullableMs,
  timeToFirstOutputMs: nullableMs,
  e2eMs: nullableMs,
  generationMs: nullableMs,
  tpotMs: nullableMs,
  decodeTokPerS: z.number().nonnegative().nullable(),
  effectivePrefillTokPerS: z.number().nonnegative().nullable(),
  promptTokens: z.int().nonnegative().nullable(),
  completionTokens: z.int().nonnegative().nullable(),
  completionTokenSource: CompletionTokenSource.nullable(),
  reasoningChunks: z.int().nonnegative().nullable(),
  contentChunks: z.int().nonnegative().nullable(),
  /**
   * Gaps between consecutive output chunks, ms, each a whole number of microseconds; null when the
   * source did not keep them. A record file stores them packed in `itlPacked` (this field then
   * null); reading it fills this field again.
   */
  itlMs: z
    .array(z.number())
    .nullable()
    .describe('gaps between consecutive output chunks, ms; null in a file that packs them in itlPacked, or where they were not kept'),
  /**
   * The gaps as a record file stores them: whole microseconds, delta-encoded, zigzag-mapped, LEB128
   * varints, base64 (docs/metrics.md, "Gaps, packed"). Null in memory (reading a file decodes it
   * into `itlMs`), and in a file where the gaps were not kept or are in `itlMs` (records written
   * before servegate packed them).
   */
  itlPacked: ItlPacked.nullable().default(null),
  finishReason: z.string().nullable(),
  /** Prompt tokens counted by the engine's tokenizer when the workload was planned; null when estimated. */
  plannedPromptTokens: z.int().nonnegative().nullable().default(null),
  /** sha256 of the exact bytes handed to the socket for this request (model included), hex. */
  wireSha256: z.string().nullable().default(null),
  canary: CanaryCheck.nullable().default(null),
  /** Output control on: exactly max_tokens completion tokens, or not, or no usage to tell; null when off. */
  outputAdherence: z.enum(['exact', 'inexact', 'unobservable']).nullable().default(null),
  /** Dataset workloads: the reply's score against the reference answer. */
  score: ScoreResult.nullable().default(null),
  /**
   * Dataset workloads: the reply's content exactly as it was scored (canary markers removed; never
   * the reasoning), so `servegate rescore` can judge it again after a scorer fix without rerunning
   * the engines. Null for synthetic workloads, unscored requests, a reply cut at the capture bound,
   * and records written before servegate kept it.
   */
  outputText: z.string().nullable().default(null),
  /** The engine's own per-request timings where it streams them (llama-server's `timings`). */
  engineTimings: z.record(z.string(), z.number()).nullable().default(null),
  /**
   * The engine's own prefill rate, tok/s: prompt tokens it evaluated over its prompt time
   * (llama-server `timings.prompt_n / prompt_ms`), beside the client's `effectivePrefillTokPerS`,
   * which also holds queueing, scheduling and the network. Null where the engine reports none.
   */
  enginePrefillTokPerS: z.number().positive().nullable().default(null),
  /**
   * Prompt tokens the engine reported serving from its prefix cache: `usage.prompt_tokens_details.cached_tokens`
   * (vLLM, SGLang, llama.cpp), else llama.cpp's `timings.cache_n`; null when it reported neither (unknown, never 0).
   */
  cachedPromptTokens: z.int().nonnegative().nullable().default(null),
  /** 2 when the server closed the first attempt's connection before any response (sent again once). */
  sendAttempts: z.int().positive().default(1),
  /** Conversations: the session (0-based) the request belongs to; null for single-turn workloads. */
  session: z.int().nonnegative().nullable().default(null),
  /** Conversations: the request's turn in its session, 1-based; null for single-turn workloads. */
  turn: z.int().positive().nullable().default(null),
  /** Shared-prefix groups: the request's group (0-based), whose system prompt opens its prompt; null otherwise. */
  group: z.int().nonnegative().nullable().default(null),
  /**
   * The rule that judged the reply's reported usage: the engine's tokenizer over the streamed
   * text, or the tokens-per-chunk bound; null when the server reported none (or nothing streamed).
   */
  usageRule: z.enum(['tokenizer', 'chunk-bound']).nullable().default(null),
  /** The engine tokenizer's count of the streamed text (rule `tokenizer`); null otherwise. */
  retokenizedTokens: z.int().nonnegative().nullable().default(null),
  /**
   * The usage as the server sent it, kept when it failed its check (USAGE_INVALID): `promptTokens`
   * and `completionTokens` then hold only what the client saw (the streamed chunks); null otherwise.
   */
  reportedUsage: ReportedUsage.nullable().default(null),
}

/**
 * A stored request as it is kept in memory: its `itlPacked` decoded into `itlMs` (and set to
 * null). Corrupt packed gaps are an issue at `itlPacked.<field>` naming the request's index.
 */
function unpackRequestGaps(value: unknown, ctx: z.RefinementCtx): unknown {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return value
  const request = value as { index?: unknown; itlMs?: unknown; itlPacked?: unknown }
  const packed = request.itlPacked
  if (packed === null || packed === undefined || typeof packed !== 'object' || Array.isArray(packed)) return value
  const which = `request ${typeof request.index === 'number' ? request.index : '(no index)'}`
  const fix = 'the file is corrupt; write the record again from its source (or from its spill, <out>.requests.jsonl)'
  if (request.itlMs !== null && request.itlMs !== undefined) {
    ctx.addIssue({ code: 'custom', path: ['itlMs'], message: `${which}: itlMs and itlPacked are both set; a record keeps one; ${fix}` })
    return value
  }
  const gaps = unpackGaps(packed)
  if (!Array.isArray(gaps)) {
    ctx.addIssue({ code: 'custom', path: ['itlPacked', gaps.field], message: `${which}: itlPacked.${gaps.message}; ${fix}` })
    return value
  }
  return { ...request, itlMs: gaps, itlPacked: null }
}

/**
 * One measured request: ok; failed with its stable code and partial timings kept; or cancelled,
 * aborted by the cell's `cancel` plan while it streamed (neither ok nor failed: its partial
 * timings are kept, and it enters no distribution and no failure count).
 */
export const RequestRecord = z.preprocess(
  unpackRequestGaps,
  z.discriminatedUnion('status', [
    z.object({ status: z.literal('ok'), ...requestCommon }),
    z.object({ status: z.literal('failed'), error: ErrorInfo, ...requestCommon }),
    z.object({ status: z.literal('cancelled'), ...requestCommon }),
  ]),
)
export type RequestRecord = z.infer<typeof RequestRecord>

export const Api = z.enum(['chat', 'completions'])
export type Api = z.infer<typeof Api>

/** How one sampling parameter was handled: asked for, whether and where sent, value in effect. */
export const SamplingEntry = z.object({
  requested: z.union([z.string(), z.number()]).nullable(),
  sent: z.boolean(),
  /** The body field that carried it; null when not sent. */
  field: z.string().nullable(),
  /** The sent value, or null for the engine's (unknown) default. */
  effective: z.union([z.string(), z.number(), z.boolean()]).nullable(),
  note: z.string().nullable(),
})
export type SamplingEntry = z.infer<typeof SamplingEntry>

/** How prompts were sized: with the engine's own tokenizer, or estimated (with the reason). */
export const Calibration = z.object({
  method: z.enum(['engine-tokenizer', 'estimate', 'none']),
  /** Which endpoint counted, e.g. `POST /tokenize (vLLM shape…)`. */
  tokenizer: z.string().nullable(),
  /** The planned prompt size; with per-request sizes (a replayed trace), their mean (each request held to its own tolerance). */
  targetTokens: z.int().nonnegative(),
  /** ±0.5% or ±8 tokens, whichever is larger. */
  toleranceTokens: z.int().nonnegative(),
  /** Requests whose calibrated count missed the tolerance. */
  outsideTolerance: z.int().nonnegative(),
  /** Set whenever sizes are estimated or a tokenizer call failed: never a silent wrong size. */
  warning: z.string().nullable(),
  /** The shared block's calibrated size (shared prefix only). */
  sharedPrefixTokens: z.int().nonnegative().nullable(),
})
export type Calibration = z.infer<typeof Calibration>

/** A conversation cell's sessions as planned: their shape, sizes and how their history was sent. */
export const ConversationPlan = z.object({
  sessions: z.int().positive(),
  turns: z.int().positive(),
  /** Null when the turns came from a conversations file (the plan's `dataset` names it). */
  userTokens: z.int().positive().nullable(),
  systemTokens: z.int().nonnegative(),
  /** Replayed history: tokens of each assistant turn sent back; null for live history (the model's own replies). */
  assistantTokens: z.int().positive().nullable(),
  thinkTimeMs: z.number().nonnegative(),
  /**
   * `replayed`: the history's assistant turns are fixed text from the plan, so both arms send the
   * same bytes; `live`: they are what the model answered, so the arms differ by design and the
   * request-stream hash covers the planned user turns only.
   */
  history: z.enum(['replayed', 'live']),
})
export type ConversationPlan = z.infer<typeof ConversationPlan>

export const WorkloadPlan = z.object({
  /** `imported` when the record came from another harness that did not describe its prompts. */
  kind: z.enum(['synthetic-summary', 'synthetic-repeated-code', 'shared-prefix', 'dataset', 'conversation', 'imported']),
  /**
   * Planned prompt size in tokens, as the engine counts them; with drawn sizes (`lengths`) or a
   * replayed trace, the measured requests' mean; with shared-prefix groups, systemTokens + questionTokens.
   */
  promptTokens: z.int().positive(),
  /** Null when an imported record did not say. */
  seed: z.int().nullable(),
  prefixCache: z.object({ mode: z.enum(['unique', 'shared', 'unknown']), tokens: z.int().nullable() }),
  canaries: z.boolean(),
  outputControl: z.object({
    mode: z.enum(['none', 'observe', 'strict']),
    /** The body field that controlled the length (`ignore_eos` or `min_tokens`); null when none. */
    knob: z.string().nullable(),
  }),
  /** Each sampling parameter as requested, sent and in effect; null when the source did not say. */
  sampling: z.record(z.string(), SamplingEntry).nullable(),
  dataset: z.object({ path: z.string(), sha256: z.string(), rows: z.int().positive() }).nullable(),
  calibration: Calibration.nullable(),
  /** How planned tokens were turned into text. */
  promptTokensEstimator: z.string(),
  /** sha256 over each planned request body's byte length and sha256, in order (bodies without the model name), hex. */
  requestStreamSha256: z.string().nullable(),
  /** The same hash over the bytes actually written to the socket (model name removed). */
  wireStreamSha256: z.string().nullable(),
  /** True when every measured request's written bytes were the planned ones. */
  wireMatchesPlan: z.boolean().nullable(),
  /** Declared floor of measured requests per concurrency slot, and whether the cell met it. */
  requestsPerSlotFloor: z.int().positive().nullable(),
  floorMet: z.boolean().nullable(),
  /** Conversations: how the sessions were planned and sent; null for single-turn workloads. */
  conversation: ConversationPlan.nullable().default(null),
  /** Sizes drawn from a distribution (`promptTokens`, `maxTokens`) and every request's draw; null when none was drawn. */
  lengths: LengthsPlan.nullable().default(null),
  /** Shared-prefix groups as planned, with each group's measured requests; null otherwise. */
  prefixGroups: PrefixGroupsPlan.nullable().default(null),
})
export type WorkloadPlan = z.infer<typeof WorkloadPlan>

/**
 * A cell measured in stages for a sequential pair: both arms run the same stages A B B A, and the
 * pair stops at the first stage where every stopping gate decided (pass or fail).
 */
export const SequentialPlan = z.object({
  /** Request counts (plan indices) at which the stopping gates looked, ascending; the last is `plannedRequests`. */
  looks: z.array(z.int().positive()).min(1),
  plannedRequests: z.int().positive(),
  /** The gates (with their options) whose decisions stop the pair. */
  stopWhen: z.array(z.object({ gate: z.string(), options: z.record(z.string(), z.unknown()) })),
  /** Requests of the plan actually sent: the look where the pair stopped, or all of them. */
  stoppedAt: z.int().nonnegative(),
  /** Why it stopped where it did. */
  reason: z.string(),
})
export type SequentialPlan = z.infer<typeof SequentialPlan>

/**
 * A cell's cancellations as planned (`cancel: { share, afterMs }`): each chosen request is aborted
 * `afterMs` after it was sent. Which requests are chosen is a function of the request index and the
 * workload's seed only, so both arms cancel the same ones.
 */
export const CancelPlan = z.object({
  /** The share of requests chosen, 0 < share ≤ 1: each index is chosen when its seeded draw falls below it. */
  share: z.number().gt(0).max(1),
  /** Time from a chosen request's send to its abort, ms. */
  afterMs: z.number().nonnegative(),
  /** The seed of the draws (the workload's seed; 0 when it has none). */
  seed: z.int(),
  /** Measured requests chosen, by plan index, ascending. One that ends before its abort is recorded as it ended. */
  indices: z.array(z.int().nonnegative()),
})
export type CancelPlan = z.infer<typeof CancelPlan>

/**
 * What servegate did to the engine's prefix cache before a cell whose workload reuses prefixes
 * (shared-prefix groups, conversations, a shared prefix block, a replayed trace), so that the cell
 * does not find what an earlier cell on the same engine cached.
 */
export const PrefixCacheReset = z.object({
  /**
   * `reset`: the engine emptied its prefix cache; `partial`: it emptied what it offers to, and keeps
   * a cache it has no reset for (llama-server's host-memory prompt cache); `not-offered`: the engine
   * has no reset servegate can call; `failed`: it has one, and it refused or failed.
   */
  status: z.enum(['reset', 'partial', 'not-offered', 'failed']),
  /** The calls made, in order, e.g. `POST /reset_prefix_cache`; empty when none was. */
  endpoints: z.array(z.string()),
  /** Why the status is not `reset`, with the engine's answer; null when it is. */
  reason: z.string().nullable(),
})
export type PrefixCacheReset = z.infer<typeof PrefixCacheReset>

export const RunPlan = z.object({
  /** Null when an imported record did not say which API it used. */
  api: Api.nullable(),
  model: z.string().min(1),
  concurrency: z.int().positive(),
  requests: z.int().positive(),
  /** Null when an imported record did not say. */
  warmupRequests: z.int().nonnegative().nullable(),
  /** Null when an imported record did not say, or each request drew its own (`workload.lengths.maxTokens`). */
  maxTokens: z.int().positive().nullable(),
  requestTimeoutMs: z.int().positive().nullable(),
  workload: WorkloadPlan,
  /** Null unless the cell was one arm of a sequential pair (see `pair({ stopEarly })`). */
  sequential: SequentialPlan.nullable().default(null),
  /** Open-loop arrivals (rate, trace, cap, schedule hash); null for the closed loop at `concurrency`. */
  arrival: ArrivalPlan.nullable().default(null),
  /** How each reply's usage was cross-checked; null for imports and records written before servegate checked it. */
  usageCheck: UsageCheckPlan.nullable().default(null),
  /**
   * The engine's prefix cache emptied before the cell, or why it could not be; null when the
   * workload reuses no prefixes (nothing to isolate), for an engine servegate did not reach
   * (the cell failed first), and in records written before servegate reset it.
   */
  prefixCacheReset: PrefixCacheReset.nullable().default(null),
  /** Requests aborted on purpose after a delay from their send; null when the cell cancels none. */
  cancel: CancelPlan.nullable().default(null),
})
export type RunPlan = z.infer<typeof RunPlan>

/** One turn of a conversation cell's requests: how many, and their TTFT and prompt tokens. */
const TurnMetrics = z.object({
  /** 1-based: turn 1 opens a session. */
  turn: z.int().positive(),
  completed: z.int().nonnegative(),
  failed: z.int().nonnegative(),
  ttftMs: Distribution,
  promptTokens: Distribution,
  /** The engine-reported cached share of the turn's ok prompt tokens; null where the engine reported none. */
  cachedPromptShare: z.number().min(0).max(1).nullable().default(null),
})

/**
 * Speculative decoding's draft acceptance over a cell's measured requests, as the engine reported
 * it: acceptance rate = accepted ÷ draft tokens; mean acceptance length = 1 + accepted tokens ÷
 * drafts (the bonus token of each verification step counted, as vLLM and SGLang define it).
 */
export const SpecDecodeMetrics = z.object({
  /**
   * `prometheus-counters`: the engine's `/metrics` counters differenced over the measured phase
   * (vLLM `vllm:spec_decode_*`, llama.cpp `llamacpp:spec_decode_*`); `prometheus-gauges`: SGLang's
   * `sglang:spec_accept_length` / `spec_accept_rate`, its last logging window at the cell's end;
   * `response-timings`: llama-server's per-reply `timings.draft_n` / `draft_n_accepted` summed over
   * the ok requests.
   */
  source: z.enum(['prometheus-counters', 'prometheus-gauges', 'response-timings']),
  /** Verification steps that checked a draft; null where the source does not count them. */
  drafts: z.int().nonnegative().nullable(),
  draftTokens: z.int().nonnegative().nullable(),
  acceptedTokens: z.int().nonnegative().nullable(),
  /** accepted ÷ draft tokens, 0…1; null when nothing was drafted or the source does not say. */
  acceptanceRate: z.number().nonnegative().nullable(),
  /** 1 + accepted tokens ÷ drafts; null when the source does not count drafts. */
  meanAcceptanceLength: z.number().nonnegative().nullable(),
  /** Per draft position (0-based), the share of drafts whose token there was accepted; null where not exported. */
  acceptanceRateByPosition: z.array(z.number().nonnegative()).nullable(),
  /** Why a figure is null, or how a gauge was read; null when every figure is there. */
  note: z.string().nullable(),
})
export type SpecDecodeMetrics = z.infer<typeof SpecDecodeMetrics>

export const CellMetrics = z.object({
  /**
   * `nearest-rank` whenever servegate computed the distributions; `linear-interpolation` only for
   * a summary-only import whose source (numpy) interpolated.
   */
  percentileMethod: z.enum([PERCENTILE_METHOD, 'linear-interpolation']),
  p99MinSamples: z.int(),
  /** Metric names whose p99 rests on fewer than `p99MinSamples` samples. */
  p99DescriptiveOnly: z.array(z.string()),
  distributions: z.object({
    ttftMs: Distribution,
    timeToFirstOutputMs: Distribution,
    e2eMs: Distribution,
    generationMs: Distribution,
    tpotMs: Distribution,
    decodeTokPerS: Distribution,
    effectivePrefillTokPerS: Distribution,
    promptTokens: Distribution,
    completionTokens: Distribution,
    /** All ITL gaps of all ok requests pooled. */
    itlMs: Distribution,
    queueDelayMs: Distribution,
    sendLagMs: Distribution,
  }),
  /**
   * Completion tokens of the ok requests; null when an imported summary never recorded the total
   * (an AIPerf aggregate without total_osl, a GuideLLM summary without its total_sum): unknown, never 0.
   */
  totalCompletionTokens: z.int().nonnegative().nullable(),
  /** Prompt tokens of the ok requests; null when an imported summary never recorded the total: unknown, never 0. */
  totalPromptTokens: z.int().nonnegative().nullable(),
  /**
   * Of `totalPromptTokens`, those the engine reported serving from its prefix cache. Null when no ok
   * request reported the figure (`cachedPromptTokensUnknownReason` says why): unknown, never 0. Once
   * one did, a request without it counts 0 (vLLM leaves out a 0).
   */
  totalCachedPromptTokens: z.int().nonnegative().nullable().default(null),
  /** totalCachedPromptTokens ÷ totalPromptTokens, a fraction; null when either is unknown or there were no prompt tokens. */
  cachedPromptShare: z.number().nonnegative().nullable().default(null),
  /** Why `totalCachedPromptTokens` is null; null when it is known. */
  cachedPromptTokensUnknownReason: z.string().nullable().default(null),
  completionTokenSources: z.object({ usage: z.int().nonnegative(), 'client-count': z.int().nonnegative() }),
  /** Total completion tokens of ok requests / cell wall clock. */
  outputThroughputTokPerS: z.number().nullable(),
  /** Ok requests / cell wall clock. */
  requestRateReqPerS: z.number().nullable(),
  /**
   * First measured send to last measured end; null when an imported source never recorded its
   * duration (an AIPerf or GuideLLM file without one, an llmperf summary without its rate):
   * unknown, never 0, and no figure is divided by it.
   */
  wallClockMs: z.number().nonnegative().nullable(),
  /** Canaries on: ok replies checked and passed (failed ones are CONTRACT_INVALID requests). */
  canaries: z.object({ samples: z.int().nonnegative(), passed: z.int().nonnegative() }).nullable().default(null),
  /** Output control on: completions with exactly max_tokens tokens among those observable. */
  outputControl: z
    .object({
      samples: z.int().nonnegative(),
      exact: z.int().nonnegative(),
      rate: z.number().nullable(),
      unobservable: z.int().nonnegative(),
    })
    .nullable()
    .default(null),
  /** Dataset workloads: correct replies among scored ones, with a Wilson 95% interval. */
  accuracy: z
    .object({
      samples: z.int().nonnegative(),
      correct: z.int().nonnegative(),
      rate: z.number().nullable(),
      wilson95Low: z.number().nullable(),
      wilson95High: z.number().nullable(),
    })
    .nullable()
    .default(null),
  /** Cells run with an SLO: the good requests, their share (Wilson 95%) and rate. */
  goodput: Goodput.nullable().default(null),
  /** Open-loop cells: the most requests in flight, and how many waited for the in-flight cap. */
  openLoop: OpenLoopStats.nullable().default(null),
  /** Conversations: per turn (1-based), its ok and failed requests and its TTFT and prompt tokens over the ok ones; null otherwise. */
  byTurn: z.array(TurnMetrics).nullable().default(null),
  /** Speculative decoding's draft acceptance where the engine reports it; null where it reports none (or does not draft). */
  specDecode: SpecDecodeMetrics.nullable().default(null),
})
export type CellMetrics = z.infer<typeof CellMetrics>

/** One client worker thread's own figures over a cell's measured phase. */
export const WorkerHealth = z.object({
  /** Its index among the cell's workers (0-based). */
  worker: z.int().nonnegative(),
  /** Measured requests it streamed. */
  requests: z.int().nonnegative(),
  /** Its thread's CPU time over the wall clock: 1.0 means its core fully busy. */
  cpuShare: z.number().nonnegative().nullable(),
  /** Its own event loop's delay, ms (p99 and max). */
  eventLoopDelayP99Ms: z.number().nonnegative().nullable(),
  eventLoopDelayMaxMs: z.number().nonnegative().nullable(),
  /** p99 of its hand-off lag: the cell's thread handing a request over to its bytes reaching the socket, ms. */
  handoffLagP99Ms: z.number().nonnegative().nullable(),
  /** True when this worker was over a limit; the record's `reasons` name it. */
  harnessLimited: z.boolean(),
})
export type WorkerHealth = z.infer<typeof WorkerHealth>

/** The pauses a cell's reading threads took to batch their reads while saturated. */
export const ReadBatching = z.object({
  /** Pauses taken over the measured phase. */
  pauses: z.int().nonnegative(),
  /** Their time summed, ms. */
  pausedMs: z.number().nonnegative(),
  /** The longest, ms: the most any chunk's stamp was delayed by a pause. */
  longestPauseMs: z.number().nonnegative(),
})
export type ReadBatching = z.infer<typeof ReadBatching>

/** One harness limit a cell went over: the cell option that set it, its value and the figure over it. */
export const HarnessLimitExceeded = z.object({
  option: z.enum(['cpuShareLimit', 'sendLagLimitMs', 'eventLoopDelayLimitMs']),
  /** The option's value for the cell: a share of one core, or ms. */
  limit: z.number().positive(),
  /** The figure that reached or passed it, in the same unit. */
  value: z.number().nonnegative(),
  /** Where it was measured: `cell` (the cell's thread, or the whole client without workers), or a worker's index. */
  thread: z.union([z.literal('cell'), z.int().nonnegative()]),
})
export type HarnessLimitExceeded = z.infer<typeof HarnessLimitExceeded>

export const HarnessHealth = z.object({
  /** CPU time of the client process during the cell, ms (user + system, every thread). */
  clientCpuMs: z.number().nonnegative().nullable(),
  /**
   * The busiest client thread's CPU time over the wall clock (1.0 means one core fully busy): the
   * process's own share when the client streams in the cell's thread.
   */
  clientCpuShare: z.number().nonnegative().nullable(),
  /** Worker threads the client streamed on; 0 or absent (imports, older records): the cell's own thread. */
  clientWorkers: z.int().nonnegative().optional(),
  /** Each worker thread's figures, in worker order; absent or empty without workers. */
  workers: z.array(WorkerHealth).optional(),
  /** Event-loop delay while the cell ran, ms (p99 and max of a histogram). */
  eventLoopDelayP99Ms: z.number().nonnegative().nullable(),
  eventLoopDelayMaxMs: z.number().nonnegative().nullable(),
  /** p99 of the requests' send lag (a slot freeing, or the scheduled time, to the send), ms, over every measured request. */
  sendLagP99Ms: z.number().nonnegative().nullable(),
  /**
   * A closed loop's opening round, its C sends due at the same instant: the send lag of the last
   * of them, ms (the time the round took to go out). The harness verdict judges the send lag p99
   * of the sends after it. Null for an open loop; absent in imports and records written before.
   */
  openingSendLagMaxMs: z.number().nonnegative().nullable().optional(),
  /**
   * The share of the machine's CPU time (every CPU) that the hypervisor gave to other guests while
   * the cell measured: Linux `/proc/stat` steal over all ticks, 0…1. Null where unreadable; absent
   * in imports and records written before it was kept. Not the client's fault, so it does not
   * mark the cell harness-limited, but a stolen slice delays any chunk due in it.
   */
  hostStealShare: z.number().min(0).max(1).nullable().optional(),
  /**
   * Batched reads: the pauses the client's reading threads took, while busy, before polling
   * again, so that each poll found many chunks (docs/metrics.md, "Batched reads"). A chunk that
   * arrived during a pause was stamped when it ended, at most `longestPauseMs` late. Every thread's,
   * summed (the longest pause, the longest of any). Absent in imports and records written before it was kept.
   */
  readBatching: ReadBatching.optional(),
  /** True when the client, not the engine, was the bottleneck; see `reasons`. */
  harnessLimited: z.boolean(),
  reasons: z.array(z.string()),
  /** The limits behind `reasons`, one per reason; absent in imports and records written before it was kept. */
  exceeded: z.array(HarnessLimitExceeded).optional(),
})
export type HarnessHealth = z.infer<typeof HarnessHealth>

/** One kind of network probe's round trips over one phase of a cell. */
export const NetworkRttSeries = z.object({
  /** Probes that answered. */
  samples: z.int().nonnegative(),
  /** Probes that did not (refused, reset, timed out, a reply other than 2xx): in no figure. */
  failed: z.int().nonnegative(),
  /** Each answered probe's round trip, µs, in the order taken. */
  rttUs: z.array(z.int().nonnegative()),
  /** Nearest-rank percentiles of `rttUs`, ms; null without samples. */
  p50Ms: z.number().nonnegative().nullable(),
  p90Ms: z.number().nonnegative().nullable(),
  p99Ms: z.number().nonnegative().nullable(),
})
export type NetworkRttSeries = z.infer<typeof NetworkRttSeries>

/** A probe kind's round trips before the measured phase (back to back) and during it (one per interval). */
const NetworkPhases = z.object({ before: NetworkRttSeries, during: NetworkRttSeries })

/** A latency's percentiles less the network round trip: raw − `rttMs`, each; null where the raw figure is. */
export const NetworkAdjustedFigures = z.object({
  mean: z.number().nullable(),
  p50: z.number().nullable(),
  p90: z.number().nullable(),
  p95: z.number().nullable(),
  p99: z.number().nullable(),
})
export type NetworkAdjustedFigures = z.infer<typeof NetworkAdjustedFigures>

/**
 * The time to a remote target, measured apart from the requests (issue 37): before the measured
 * phase 10 probes of each kind, back to back; during it one of each every `intervalMs`, off
 * the measured connections.
 */
export const NetworkProbes = z.object({
  /** The host and port probed, as `manifest.target.host`. */
  host: z.string(),
  /** ms between two probes of a kind during the measured phase. */
  intervalMs: z.int().positive(),
  /**
   * TCP handshake, as AIPerf's `--network-latency-automatic` times it: `connect()` to the socket's
   * connect on a fresh connection, closed at once; plain TCP to the port even for https. A gateway
   * or proxy that terminates TCP answers it itself, so it can hide the rest of the path.
   */
  handshake: NetworkPhases,
  /**
   * HTTP: a `GET` of `endpoint` on one keep-alive connection of its own (TLS for https, set up before
   * the first timed probe), timed from the request written to its response head read: the whole
   * path to the server that answers, gateway included.
   */
  http: NetworkPhases.extend({
    /** The first of `/health`, `/v1/models` that answered 2xx before the cell; null when neither did. */
    endpoint: z.enum(['/health', '/v1/models']).nullable(),
    /** Why there are no HTTP probes (`endpoint` null); null otherwise. */
    reason: z.string().nullable(),
  }),
  /**
   * TTFT and e2e less the network's round trip, each shown beside its raw figure; raw figures stay
   * what gates judge. Estimator: the p50 of the HTTP probes before the measured phase (an idle
   * server, so the server's own time under load is not subtracted), or of the handshakes where no
   * HTTP endpoint answered. Null when no probe answered.
   */
  adjusted: z
    .object({
      /** Which p50 was subtracted. */
      estimator: z.enum(['http-p50-before', 'handshake-p50-before']),
      /** The round trip subtracted, ms. */
      rttMs: z.number().nonnegative(),
      /** The cell's TTFT (`metrics.distributions.ttftMs`) less `rttMs`, ms. */
      ttftMs: NetworkAdjustedFigures,
      /** The cell's e2e (`metrics.distributions.e2eMs`) less `rttMs`, ms. */
      e2eMs: NetworkAdjustedFigures,
    })
    .nullable(),
})
export type NetworkProbes = z.infer<typeof NetworkProbes>

const ImportSource = z.object({
  /** The source format, e.g. `anvil-serving.benchmark/v1`, `vllm.save-result`, `sglang.bench-serving`. */
  schema: z.string(),
  runId: z.string().nullable(),
  engine: z.string().nullable(),
  gpu: z.string().nullable(),
  /**
   * False for a summary-only import: `requests` is empty and the distributions hold only what
   * the source summarized (others null); nothing per-request is invented.
   */
  perRequest: z.boolean(),
})

/** A servegate run record: everything one cell measured. */
export const RunRecord = z.object({
  schema: z.literal(RUN_SCHEMA_ID),
  runId: z.string(),
  servegateVersion: z.string(),
  /** Null when an imported record has no date. */
  startedAt: z.iso.datetime().nullable(),
  finishedAt: z.iso.datetime().nullable(),
  /** Base URL with credentials and query removed; null when imported without one. */
  target: z.object({ baseUrl: z.string().nullable(), model: z.string() }),
  plan: RunPlan,
  completed: z.int().nonnegative(),
  /**
   * Requests that failed; null when an imported source never recorded the count (a summary-only
   * SGLang line, a vLLM result with neither `failed` nor `num_prompts`): unknown, never 0.
   */
  failed: z.int().nonnegative().nullable(),
  /** Failed requests counted by error code. */
  failures: z.record(z.string(), z.int().positive()),
  /**
   * Requests the cell's `cancel` plan aborted while they streamed: recorded with status
   * `cancelled`, neither completed nor failed, in no distribution. 0 in records written before
   * servegate cancelled requests.
   */
  cancelled: z.int().nonnegative().default(0),
  /**
   * Planned requests never sent because the cell was cut short (Ctrl-C, a signal, the engine
   * exiting): counted here, not recorded one by one. `completed + failed + cancelled + unsent` is
   * the requests the cell was due to send.
   */
  unsent: z.int().nonnegative().default(0),
  requests: z.array(RequestRecord),
  metrics: CellMetrics,
  harness: HarnessHealth,
  methodology: z.record(z.string(), z.string()),
  /** What was measured (engine, model, GPUs, host, harness); null when servegate launched nothing and was told nothing. */
  manifest: Manifest.nullable().default(null),
  /** GPU, engine-occupancy, host-memory and timing-agreement observations; null when none were taken. */
  telemetry: CellTelemetry.nullable().default(null),
  /**
   * Set when the cell as a whole failed (the engine did not start, or exited mid-cell): the
   * requests measured before it stay in the record, and the cell is not accepted.
   */
  cellFailure: ErrorInfo.nullable().default(null),
  /**
   * The teardown of the engine launched for this record alone (`servegate run --engine`, repeated
   * cells); absent when nothing was launched for it (an external endpoint, an in-process engine,
   * an engine shared by a file's cells, whose teardown comes after its records and goes to stderr).
   */
  teardown: EngineTeardown.optional(),
  /** A cell that cancelled requests: whether the engine went back to idle after it; null otherwise. */
  drain: EngineDrain.nullable().default(null),
  /**
   * Network round trips to a remote target (`--remote`, `remote: true`), and TTFT and e2e adjusted
   * for them; absent for every other target (loopback, as before: nothing is probed).
   */
  network: NetworkProbes.optional(),
  /**
   * A cell measured by several client processes (`servegate run --shards N`): each shard's clock
   * offset and client-health figures, in shard order; absent for a cell measured by one process.
   */
  shards: z.array(ShardFigures).optional(),
  /** Set when the record was imported from another harness's format. */
  importedFrom: ImportSource.nullable(),
})
export type RunRecord = z.infer<typeof RunRecord>

/** The methodology key servegate 0.1.0 wrote beside `failed: 0` to say an import's failed count was unknown. */
const FAILED_COUNT_KEY = 'failedCount'

/** The methodology key that names the figures an import's source never recorded (each null in the record). */
export const UNRECORDED_KEY = 'unrecorded'

type JsonObject = Record<string, unknown>

function isJsonObject(v: unknown): v is JsonObject {
  return v !== null && typeof v === 'object' && !Array.isArray(v)
}

/** 0.1.0's unknown failed count: `failed: 0` with `methodology.failedCount` starting "unknown". */
function upgradeFailedCount(record: JsonObject, methodology: JsonObject): JsonObject {
  const note = methodology[FAILED_COUNT_KEY]
  if (record.failed !== 0 || typeof note !== 'string' || !note.startsWith('unknown')) return record
  const [why] = note.split('; failed is recorded as 0')
  return { ...record, failed: null, methodology: { ...methodology, [FAILED_COUNT_KEY]: `${why}; failed is null (a 0.1.0 record wrote 0)` } }
}

/** A token total and the distribution of the same tokens, which a summary-only import filled from it or from the source. */
const TOKEN_TOTALS = [
  ['totalPromptTokens', 'promptTokens'],
  ['totalCompletionTokens', 'completionTokens'],
] as const

/**
 * 0.1.0's unknown figures of an import: it wrote 0 for a token total or a duration its source
 * never recorded, and said so nowhere but in the record's own figures. Only where they rule out a
 * real 0 does it read as null: a wall clock of 0 ms over completed requests; a summary-only
 * token total of 0 beside a distribution of those tokens without a mean (0.1.0 filled that mean
 * from the total, so a known 0 gave a mean of 0) or with a positive one.
 */
function upgradeUnrecordedFigures(record: JsonObject, methodology: JsonObject): JsonObject {
  const { importedFrom, metrics } = record
  if (!isJsonObject(importedFrom) || !isJsonObject(metrics) || typeof record.completed !== 'number' || record.completed <= 0) return record
  const distributions = isJsonObject(metrics.distributions) ? metrics.distributions : {}
  const unknown: string[] = []
  if (importedFrom.perRequest === false) {
    for (const [total, tokens] of TOKEN_TOTALS) {
      const d = distributions[tokens]
      const mean = isJsonObject(d) ? d.mean : undefined
      if (metrics[total] === 0 && (mean === null || (typeof mean === 'number' && mean > 0))) unknown.push(total)
    }
  }
  if (metrics.wallClockMs === 0) unknown.push('wallClockMs')
  if (unknown.length === 0) return record
  return {
    ...record,
    metrics: { ...metrics, ...Object.fromEntries(unknown.map((name) => [name, null])) },
    methodology: {
      ...methodology,
      [UNRECORDED_KEY]: `not recorded by the source, so null: ${unknown.join(', ')} (a 0.1.0 record wrote 0)`,
    },
  }
}

/**
 * A record as any servegate version wrote it, read into the current shape. 0.1.0 recorded what an
 * import's source never recorded as 0: a failed count (flagged in `methodology.failedCount`), a
 * token total or a duration (flagged only by the record's own figures). Each reads as null, with a
 * methodology note saying so.
 */
function upgradeRunRecord(value: unknown): unknown {
  if (!isJsonObject(value) || !isJsonObject(value.methodology)) return value
  const failed = upgradeFailedCount(value, value.methodology)
  return upgradeUnrecordedFigures(failed, failed.methodology as JsonObject)
}

/** Parses a stored run record of any servegate version (see {@link upgradeRunRecord}) into a {@link RunRecord}. */
export const StoredRunRecord = z.preprocess(upgradeRunRecord, RunRecord)
