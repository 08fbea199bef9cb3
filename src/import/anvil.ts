import { z } from 'zod'
import { ERROR_CODES, type ErrorCode, sanitizeMessage } from '../errors.ts'
import {
  type Calibration,
  type CanaryCheck,
  CompletionTokenSource,
  type RequestRecord,
  type RunRecord,
  type SamplingEntry,
  type WorkloadPlan,
} from '../schema/run.ts'
import { NO_REQUEST_CHECKS } from './common.ts'
import { assembleImport } from './imported-record.ts'

/** Schema id of the peer harness format servegate imports. */
export const ANVIL_SCHEMA_ID = 'anvil-serving.benchmark/v1'

const num = z.number().nullable().optional()

/** The fields of an `anvil-serving.benchmark/v1` request timing that servegate reads. */
const AnvilTiming = z.looseObject({
  request_index: z.int().nonnegative(),
  ttft_ms: num,
  time_to_first_output_ms: num,
  e2e_ms: num,
  generation_ms: num,
  tpot_ms: num,
  mean_time_per_output_token_ms: num,
  mean_inter_token_latency_ms: num,
  decode_tok_s: num,
  effective_prefill_tok_s: num,
  prompt_tokens: z.int().nullable().optional(),
  output_tokens: z.int().nullable().optional(),
  output_token_source: CompletionTokenSource.nullable().optional(),
  reasoning_chunks: z.int().nullable().optional(),
  content_chunks: z.int().nullable().optional(),
  request_canary: z
    .looseObject({
      passed: z.boolean(),
      marker: z.string().optional(),
      marker_at_start: z.boolean().optional(),
      foreign_marker_count: z.int().nonnegative().optional(),
      capture_complete: z.boolean().optional(),
    })
    .nullable()
    .optional(),
})

const SamplingValue = z.union([z.string(), z.number(), z.boolean()]).nullable().optional()

/** anvil's record of one sampling parameter: asked for, sent or not, in effect on the request. */
const AnvilSampling = z.looseObject({
  requested: SamplingValue,
  sent: z.boolean().optional(),
  effective_request: SamplingValue,
})

const AnvilFailure = z.looseObject({
  request_index: z.int().nonnegative().optional(),
  code: z.string().optional(),
  error_type: z.string().optional(),
  message: z.string().optional(),
  error: z.string().optional(),
  status: z.int().optional(),
})

/** An `anvil-serving.benchmark/v1` run record (the fields servegate reads; others are kept out). */
export const AnvilRun = z.looseObject({
  schema: z.literal(ANVIL_SCHEMA_ID),
  run_id: z.string().nullable().optional(),
  engine: z.string().nullable().optional(),
  gpu: z.string().nullable().optional(),
  model: z.string(),
  concurrency: z.int().positive(),
  requests: z.int().positive(),
  max_tokens: z.int().positive(),
  context_tokens: z.int().positive(),
  context_seed: z.int(),
  started_at: z.string(),
  finished_at: z.string(),
  wall_clock_ms: z.number().nonnegative(),
  request_canaries: z.boolean().nullable().optional(),
  controlled_output_policy: z.string().nullable().optional(),
  response_words: z.int().nonnegative().nullable().optional(),
  prompt_cache_mode: z.string().nullable().optional(),
  shared_prefix_tokens: z.int().nonnegative().nullable().optional(),
  sampling: z.record(z.string(), AnvilSampling.nullable()).nullable().optional(),
  warmup_requests: z.int().nonnegative().nullable().optional(),
  request_timings: z.array(AnvilTiming),
  failures: z.array(AnvilFailure).default([]),
})
export type AnvilRun = z.infer<typeof AnvilRun>

const nn = (v: number | null | undefined): number | null => (v === undefined || v === null ? null : v)

/** An ISO time from anvil's label; null when it is not a date (unknown, never the epoch). */
function toIso(label: string): string | null {
  const ms = Date.parse(label)
  return Number.isNaN(ms) ? null : new Date(ms).toISOString()
}

/**
 * anvil's TPOT: `tpot_ms`, else the same figure under its older names
 * (`mean_time_per_output_token_ms`, then the legacy `mean_inter_token_latency_ms`, which anvil
 * documents as generation time ÷ completion tokens after the first: a TPOT, not a raw ITL).
 */
function anvilTpot(t: z.infer<typeof AnvilTiming>): number | null {
  return nn(t.tpot_ms) ?? nn(t.mean_time_per_output_token_ms) ?? nn(t.mean_inter_token_latency_ms)
}

