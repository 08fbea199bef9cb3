import { z } from 'zod'
import { ERROR_CODES, type ErrorCode, sanitizeMessage } from '../errors.ts'
import { importedWorkload, NO_REQUEST_CHECKS } from './common.ts'
import { computeCellMetrics, countFailures } from '../metrics/cell-metrics.ts'
import { METHODOLOGY } from '../metrics/methodology.ts'
import { CompletionTokenSource, RUN_SCHEMA_ID, type RequestRecord, type RunRecord } from '../schema/run.ts'
import { SERVEGATE_VERSION } from '../version.ts'

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
  decode_tok_s: num,
  effective_prefill_tok_s: num,
  prompt_tokens: z.int().nullable().optional(),
  output_tokens: z.int().nullable().optional(),
  output_token_source: CompletionTokenSource.nullable().optional(),
  reasoning_chunks: z.int().nullable().optional(),
  content_chunks: z.int().nullable().optional(),
  request_canary: z.looseObject({ passed: z.boolean() }).nullable().optional(),
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
  request_timings: z.array(AnvilTiming),
  failures: z.array(AnvilFailure).default([]),
})
export type AnvilRun = z.infer<typeof AnvilRun>

const nn = (v: number | null | undefined): number | null => (v === undefined || v === null ? null : v)

function toIso(label: string): string {
  const ms = Date.parse(label)
  return Number.isNaN(ms) ? new Date(0).toISOString() : new Date(ms).toISOString()
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
    tpotMs: nn(t.tpot_ms),
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

/**
 * Imports an `anvil-serving.benchmark/v1` record as a servegate run record. Metrics are
 * recomputed from its request timings by servegate's own rules, not copied.
 */
export function importAnvilRun(input: AnvilRun): RunRecord {
  const records = [
    ...input.request_timings.map(timingRecord),
    ...input.failures.map((f, i) => failureRecord(f, input.request_timings.length + i)),
  ].sort((a, b) => a.index - b.index)
  const completed = records.filter((r) => r.status === 'ok').length
  return {
    schema: RUN_SCHEMA_ID,
    runId: input.run_id ?? 'imported',
    servegateVersion: SERVEGATE_VERSION,
    startedAt: toIso(input.started_at),
    finishedAt: toIso(input.finished_at),
    target: { baseUrl: null, model: input.model },
    plan: {
      api: null,
      model: input.model,
      concurrency: input.concurrency,
      requests: input.requests,
      warmupRequests: 0,
      maxTokens: input.max_tokens,
      requestTimeoutMs: null,
      workload: importedWorkload(input.context_tokens, input.context_seed, `as planned by ${ANVIL_SCHEMA_ID} (context_tokens)`),
      sequential: null,
      arrival: null,
    },
    completed,
    failed: records.length - completed,
    failures: countFailures(records),
    unsent: 0,
    requests: records,
    metrics: computeCellMetrics(records, input.wall_clock_ms),
    harness: {
      clientCpuMs: null,
      clientCpuShare: null,
      eventLoopDelayP99Ms: null,
      eventLoopDelayMaxMs: null,
      sendLagP99Ms: null,
      harnessLimited: false,
      reasons: [],
    },
    methodology: {
      ...METHODOLOGY,
      import: `imported from ${ANVIL_SCHEMA_ID}; per-request values as recorded there, distributions recomputed by servegate`,
    },
    manifest: null,
    telemetry: null,
    cellFailure: null,
    importedFrom: {
      schema: ANVIL_SCHEMA_ID,
      runId: input.run_id ?? null,
      engine: input.engine ?? null,
      gpu: input.gpu ?? null,
      perRequest: true,
    },
  }
}
