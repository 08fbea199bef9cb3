/**
 * The one place a run record is put together, for the cell runner and for every importer alike:
 * what every record carries (schema id, version, the methodology) is added here, and every string
 * in it (messages, kept replies) is scrubbed of the registered secrets. It sits with the
 * methodology it stamps, below both: record/ reads other tools' files through the importers.
 */
import { METHODOLOGY } from './methodology.ts'
import { type HarnessHealth, RUN_SCHEMA_ID, type RunRecord } from '../schema/run.ts'
import { scrubDeep } from '../secrets.ts'
import { SERVEGATE_VERSION } from '../version.ts'

/** A run record's own parts: all of it but what every record carries alike. */
export type RunRecordParts = Omit<
  RunRecord,
  'schema' | 'servegateVersion' | 'methodology' | 'telemetry' | 'teardown' | 'cancelled' | 'drain'
> & {
  /** Strings that add to or replace servegate's own methodology (an importer's definitions). @default {} */
  methodology?: Readonly<Record<string, string>> | undefined
  /** Requests cancelled on purpose (servegate's `cancel`). @default 0 */
  cancelled?: number
  /** Whether the engine went back to idle after a cell that cancelled requests. @default null */
  drain?: RunRecord['drain']
}

/** Assembles a servegate.run/v1 record from its parts; see the module comment. */
export function assembleRunRecord(parts: RunRecordParts): RunRecord {
  return scrubDeep({
    schema: RUN_SCHEMA_ID,
    runId: parts.runId,
    servegateVersion: SERVEGATE_VERSION,
    startedAt: parts.startedAt,
    finishedAt: parts.finishedAt,
    target: parts.target,
    plan: parts.plan,
    completed: parts.completed,
    failed: parts.failed,
    failures: parts.failures,
    cancelled: parts.cancelled ?? 0,
    unsent: parts.unsent,
    requests: parts.requests,
    metrics: parts.metrics,
    harness: parts.harness,
    methodology: { ...METHODOLOGY, ...parts.methodology },
    manifest: parts.manifest,
    telemetry: null,
    cellFailure: parts.cellFailure,
    drain: parts.drain ?? null,
    importedFrom: parts.importedFrom,
  })
}

/** The harness figures of a record whose requests servegate's client did not send: a cell that sent nothing, an import. */
export function nothingSent(): HarnessHealth {
  return {
    clientCpuMs: null,
    clientCpuShare: null,
    eventLoopDelayP99Ms: null,
    eventLoopDelayMaxMs: null,
    sendLagP99Ms: null,
    harnessLimited: false,
    reasons: [],
  }
}