function canaryCheck(c: z.infer<typeof AnvilTiming>['request_canary']): CanaryCheck | null {
  if (c === null || c === undefined || c.marker === undefined) return null
  const foreign = c.foreign_marker_count ?? 0
  return {
    marker: c.marker,
    atStart: c.marker_at_start ?? c.passed,
    // anvil counts other requests' markers without naming them.
    foreignMarkers: Array.from({ length: foreign }, () => 'ANVIL_REQ (unnamed in the source)'),
    captureComplete: c.capture_complete ?? true,
    passed: c.passed,
    reason: c.passed ? null : 'request canary failed in the source harness',
  }
}

function samplingOf(input: AnvilRun): Record<string, SamplingEntry> | null {
  if (input.sampling === null || input.sampling === undefined) return null
  const out: Record<string, SamplingEntry> = {}
  for (const [name, entry] of Object.entries(input.sampling)) {
    if (entry === null) continue
    const sent = entry.sent ?? false
    const requested = entry.requested
    out[name] = {
      requested: typeof requested === 'boolean' ? String(requested) : (requested ?? null),
      sent,
      field: sent ? name : null,
      effective: entry.effective_request ?? null,
      note: sent ? null : "not sent by anvil: the engine's default applied (unknown here)",
    }
  }
  return out
}

function prefixCacheOf(input: AnvilRun): WorkloadPlan['prefixCache'] {
  const shared = input.shared_prefix_tokens ?? null
  if (input.prompt_cache_mode === 'unique') return { mode: 'unique', tokens: null }
  if (input.prompt_cache_mode === 'shared') return { mode: 'shared', tokens: shared }
  return { mode: 'unknown', tokens: shared }
}

function outputControlOf(input: AnvilRun): WorkloadPlan['outputControl'] {
  const policy = input.controlled_output_policy
  const words = input.response_words ?? 0
  if ((policy === 'observe' || policy === 'strict') && words > 0) return { mode: policy, knob: `response_words ${words}` }
  return { mode: 'none', knob: null }
}

/** The actual prompt sizes against the planned context: anvil plans a size, the engine counts its own. */
function calibrationOf(input: AnvilRun, records: readonly RequestRecord[]): Calibration {
  const target = input.context_tokens
  const tolerance = Math.max(Math.ceil(target * 0.005), 8)
  const sizes = records.flatMap((r) => (r.promptTokens === null ? [] : [r.promptTokens]))
  const outside = sizes.filter((n) => Math.abs(n - target) > tolerance).length
  const range = sizes.length === 0 ? null : [Math.min(...sizes), Math.max(...sizes)]
  return {
    method: 'none',
    tokenizer: null,
    targetTokens: target,
    toleranceTokens: tolerance,
    outsideTolerance: outside,
    warning:
      range === null
        ? `anvil planned context_tokens ${target}; the actual prompt sizes are not recorded (unknown)`
        : outside === 0
          ? null
          : `anvil planned context_tokens ${target}, but the engine counted ${range[0]}–${range[1]} prompt tokens ` +
            `(usage.prompt_tokens): ${outside} of ${sizes.length} requests outside ±${tolerance} tokens; ` +
            'promptTokens and effective prefill use the actual counts',
    sharedPrefixTokens: input.prompt_cache_mode === 'shared' ? (input.shared_prefix_tokens ?? null) : null,
  }
}

function timingRecord(t: z.infer<typeof AnvilTiming>): RequestRecord {
  const common = {
    index: t.request_index,
    queueDelayMs: null,
    sendLagMs: null,
    startOffsetMs: null,
    ttftMs: nn(t.ttft_ms),
    timeToFirstOutputMs: nn(t.time_to_first_output_ms),
    e2eMs: nn(t.e2e_ms),
    generationMs: nn(t.generation_ms),
    tpotMs: anvilTpot(t),
    decodeTokPerS: nn(t.decode_tok_s),
    effectivePrefillTokPerS: nn(t.effective_prefill_tok_s),
    promptTokens: nn(t.prompt_tokens),
    completionTokens: nn(t.output_tokens),
    completionTokenSource: t.output_token_source ?? null,
    reasoningChunks: nn(t.reasoning_chunks),
    contentChunks: nn(t.content_chunks),
    itlMs: null,
    finishReason: null,
    ...NO_REQUEST_CHECKS,
    canary: canaryCheck(t.request_canary),
  }
  if (t.request_canary?.passed === false) {
    const error = {
      code: 'CONTRACT_INVALID' as const,
      message: 'request canary failed in the source harness',
      httpStatus: null,
      retryAfterS: null,
    }
    return { status: 'failed', error, ...common }
  }
  return { status: 'ok', ...common }
}

