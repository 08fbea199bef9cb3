import { gunzipSync, gzipSync } from 'node:zlib'
import type { RunRecord } from '../schema/run.ts'
import type { ShardFigures } from '../schema/shards.ts'
import type { CliIo } from './cli-io.ts'
import { renderSummary } from './summary.ts'

/**
 * One line on the shards of a merged record: each one's send lag p99 and clock offset, and which
 * were harness-limited.
 * @example 'shards: 2 · send lag p99 3.52, 4.10 ms · clock offset -0.004±0.03, 0.002±0.05 ms · harness-limited: none'
 */
function shardsLine(shards: readonly ShardFigures[]): string {
  const lag = shards.map((s) => (s.sendLagP99Ms === null ? '—' : s.sendLagP99Ms.toFixed(2))).join(', ')
  const clocks = shards.map((s) => `${s.clockOffsetMs.toFixed(3)}±${s.clockOffsetUncertaintyMs.toFixed(3)}`).join(', ')
  const limited = shards.filter((s) => s.harnessLimited).map((s) => `shard ${s.index}`)
  return `shards: ${shards.length} · send lag p99 ${lag} ms · clock offset ${clocks} ms · harness-limited: ${limited.length === 0 ? 'none' : limited.join(', ')}`
}

/**
 * Prints a merged record as `servegate run` prints its own (the summary, or `--json`'s metrics)
 * and returns run's exit code for it: 1 when the cell failed, 3 when every request failed, else 0.
 */
export function reportMerged(record: RunRecord, path: string, json: boolean, io: CliIo): number {
  if (json) {
    const { metrics, completed, failed, failures, harness, shards } = record
    io.stdout.write(`${JSON.stringify({ metrics, completed, failed, failures, harness, shards, record: path }, null, 2)}\n`)
  } else {
    io.stdout.write(`${renderSummary(record, path)}\n`)
    if (record.shards !== undefined) io.stdout.write(`${shardsLine(record.shards)}\n`)
  }
  if (record.cellFailure !== null) {
    io.stderr.write(`servegate: the cell failed: ${record.cellFailure.code}: ${record.cellFailure.message.split('\n')[0]}\n`)
    return 1
  }
  if (record.completed === 0 && record.failed !== null && record.failed > 0) {
    io.stderr.write(`servegate: the cell measured nothing: all ${record.failed} requests failed\n`)
    return 3
  }
  return 0
}

/**
 * The lines around the merged record that Kubernetes pod 0 prints, for the launcher to cut out of
 * its log. Between them the record file's bytes, gzip-compressed and in base64 lines of 76
 * characters: about a third of the JSON's size (a kubelet rotates a container's log at 10 MiB
 * by default), and no line long enough for the container runtime to split.
 */
const RECORD_BEGIN = '----- servegate merged record (gzip, base64): begin -----'
const RECORD_END = '----- servegate merged record: end -----'

/** A record file's bytes as pod 0 prints them: between the markers, gzip then base64, 76 characters a line. */
export function recordLogLines(bytes: Buffer): string {
  const base64 = gzipSync(bytes).toString('base64')
  const lines = base64.match(/.{1,76}/g) ?? []
  return `${RECORD_BEGIN}\n${lines.join('\n')}\n${RECORD_END}\n`
}

/** The merged record's path beside a coordinating pod's own shard record: `<out minus .json>.merged.json`. */
export function mergedRecordPath(out: string): string {
  return `${out.replace(/\.json$/, '')}.merged.json`
}

/** The merged record's bytes cut out of pod 0's log (`recordLogLines` undone); null when the log holds none. */
export function recordFromLog(log: string): Buffer | null {
  const begin = log.indexOf(`${RECORD_BEGIN}\n`)
  const end = log.indexOf(`\n${RECORD_END}`, begin)
  if (begin < 0 || end < 0) return null
  return gunzipSync(Buffer.from(log.slice(begin + RECORD_BEGIN.length + 1, end).replace(/\s+/g, ''), 'base64'))
}
