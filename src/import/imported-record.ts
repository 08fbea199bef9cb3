/**
 * The assemble step of every import: the facts an importer read become a servegate.run/v1
 * record through the one record assembler the cell runner uses too.
 */
import { computeCellMetrics, countFailures } from '../metrics/cell-metrics.ts'
import { assembleRunRecord, nothingSent } from '../metrics/run-assembly.ts'
import type { Api, CellMetrics, RunPlan, RequestRecord, RunRecord, WorkloadPlan } from '../schema/run.ts'
import { type FailedCount, type ImportFacts, methodologyOf, unrecordedNote } from './import-methodology.ts'

/** What an import measured: every request (servegate recomputes the metrics), or only the source's summary. */
type ImportedMeasure =
  { perRequest: true; records: RequestRecord[] } | { perRequest: false; summary: CellMetrics; completed: number; failed: FailedCount }

/** The plan of an imported run as far as the source recorded it. */
interface ImportedPlan {
  concurrency: number
  requests: number
  /** Null when the source does not record the planned output length. */
  maxTokens: number | null
  /** Warm-up requests the source recorded; null (the default) when it does not say. */
  warmupRequests?: number | null | undefined
  promptTokens: number
  promptTokensEstimator: string
  /** Facts of the workload the source did record (seed, prefix cache, sampling…); the rest stays unknown. */
  workload?: Partial<WorkloadPlan> | undefined
}

/** Everything an importer knows about a run, in servegate units, before assembly. */
export interface ImportedRun {
  /** `importedFrom.schema`, e.g. `vllm.save-result`. */
  format: string
  runId: string
  /** The source's own id of the run, when it records one. */
  sourceRunId?: string | null | undefined
  engine: string | null
  gpu?: string | null | undefined
  model: string
  api: Api | null
  /** Null when the source records no date. */
  startedAt: string | null
  finishedAt: string | null
  /** Null when the source records no duration. */
  wallClockMs: number | null
  plan: ImportedPlan
  measure: ImportedMeasure
  /** What the methodology is written from. */
  facts: ImportFacts
  /** Planned requests the source says were never sent. @default 0 */
  unsent?: number | undefined
}

/** The workload of an imported record: what the source said, every unknown fact null. */
function importedWorkload(promptTokens: number, seed: number | null, promptTokensEstimator: string): WorkloadPlan {
  return {
    kind: 'imported',
    promptTokens,
    seed,
    prefixCache: { mode: 'unknown', tokens: null },
    canaries: false,
    outputControl: { mode: 'none', knob: null },
    sampling: null,
    dataset: null,
    calibration: null,
    promptTokensEstimator,
    requestStreamSha256: null,
    wireStreamSha256: null,
    wireMatchesPlan: null,
    requestsPerSlotFloor: null,
    floorMet: null,
    conversation: null,
    lengths: null,
    prefixGroups: null,
  }
}

function importedPlan(run: ImportedRun): RunPlan {
  const p = run.plan
  return {
    api: run.api,
    model: run.model,
    concurrency: p.concurrency,
    requests: p.requests,
    warmupRequests: p.warmupRequests ?? null,
    maxTokens: p.maxTokens,
    requestTimeoutMs: null,
    workload: { ...importedWorkload(p.promptTokens, null, p.promptTokensEstimator), ...p.workload },
    sequential: null,
    usageCheck: null,
    arrival: null,
    cancel: null,
    prefixCacheReset: null,
  }
}

/**
 * Assembles the servegate.run/v1 record of an import: a per-request import gets its counts and
 * metrics recomputed by servegate's rules, a summary-only one keeps the source's.
 */
export function assembleImport(run: ImportedRun): RunRecord {
  const m = run.measure
  const records = m.perRequest ? m.records : []
  const completed = m.perRequest ? records.filter((r) => r.status === 'ok').length : m.completed
  const metrics = m.perRequest ? computeCellMetrics(records, run.wallClockMs) : m.summary
  return assembleRunRecord({
    runId: run.runId,
    startedAt: run.startedAt,
    finishedAt: run.finishedAt,
    target: { baseUrl: null, model: run.model },
    plan: importedPlan(run),
    completed,
    failed: m.perRequest ? records.length - completed : m.failed.count,
    failures: countFailures(records),
    unsent: run.unsent ?? 0,
    requests: records,
    metrics,
    harness: nothingSent(),
    methodology: { ...methodologyOf(run.facts, m), ...unrecordedNote(run.facts.tool, metrics) },
    manifest: null,
    cellFailure: null,
    importedFrom: {
      schema: run.format,
      runId: run.sourceRunId ?? null,
      engine: run.engine,
      gpu: run.gpu ?? null,
      perRequest: m.perRequest,
    },
  })
}

/**
 * ISO start and end of a run from its end time and duration; both null when the file records
 * no time (the duration stays in the metrics' wall clock), the start null when it records no duration.
 */
export function runSpan(finished: Date | null, wallClockMs: number | null): { startedAt: string | null; finishedAt: string | null } {
  if (finished === null) return { startedAt: null, finishedAt: null }
  const startedAt = wallClockMs === null ? null : new Date(finished.getTime() - wallClockMs).toISOString()
  return { startedAt, finishedAt: finished.toISOString() }
}

/** A positive integer for a plan field, or the fallback when the source gave nothing usable. */
export function positiveInt(v: number | null | undefined, fallback: number): number {
  return typeof v === 'number' && Number.isFinite(v) && v >= 1 ? Math.round(v) : fallback
}
