/**
 * One servegate cell in a process of its own, for the figures a process must be fresh for:
 * peak RSS, the heap the cell leaves, and a scale rung's timing. It runs the real cell path from
 * the compiled package (`dist/`, what a user's vitest worker loads: no TypeScript stripper in
 * the process), `runCell`: probe, bodies, dispatch, the client in the cell's thread or on worker
 * threads, records, against a bench server, and prints one JSON line (`CellRunResult` in
 * cell-bench.ts). Plain JavaScript for the same reason.
 *
 * Usage: `node --expose-gc benchmarks/cell-run.js --origin URL --model M --concurrency C
 *   --requests N --tokens T [--workers auto|N] [--interval-ms I] [--warmup N] [--spill] [--gaps] [--retained]
 *   [--sessions S --turns K]` (a conversation cell of S sessions of K turns each, replayed history:
 *   its requests are S × K, `--requests` ignored)
 *   (after `node scripts/build.ts`)
 *
 * `--gaps` adds each measured request's ITL gaps, ms, in request order (`gapsMs`): for a few
 * requests (the C = 1 precision runs), not a ladder's thousands.
 *
 * `--retained` measures instead what a finished request leaves on the heap, within this one
 * process: a cell of at least 1500 requests to warm the code (dropped), then one of N held (heap
 * after GC: A), then one of 3N held beside it (B); it prints `{ requests, heapBytes: [A, B],
 * retainedBytesPerRequest: (B - A) / 3N }`. The heap after GC also holds the code the JIT has
 * compiled so far, which after a few hundred requests still grows by more than the records: across
 * processes, or without the warm-up, 200 against 600 requests read 300 to 900 B a request where
 * 1500 against 4500 read under 20.
 */
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import { distribution } from '../dist/metrics/distribution.js'
import { RequestSpill } from '../dist/record/request-spill.js'
import { runCell } from '../dist/runner/measure-cell.js'
import { peakRssMB } from './peak-rss.js'

const { values } = parseArgs({
  options: {
    origin: { type: 'string' },
    model: { type: 'string' },
    concurrency: { type: 'string', default: '1' },
    requests: { type: 'string', default: '32' },
    tokens: { type: 'string', default: '100' },
    workers: { type: 'string', default: 'auto' },
    'interval-ms': { type: 'string' },
    warmup: { type: 'string', default: '0' },
    spill: { type: 'boolean', default: false },
    gaps: { type: 'boolean', default: false },
    retained: { type: 'boolean', default: false },
    sessions: { type: 'string' },
    turns: { type: 'string' },
  },
})
if (values.origin === undefined || values.model === undefined) {
  throw new Error('--origin and --model: required; pass the bench server and its model, e.g. --origin http://127.0.0.1:8000 --model m')
}
const concurrency = Number(values.concurrency)
const requests = Number(values.requests)
const tokens = Number(values.tokens)
const intervalMs = values['interval-ms'] === undefined ? null : Number(values['interval-ms'])
const dir = values.spill ? await mkdtemp(join(tmpdir(), 'servegate-cell-run-')) : null
/** A `--retained` run's warm-up cell: by then the JIT's code has stopped growing by more than tens of bytes a request. */
const RETAINED_WARM_REQUESTS = 1500
/** Every cell's spill, closed at the end: a spill's index is what a spilled request keeps on the heap. */
const spills = []

/** A conversation of `--sessions` sessions of `--turns` turns (64-token user turns), or null for single-turn prompts. */
const conversation =
  values.sessions === undefined
    ? null
    : { kind: 'conversation', sessions: Number(values.sessions), turns: Number(values.turns ?? 1), userTokens: 64, seed: 1 }

/** Runs one cell of `count` requests; its record and spill (if spilling) come back. */
async function cell(count) {
  const spill = dir === null ? undefined : await RequestSpill.create(join(dir, `cell-${spills.length}.requests.jsonl`))
  if (spill !== undefined) spills.push(spill)
  const record = await runCell(
    {
      baseUrl: values.origin,
      model: values.model,
      concurrency,
      ...(conversation === null ? { requests: count } : {}),
      maxTokens: tokens,
      warmupRequests: Number(values.warmup),
      calibrate: false,
      workload: conversation ?? { promptTokens: 64, seed: 1 },
      clientWorkers: values.workers === 'auto' ? 'auto' : Number(values.workers),
      // A paced stream's nominal length and half again: what is later than that is not delivered.
      requestTimeoutMs: intervalMs === null ? 120_000 : Math.ceil(1.5 * tokens * intervalMs) + 1000,
    },
    { spill },
  )
  return { record, spill }
}

/** The heap in use after a full GC, bytes (twice: the second takes what the first's finalizers let go). */
function heapAfterGc() {
  globalThis.gc?.()
  globalThis.gc?.()
  return process.memoryUsage().heapUsed
}

try {
  if (values.retained) {
    if (globalThis.gc === undefined) throw new Error('--retained: run node with --expose-gc')
    await cell(Math.max(requests, RETAINED_WARM_REQUESTS))
    const held = [await cell(requests)]
    const a = heapAfterGc()
    held.push(await cell(3 * requests))
    const b = heapAfterGc()
    const failed = held.reduce((n, c) => n + c.record.failed, 0)
    if (failed > 0) throw new Error(`--retained: ${failed} requests failed; the heap would not be what finished requests leave`)
    process.stdout.write(`${JSON.stringify({ requests, heapBytes: [a, b], retainedBytesPerRequest: (b - a) / (3 * requests) })}\n`)
  } else {
    const { record, spill } = await cell(requests)
    let delivered = 0
    const errors = []
    const gapsMs = values.gaps ? [] : undefined
    const take = (r) => {
      delivered += r.contentChunks
      if (intervalMs !== null) for (const gap of r.itlMs ?? []) errors.push(Math.abs(gap - intervalMs))
      gapsMs?.push(r.itlMs ?? [])
    }
    if (spill === undefined) record.requests.forEach(take)
    else for await (const r of spill.inOrder()) take(r)
    const workers = record.harness.clientWorkers ?? 0
    const wallMs = record.metrics.wallClockMs ?? 0
    const itlErrorMs = intervalMs === null ? null : distribution(errors)
    errors.length = 0
    // What the cell leaves behind: the record it returned (and the spill's index) are still held.
    const heapAfterGcMB = globalThis.gc === undefined ? null : heapAfterGc() / 2 ** 20
    const result = {
      concurrency,
      requests,
      tokens,
      workers,
      completed: record.completed,
      failed: record.failed,
      failures: record.failures,
      offeredTokens: record.plan.requests * tokens,
      deliveredTokens: delivered,
      deliveredShare: delivered / (record.plan.requests * tokens),
      wallMs,
      chunksPerSPerWorker: wallMs > 0 ? delivered / (wallMs / 1000) / Math.max(1, workers) : 0,
      itlErrorMs,
      harness: record.harness,
      peakRssMB: peakRssMB(),
      heapAfterGcMB,
      gapsMs,
    }
    process.stdout.write(`${JSON.stringify(result)}\n`)
  }
} finally {
  for (const spill of spills) await spill.close()
  if (dir !== null) await rm(dir, { recursive: true, force: true })
}
