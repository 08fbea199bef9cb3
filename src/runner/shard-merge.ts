import { randomBytes } from 'node:crypto'
import { ServegateError } from '../errors.ts'
import { CellTally } from '../metrics/cell-metrics.ts'
import { distribution } from '../metrics/distribution.ts'
import { networkAdjusted } from '../metrics/network.ts'
import type { HarnessHealth, ReadBatching, RequestRecord, RunRecord } from '../schema/run.ts'
import { addPauses } from '../client/read-batching.ts'
import type { ShardFigures } from '../schema/shards.ts'
import { bodyEntry } from '../workload/bytes.ts'
import { StreamHash } from '../workload/prepare.ts'
import type { ShardStreams } from './shard-split.ts'

/** What one shard hands the coordinator: its shard record, its figures and what it sent. */
export interface ShardResult {
  figures: ShardFigures
  /** The shard's own run record: its requests, their offsets from the start the shards shared. */
  record: RunRecord
  streams: ShardStreams
}

/** A stream hash over every request of the plan in index order; null when a request of `0…count − 1` is missing. */
function orderedHash(count: number, entries: Map<number, readonly [number, string]>): string | null {
  const hash = new StreamHash()
  for (let i = 0; i < count; i++) {
    const entry = entries.get(i)
    if (entry === undefined) return null
    hash.updateDigest(entry[0], entry[1])
  }
  return hash.digest()
}

/** The request-stream and wire-stream hashes of the whole plan, from every shard's part, as one process's feed and ledger make them. */
function mergedStreams(shards: readonly ShardResult[], sent: number): { request: string | null; wire: string | null } {
  const request = new Map<number, readonly [number, string]>()
  const wire = new Map<number, readonly [number, string]>()
  const empty = bodyEntry('')
  for (const { streams } of shards) {
    for (const [index, bytes, sha256] of streams.request) request.set(index, [bytes, sha256])
    for (const entry of streams.wire) wire.set(entry[0], entry[1] === null ? empty : [entry[1], entry[2] as string])
  }
  return { request: orderedHash(sent, request), wire: orderedHash(sent, wire) }
}

/**
 * The merged cell's wall clock, ms: from the first send of any shard to the last end of any, each
 * shard's span placed by its first send's offset from the start they shared.
 */
function mergedWallClock(shards: readonly ShardResult[]): number | null {
  let first = Infinity
  let last = -Infinity
  for (const { record } of shards) {
    const wall = record.metrics.wallClockMs
    const offsets = record.requests.flatMap((r) => (r.startOffsetMs === null ? [] : [r.startOffsetMs]))
    if (wall === null || offsets.length === 0) continue
    const start = Math.min(...offsets)
    first = Math.min(first, start)
    last = Math.max(last, start + wall)
  }
  return Number.isFinite(first) ? last - first : null
}

/** The largest of the values given, null when none is. */
function maxOf(values: ReadonlyArray<number | null | undefined>): number | null {
  return values.reduce<number | null>((max, v) => (v == null ? max : Math.max(max ?? v, v)), null)
}

/** The shards' batched-read pauses summed; absent when a shard's record has none. */
function mergedReadBatching(harness: readonly HarnessHealth[]): Pick<HarnessHealth, 'readBatching'> {
  const each = harness.map((h) => h.readBatching)
  if (each.some((b) => b === undefined)) return {}
  return { readBatching: (each as ReadBatching[]).reduce(addPauses) }
}

/**
 * The merged cell's harness figures: the send lag over every request of every shard, the others
 * the worst shard's (CPU time summed); limited when any shard was, each reason naming its shard.
 */
function mergedHarness(shards: readonly ShardResult[], requests: readonly RequestRecord[]): HarnessHealth {
  const harness = shards.map((s) => s.record.harness)
  const cpuMs = harness.map((h) => h.clientCpuMs)
  return {
    clientCpuMs: cpuMs.some((ms) => ms === null) ? null : cpuMs.reduce<number>((a, b) => a + (b as number), 0),
    clientCpuShare: maxOf(harness.map((h) => h.clientCpuShare)),
    eventLoopDelayP99Ms: maxOf(harness.map((h) => h.eventLoopDelayP99Ms)),
    eventLoopDelayMaxMs: maxOf(harness.map((h) => h.eventLoopDelayMaxMs)),
    sendLagP99Ms: distribution(requests.flatMap((r) => (r.sendLagMs === null ? [] : [r.sendLagMs]))).p99,
    openingSendLagMaxMs: maxOf(harness.map((h) => h.openingSendLagMaxMs)),
    hostStealShare: maxOf(harness.map((h) => h.hostStealShare)),
    ...mergedReadBatching(harness),
    harnessLimited: harness.some((h) => h.harnessLimited),
    reasons: shards.flatMap((s) => s.record.harness.reasons.map((reason) => `shard ${s.figures.index}: ${reason}`)),
    exceeded: harness.flatMap((h) => h.exceeded ?? []),
  }
}

