/**
 * A baseline arm read from a stored run record (e.g. the main branch's CI artifact) instead of
 * measured in this run, and what any comparison of two separately launched records must say:
 * which records they are, when each ran, and that only the launch-noise floor covers the drift
 * between them (two launches cannot be interleaved A B B A after the fact).
 */
import { formatPercent } from '../number-format.ts'
import type { RunRecord } from '../schema/run.ts'
import { readRunRecord } from './record-io.ts'

/** A baseline arm from a stored run record: the record, and the file it was read from. */
export interface StoredBaseline {
  readonly kind: 'stored-baseline'
  /** The path it was read from, as given. */
  readonly file: string
  readonly record: RunRecord
}

/**
 * Reads a stored run record (`servegate.run/v1`, e.g. the main branch's CI artifact) as the
 * baseline arm of a cell measured now. A matcher given `{ baseline, candidate }` checks the two
 * records as a matched pair first and refuses to judge them otherwise, naming every mismatch;
 * its decision then says the baseline came from this file and was not measured in this run.
 * The path is relative to the working directory (where vitest runs).
 * @example
 * const main = await storedBaseline('baseline/tiny-c4.json')
 * expect({ baseline: main, candidate: await c4 }).toWinDecode({ margin: 0.05 })
 */
export async function storedBaseline(path: string): Promise<StoredBaseline> {
  if (typeof path !== 'string' || path === '')
    throw new TypeError(
      `storedBaseline: pass the path of a run record JSON file, e.g. 'baseline/tiny-c4.json'; got ${JSON.stringify(path)}`,
    )
  return { kind: 'stored-baseline', file: path, record: await readRunRecord(path) }
}

/** True for what `storedBaseline` gives. */
export function isStoredBaseline(v: unknown): v is StoredBaseline {
  const s = v as Partial<StoredBaseline> | null
  return (
    s?.kind === 'stored-baseline' &&
    typeof s.file === 'string' &&
    (s.record as { schema?: unknown } | undefined)?.schema === 'servegate.run/v1'
  )
}

const MINUTE_MS = 60_000
const HOUR_MS = 60 * MINUTE_MS
const DAY_MS = 24 * HOUR_MS

/**
 * How long before the candidate the baseline started, in words; null when either start time is unknown.
 * @example startGap('2026-11-30T10:00:00Z', '2026-12-01T13:00:00Z') // '1.1 days before the candidate'
 */
export function startGap(baselineStartedAt: string | null, candidateStartedAt: string | null): string | null {
  if (baselineStartedAt === null || candidateStartedAt === null) return null
  const ms = Date.parse(candidateStartedAt) - Date.parse(baselineStartedAt)
  if (!Number.isFinite(ms)) return null
  const size = Math.abs(ms)
  const amount =
    size >= DAY_MS
      ? `${(size / DAY_MS).toFixed(1)} days`
      : size >= HOUR_MS
        ? `${(size / HOUR_MS).toFixed(1)} h`
        : size >= MINUTE_MS
          ? `${Math.round(size / MINUTE_MS)} min`
          : `${Math.round(size / 1000)} s`
  return `${amount} ${ms >= 0 ? 'before' : 'after'} the candidate`
}

/** A record's identity in words: its run id and start time. */
export function runText(r: Pick<RunRecord, 'runId' | 'startedAt'>): string {
  return `${r.runId}, started ${r.startedAt ?? 'at an unknown time'}`
}

/**
 * What covers the drift between two separate launches: only the launch-noise floor, or nothing
 * when it is 0.
 */
export function driftCoverText(launchNoise: number): string {
  return launchNoise > 0
    ? `only the launch-noise floor (${formatPercent(launchNoise)} per launch) covers drift between the two launches`
    : 'nothing covers drift between the two launches (the launch-noise floor is 0)'
}

/**
 * The launch-noise floor a gate against a stored baseline rests on, from its resolved options:
 * a timing gate's `launchNoise`; null for an absolute latency bound (`atMostMs` reads the
 * candidate only) and for the accuracy gate (answers to the same questions, not timings), which
 * drift between launches does not enter.
 * @example storedBaselineFloor('toWinDecode', { launchNoise: 0.02 }) // 0.02
 */
export function storedBaselineFloor(gate: string, options: object): number | null {
  const o = options as { launchNoise?: unknown; atMostMs?: unknown }
  if (gate === 'toStayWithinAccuracyGap' || o.atMostMs !== undefined) return null
  return typeof o.launchNoise === 'number' ? o.launchNoise : null
}

/**
 * The warning a decision against a stored baseline carries: the baseline was not measured in this
 * run (its file, run id and start time, how long before the candidate) and, for a timing gate
 * (`launchNoise` not null), that only the launch-noise floor covers the drift between the launches.
 */
export function storedBaselineWarning(stored: StoredBaseline, candidate: RunRecord, launchNoise: number | null): string {
  const gap = startGap(stored.record.startedAt, candidate.startedAt)
  const where = `the baseline was not measured in this run: it is the stored record ${stored.file} (${runText(stored.record)}${
    gap === null ? '' : `, ${gap}`
  })`
  if (launchNoise === null) return where
  return `${where}. A stored baseline cannot be interleaved A B B A with the candidate, so ${driftCoverText(launchNoise)}`
}