function failureRecord(f: z.infer<typeof AnvilFailure>, fallbackIndex: number): RequestRecord {
  const raw = f.code ?? f.error_type ?? 'INTERNAL'
  const code: ErrorCode = (ERROR_CODES as readonly string[]).includes(raw) ? (raw as ErrorCode) : 'INTERNAL'
  const message = sanitizeMessage(`${raw}: ${f.message ?? f.error ?? 'no message in the source record'}`)
  return {
    status: 'failed',
    error: { code, message, httpStatus: f.status ?? null, retryAfterS: null },
    index: f.request_index ?? fallbackIndex,
    queueDelayMs: null,
    sendLagMs: null,
    startOffsetMs: null,
    ttftMs: null,
    timeToFirstOutputMs: null,
    e2eMs: null,
    generationMs: null,
    tpotMs: null,
    decodeTokPerS: null,
    effectivePrefillTokPerS: null,
    promptTokens: null,
    completionTokens: null,
    completionTokenSource: null,
    reasoningChunks: null,
    contentChunks: null,
    itlMs: null,
    finishReason: null,
    ...NO_REQUEST_CHECKS,
  }
}

/** anvil's own definitions and the facts of this record: its TPOT keys, warm-up, canaries, output control, prefix cache. */
function anvilDefinitions(input: AnvilRun): Record<string, string> {
  const legacyTpot = input.request_timings.filter((t) => nn(t.tpot_ms) === null && anvilTpot(t) !== null).length
  return {
    tpot:
      legacyTpot === 0
        ? "anvil's tpot_ms: client-observed generation time ÷ completion tokens after the first"
        : `anvil's tpot_ms; ${legacyTpot} request(s) record only the older key (mean_time_per_output_token_ms or ` +
          'mean_inter_token_latency_ms, which anvil documents as the same TPOT proxy, not a raw ITL), taken as their TPOT',
    warmup:
      input.warmup_requests === undefined || input.warmup_requests === null
        ? 'anvil does not record its warm-up: plan.warmupRequests is null (unknown)'
        : `anvil's warmup_requests (${input.warmup_requests})`,
    canaries:
      input.request_canaries === true
        ? "anvil's request canaries: each reply must start with its own ANVIL_REQ marker and hold no other; " +
          'a failed canary is a CONTRACT_INVALID request'
        : 'anvil sent no request canaries',
    outputControl:
      `anvil's controlled_output_policy ${JSON.stringify(input.controlled_output_policy ?? null)} with response_words ${input.response_words ?? 'not recorded'}: ` +
      ((input.response_words ?? 0) > 0
        ? 'a word-count instruction in the prompt (anvil observe records adherence, strict rejects misses), not an engine knob'
        : 'no length target, so no output control was in effect (mode none)'),
    prefixCache: `anvil's prompt_cache_mode ${JSON.stringify(input.prompt_cache_mode ?? null)}${input.prompt_cache_mode === 'unique' || input.prompt_cache_mode === 'shared' ? '' : ' (unknown to servegate)'}`,
    promptTokens:
      "plan.workload.promptTokens is anvil's planned context_tokens; each request's promptTokens is its actual usage.prompt_tokens, " +
      'and calibration compares the two (method none: servegate did not size these prompts)',
  }
}

/**
 * Imports an `anvil-serving.benchmark/v1` record as a servegate run record. Metrics are
 * recomputed from its request timings by servegate's own rules, not copied.
 */
export function importAnvilRun(input: AnvilRun): RunRecord {
  const records = [
    ...input.request_timings.map(timingRecord),
    ...input.failures.map((f, i) => failureRecord(f, input.request_timings.length + i)),
  ].sort((a, b) => a.index - b.index)
  return assembleImport({
    format: ANVIL_SCHEMA_ID,
    runId: input.run_id ?? 'imported',
    sourceRunId: input.run_id ?? null,
    engine: input.engine ?? null,
    gpu: input.gpu ?? null,
    model: input.model,
    api: null,
    startedAt: toIso(input.started_at),
    finishedAt: toIso(input.finished_at),
    wallClockMs: input.wall_clock_ms,
    plan: {
      concurrency: input.concurrency,
      requests: input.requests,
      maxTokens: input.max_tokens,
      warmupRequests: input.warmup_requests ?? null,
      promptTokens: input.context_tokens,
      promptTokensEstimator: `as planned by ${ANVIL_SCHEMA_ID} (context_tokens)`,
      workload: {
        seed: input.context_seed,
        prefixCache: prefixCacheOf(input),
        canaries: input.request_canaries === true,
        outputControl: outputControlOf(input),
        sampling: samplingOf(input),
        calibration: calibrationOf(input, records),
      },
    },
    measure: { perRequest: true, records },
    facts: {
      tool: 'anvil',
      read: ANVIL_SCHEMA_ID,
      conversion: 'per-request values as recorded there',
      definitions: anvilDefinitions(input),
    },
  })
}