/**
 * Merges the shards of one cell (`servegate run --shards N`) into one run record, as one process
 * measuring the whole plan would have written it: every request in index order, the counts and
 * every distribution computed once over all of them (so `servegate verify` and `summarize`
 * re-derive them from the merged record), the request- and wire-stream hashes over the whole plan,
 * and each shard's own client-health figures in `shards`. The plan, manifest and telemetry are
 * shard 0's; an open loop's in-flight maximum is the shards' maxima summed (an upper bound).
 * @throws ServegateError INTERNAL when the shards are not 0…N − 1 of one plan
 */
export function mergeShards(shards: readonly ShardResult[]): RunRecord {
  const sorted = [...shards].sort((a, b) => a.figures.index - b.figures.index)
  const first = sorted[0]
  if (first === undefined || sorted.some((s, i) => s.figures.index !== i))
    throw new ServegateError('INTERNAL', `shards to merge must be 0…N − 1, got ${sorted.map((s) => s.figures.index).join(', ')}`)
  const requests = sorted.flatMap((s) => s.record.requests).sort((a, b) => a.index - b.index)
  const base = first.record
  const slo = base.metrics.goodput?.slo ?? null
  const tally = new CellTally(slo)
  for (const r of requests) tally.add(r)
  const unsent = sorted.reduce((n, s) => n + s.record.unsent, 0)
  const due = requests.length + unsent
  const streams = mergedStreams(sorted, due)
  const workload = base.plan.workload
  const open = sorted.map((s) => s.record.metrics.openLoop)
  const openLoop = open.some((o) => o === null)
    ? null
    : {
        inFlightMax: open.reduce((n, o) => n + (o?.inFlightMax ?? 0), 0),
        cappedRequests: open.reduce((n, o) => n + (o?.cappedRequests ?? 0), 0),
      }
  const startedAt = sorted.map((s) => s.record.startedAt).reduce((a, b) => ((a ?? b ?? '') < (b ?? a ?? '') ? a : b))
  const finishedAt = sorted.map((s) => s.record.finishedAt).reduce((a, b) => ((a ?? b ?? '') > (b ?? a ?? '') ? a : b))
  const metrics = { ...tally.metrics(mergedWallClock(sorted)), openLoop }
  // A remote target: shard 0's probes, its TTFT and e2e adjusted over every shard's requests.
  const network =
    base.network === undefined ? {} : { network: { ...base.network, adjusted: networkAdjusted(base.network, metrics.distributions) } }
  return {
    ...base,
    runId: mergedRunId(startedAt),
    startedAt,
    finishedAt,
    plan: {
      ...base.plan,
      workload: {
        ...workload,
        requestStreamSha256: streams.request,
        wireStreamSha256: streams.wire,
        wireMatchesPlan:
          streams.request === null || streams.wire === null || workload.conversation?.history === 'live'
            ? null
            : streams.request === streams.wire,
        floorMet:
          base.plan.arrival === null && workload.requestsPerSlotFloor !== null
            ? due >= workload.requestsPerSlotFloor * base.plan.concurrency
            : workload.floorMet,
      },
    },
    completed: tally.completed,
    failed: tally.failed,
    failures: { ...tally.failures },
    cancelled: tally.cancelled,
    unsent,
    requests,
    metrics,
    ...network,
    harness: mergedHarness(sorted, requests),
    cellFailure: sorted.map((s) => s.record.cellFailure).find((f) => f !== null) ?? null,
    shards: sorted.map((s) => s.figures),
  }
}

/** A merged record's id: the first shard's start, as every run id. */
function mergedRunId(startedAt: string | null): string {
  const stamp = (startedAt ?? new Date().toISOString()).replace(/[-:]/g, '').replace(/\.\d+Z$/, 'Z')
  return `run-${stamp}-${randomBytes(3).toString('hex')}`
}
