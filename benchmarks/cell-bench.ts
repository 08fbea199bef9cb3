/**
 * The client measured as a cell runs it: each figure from `benchmarks/cell-run.js` in a fresh
 * process (the compiled package, the cell path end to end) against a bench server pinned to a
 * core of its own. Three parts of `npm run bench:client`: peak memory per stream and what a
 * finished request leaves behind, ITL precision at C = 1, and the scale ladder per worker count.
 */
import { fileURLToPath } from 'node:url'
import { execa } from 'execa'
import type { Distribution, HarnessHealth } from '../src/schema/run.ts'
import { distribution } from '../src/metrics/distribution.ts'
import { HostSteal } from '../src/runner/host-steal.ts'
import { BENCH_WORKER_NODE_FLAGS } from '../src/vitest/plugin-options.ts'
import { MODEL } from './chunks.ts'
import { type PythonClient, runPythonItl } from './python-client.ts'
import { median, SERVER_ON_TIME_P99_MS } from './report.ts'
import { startServerProcess } from './servers/spawn.ts'

const CELL_RUN = fileURLToPath(new URL('./cell-run.js', import.meta.url))
/** The chunk interval of the precision and ladder parts, ms. */
export const LADDER_INTERVAL_MS = 10
/** A rung holds when it delivers at least this share of the offered tokens… */
export const RUNG_DELIVERED = 0.99
/** …with ITL error p99 at most this, ms. */
export const RUNG_ITL_P99_MS = 5

/**
 * A server later than the rung's own ITL bound at p99 is overloaded, not just interrupted: its
 * chunks go out in bursts (several to a read), and a higher rung only loads it more.
 */
function serverOverloaded(r: PacedRun): boolean {
  return r.server.lateP99Ms === null || r.server.lateP99Ms > RUNG_ITL_P99_MS
}

/** What one cell process measured (printed by cell-run.js). */
export interface CellRunResult {
  concurrency: number
  requests: number
  tokens: number
  workers: number
  completed: number
  failed: number
  failures: Record<string, number>
  offeredTokens: number
  deliveredTokens: number
  deliveredShare: number
  wallMs: number
  chunksPerSPerWorker: number
  itlErrorMs: Distribution | null
  harness: HarnessHealth
  peakRssMB: number
  heapAfterGcMB: number | null
  /** With `gaps`: each measured request's ITL gaps, ms, in request order. */
  gapsMs?: number[][]
}

/** A paced server's own lateness over one run (its `GET /stats`). */
export interface ServerSchedule {
  chunks: number
  lateP50Ms: number | null
  lateP99Ms: number | null
  lateMaxMs: number | null
  /** Each chunk's lateness in send order, where asked for (`GET /stats?values=1`). */
  lateMs?: number[]
}

export interface CellRunOptions {
  origin: string
  concurrency: number
  requests: number
  tokens: number
  workers: number | 'auto'
  intervalMs?: number
  spill?: boolean
  /** Print each measured request's ITL gaps (`gapsMs`). */
  gaps?: boolean
  /** Node flags of the cell's process. @default BENCH_WORKER_NODE_FLAGS (what the plugin gives a `vitest bench` worker) */
  nodeFlags?: readonly string[]
  /** Unmeasured requests first (connections, JIT, the server's own warm-up). @default 0 */
  warmup?: number
  /** The server's CPU: the cell's process (every thread it starts) runs on the others. Null: unpinned. */
  serverCpu?: number | null
  /** A conversation cell instead: `sessions` sessions of `turns` turns (its requests are their product). */
  conversation?: { sessions: number; turns: number }
}

/** Runs one cell in a fresh process (needs `dist/`: `node scripts/build.ts`). */
export async function runCellProcess(o: CellRunOptions): Promise<CellRunResult> {
  return JSON.parse(await execCellRun(o, [])) as CellRunResult
}

/** What cell-run.js `--retained` prints: the heap after GC with a cell of N finished requests held, then with one of 3N beside it. */
export interface RetainedRun {
  requests: number
  heapBytes: [number, number]
  retainedBytesPerRequest: number
}

/** Heap a finished request leaves, bytes, measured within one fresh process (cell-run.js `--retained`). */
export async function runRetainedProcess(o: CellRunOptions): Promise<RetainedRun> {
  return JSON.parse(await execCellRun(o, ['--retained'])) as RetainedRun
}

/** Runs cell-run.js with `o` and `extra` arguments; its stdout, or an error with its stderr. */
async function execCellRun(o: CellRunOptions, extra: string[]): Promise<string> {
  const args = [
    ...(o.nodeFlags ?? BENCH_WORKER_NODE_FLAGS),
    '--expose-gc',
    // --retained compares the heap after GC at two points: V8 flushing the bytecode of functions
    // idle across GCs in between made it shrink by more than 600 records hold (-859 B a request).
    ...(extra.includes('--retained') ? ['--no-flush-bytecode'] : []),
    CELL_RUN,
    ...['--origin', o.origin, '--model', MODEL, '--concurrency', String(o.concurrency)],
    ...['--requests', String(o.requests), '--tokens', String(o.tokens), '--workers', String(o.workers)],
    ...(o.intervalMs === undefined ? [] : ['--interval-ms', String(o.intervalMs)]),
    ...(o.spill === true ? ['--spill'] : []),
    ...(o.gaps === true ? ['--gaps'] : []),
    ...['--warmup', String(o.warmup ?? 0)],
    ...(o.conversation === undefined ? [] : ['--sessions', String(o.conversation.sessions), '--turns', String(o.conversation.turns)]),
    ...extra,
  ]
  // Pinned from its start, so the worker threads it starts inherit the CPUs the server leaves.
  const cpu = o.serverCpu ?? null
  const [file, argv] = cpu === null || cpu === 0 ? [process.execPath, args] : ['taskset', ['-c', `0-${cpu - 1}`, process.execPath, ...args]]
  const result = await execa(file, argv, { reject: false, timeout: 600_000 })
  if (result.exitCode !== 0) throw new Error(`cell-run.js ${args.slice(-14).join(' ')} failed: ${result.stderr || result.shortMessage}`)
  return result.stdout
}

async function serverSchedule(origin: string, withValues = false): Promise<ServerSchedule> {
  const res = await fetch(`${origin}/stats${withValues ? '?values=1' : ''}`)
  return (await res.json()) as ServerSchedule
}

/** Peak RSS of one shape, under the plugin's worker flags (judged) and under Node's defaults. */
export interface MemoryFigure {
  label: string
  concurrency: number
  tokens: number
  /** Target peak RSS, MB. */
  targetMB: number
  /** Median of the runs under `BENCH_WORKER_NODE_FLAGS`, what a `vitest bench` worker runs with. */
  workerFlagsMB: number
  workerFlagsRunsMB: number[]
  /** Plain `node`, no flags: the CLI's process, or a pool the flags cannot reach (`threads`). */
  defaultMB: number
  heapAfterGcMB: number | null
}

/**
 * Heap a finished request leaves behind, bytes: in one process, after a warm-up cell, the heap
 * after GC with a cell of N requests held, then with one of 3N more beside it.
 */
export interface RetainedFigure {
  concurrency: number
  tokens: number
  /** N and 3N. */
  requests: [number, number]
  spilledBytesPerRequest: number | null
  inMemoryBytesPerRequest: number | null
}

export const MEMORY_SHAPES = [
  { label: 'C = 1 × 1000 tokens', concurrency: 1, tokens: 1000, requests: 16, targetMB: 100 },
  { label: 'C = 256 × 1000 tokens', concurrency: 256, tokens: 1000, requests: 512, targetMB: 260 },
  { label: 'C = 1024 × 200 tokens', concurrency: 1024, tokens: 200, requests: 2048, targetMB: 170 },
] as const

/** Peak memory per shape and what a finished request retains, against a zero-delay server. */
export async function measureMemory(
  quick: boolean,
  cpu: number | null,
  log: (line: string) => void,
): Promise<{ peaks: MemoryFigure[]; retained: RetainedFigure }> {
  const server = await startServerProcess('zeroDelay', [], { cpu })
  try {
    const peaks: MemoryFigure[] = []
    for (const shape of MEMORY_SHAPES) {
      const requests = quick ? shape.concurrency : shape.requests
      const base = { origin: server.origin, concurrency: shape.concurrency, requests, tokens: shape.tokens, workers: 0, serverCpu: cpu }
      // Peak RSS varies by 10 to 20 MB from run to run (when V8 collects): the median of three.
      const flagged: CellRunResult[] = []
      for (let i = 0; i < (quick ? 1 : 3); i++) flagged.push(await runCellProcess(base))
      const plain = await runCellProcess({ ...base, nodeFlags: [] })
      const runsMB = flagged.map((r) => r.peakRssMB)
      log(
        `  memory ${shape.label}: ${runsMB.map((v) => v.toFixed(0)).join(', ')} MB with the worker flags, ${plain.peakRssMB.toFixed(0)} MB plain`,
      )
      peaks.push({
        label: shape.label,
        concurrency: shape.concurrency,
        tokens: shape.tokens,
        targetMB: shape.targetMB,
        workerFlagsMB: median(runsMB),
        workerFlagsRunsMB: runsMB,
        defaultMB: plain.peakRssMB,
        heapAfterGcMB: flagged[0]?.heapAfterGcMB ?? null,
      })
    }
    const n = quick ? 200 : 1500
    const shape = { origin: server.origin, concurrency: 64, tokens: 200, workers: 0 as const, serverCpu: cpu }
    // Within one process after a warm-up cell (cell-run.js --retained); the median of three processes.
    const perRequest = async (spill: boolean): Promise<number> => {
      const runs: number[] = []
      for (let i = 0; i < (quick ? 1 : 3); i++)
        runs.push((await runRetainedProcess({ ...shape, requests: n, spill })).retainedBytesPerRequest)
      return median(runs)
    }
    const retained: RetainedFigure = {
      concurrency: 64,
      tokens: 200,
      requests: [n, 3 * n],
      spilledBytesPerRequest: await perRequest(true),
      inMemoryBytesPerRequest: await perRequest(false),
    }
    log(
      `  retained per request: ${retained.spilledBytesPerRequest?.toFixed(0)} B spilled, ${retained.inMemoryBytesPerRequest?.toFixed(0)} B in memory`,
    )
    return { peaks, retained }
  } finally {
    await server.close()
  }
}

/** One cell against the paced server, with the server's own lateness over it. */
export interface PacedRun {
  concurrency: number
  workers: number
  run: CellRunResult
  server: ServerSchedule
  /**
   * At C = 1 where asked for: each gap against the server's actual send gap, so the client's own
   * error without the server's lateness (null where a request missed chunks).
   */
  clientErrorMs: Distribution | null
  /** Delivered ≥ 99%, ITL error p99 ≤ 5 ms, and the server on time. */
  holds: boolean
  serverOnTime: boolean
}

async function pacedRun(
  origin: string,
  cpu: number | null,
  concurrency: number,
  workers: number,
  chunks: number,
  rounds: number,
  clientOnly = false,
): Promise<PacedRun> {
  if (clientOnly && concurrency !== 1) throw new Error(`pacedRun: the client-only error needs one stream at a time, got C = ${concurrency}`)
  // The server's figures cover the whole run, its warm-up round included (each GET /stats resets them).
  await serverSchedule(origin)
  const run = await runCellProcess({
    origin,
    serverCpu: cpu,
    warmup: concurrency,
    concurrency,
    requests: concurrency * rounds,
    tokens: chunks,
    workers,
    intervalMs: LADDER_INTERVAL_MS,
    gaps: clientOnly,
  })
  const server = await serverSchedule(origin, clientOnly)
  const clientErrorMs = clientOnly ? clientOnlyErrorMs(run.gapsMs ?? [], server.lateMs ?? [], chunks, LADDER_INTERVAL_MS) : null
  delete run.gapsMs
  delete server.lateMs
  const serverOnTime = server.lateP99Ms !== null && server.lateP99Ms <= SERVER_ON_TIME_P99_MS
  const itlP99 = run.itlErrorMs?.p99 ?? null
  const holds = run.deliveredShare >= RUNG_DELIVERED && itlP99 !== null && itlP99 <= RUNG_ITL_P99_MS && serverOnTime
  return { concurrency, workers, run, server, clientErrorMs, holds, serverOnTime }
}

/**
 * A C = 1 cell's own error: each ITL gap against the gap the server actually sent it with. The
 * streams went out one after another, the measured ones last, so their chunks are the last
 * `gapsMs.length × chunks` of the server's lateness values, in order; chunk k of a stream went
 * out `intervalMs + late[k] − late[k − 1]` after chunk k − 1. Null where a request missed a chunk.
 */
export function clientOnlyErrorMs(
  gapsMs: readonly number[][],
  lateMs: readonly number[],
  chunks: number,
  intervalMs: number,
): Distribution | null {
  const offset = lateMs.length - gapsMs.length * chunks
  if (gapsMs.length === 0 || offset < 0 || gapsMs.some((gaps) => gaps.length !== chunks - 1)) return null
  const errors: number[] = []
  gapsMs.forEach((gaps, r) => {
    const base = offset + r * chunks
    gaps.forEach((gap, i) => {
      const sentGap = intervalMs + (lateMs[base + i + 1] as number) - (lateMs[base + i] as number)
      errors.push(Math.abs(gap - sentGap))
    })
  })
  return distribution(errors)
}

/** The vLLM-style client's C = 1 runs on the same paced server, between servegate's. */
export interface PythonPrecision {
  python: string
  aiohttp: string
  /** `hostStealShare`: the machine's CPU time the hypervisor took over the run (null off Linux). */
  runs: Array<{ itlErrorMs: Distribution; clientErrorMs: Distribution; server: ServerSchedule; hostStealShare: number | null }>
}

/** ITL precision at C = 1: the cell path in the cell's thread and on one worker, and the vLLM-style client beside them. */
export interface PrecisionReport {
  /** Servegate's runs, `reps` per worker count, alternated with the Python client's. */
  runs: PacedRun[]
  python: PythonPrecision | null
}

/**
 * ITL precision at C = 1 through the whole cell path, in the cell's thread and on one worker,
 * alternated with the vLLM-style Python client (when one is installed) on the same paced server.
 * A first, unmeasured cell warms the server: its own JIT compiles in its first seconds and
 * would show as client error in whichever client ran first.
 */
export async function measurePrecision(
  quick: boolean,
  cpu: number | null,
  log: (line: string) => void,
  py: PythonClient | null = null,
): Promise<PrecisionReport> {
  const server = await startServerProcess('paced', ['--interval-ms', String(LADDER_INTERVAL_MS)], { cpu })
  const chunks = quick ? 50 : 300
  const rounds = quick ? 1 : 3
  try {
    if (!quick) await pacedRun(server.origin, cpu, 1, 0, chunks, 1)
    const runs: PacedRun[] = []
    const python: PythonPrecision | null = py === null ? null : { python: py.pythonVersion, aiohttp: py.aiohttpVersion, runs: [] }
    for (let rep = 0; rep < (quick ? 1 : 3); rep++) {
      for (const workers of [0, 1]) {
        const r = await pacedRun(server.origin, cpu, 1, workers, chunks, rounds, true)
        log(
          `  C=1, ${workers} workers: ITL error p99 ${r.run.itlErrorMs?.p99?.toFixed(3)} ms, client-only ${r.clientErrorMs?.p99?.toFixed(3)} ms, ` +
            `server late p99 ${r.server.lateP99Ms?.toFixed(3)} ms, ` +
            `host steal ${percent(r.run.harness.hostStealShare ?? null)}`,
        )
        runs.push(r)
      }
      if (py !== null && python !== null) {
        await serverSchedule(server.origin)
        const options = {
          origin: server.origin,
          intervalMs: LADDER_INTERVAL_MS,
          concurrency: 1,
          chunks,
          rounds,
          cpu: cpu === null || cpu === 0 ? null : 0,
        }
        const steal = new HostSteal()
        steal.start()
        const r = await runPythonItl(py, options)
        steal.stop()
        const late = await serverSchedule(server.origin)
        log(
          `  C=1, vLLM-style client: ITL error p99 ${r.itlErrorMs.p99?.toFixed(3)} ms, client-only ${r.clientErrorMs.p99?.toFixed(3)} ms, ` +
            `server late p99 ${late.lateP99Ms?.toFixed(3)} ms, ` +
            `host steal ${percent(steal.share())}`,
        )
        python.runs.push({ itlErrorMs: r.itlErrorMs, clientErrorMs: r.clientErrorMs, server: late, hostStealShare: steal.share() })
      }
    }
    return { runs, python }
  } finally {
    await server.close()
  }
}

/**
 * The ladder's rungs: the issue's C = 256 … 2048, below them 64 and 128, where a machine that
 * gives the client one core finds what one thread holds.
 */
export const LADDER_LEVELS = [64, 128, 256, 512, 1024, 2048] as const

/** The chunk arrivals per second one streaming thread is offered at a rung. */
export function offeredPerThread(concurrency: number, workers: number): number {
  return (concurrency * 1000) / LADDER_INTERVAL_MS / Math.max(1, workers)
}

/**
 * The ladder: C = 64 … 2048 at 10 ms a chunk on a server that spreads its streams' phases over
 * the interval, per worker count. A count stops climbing at its first rung the client failed; a
 * rung that failed only because the server was briefly late says nothing of the client, so the
 * count climbs on, unless the server was overloaded there or less than 99% was delivered (the
 * next rung would only measure the server, and take longer). It then bisects between its highest
 * rung that held and the first above it the client failed (`nextBisectionRung`), so the per-thread
 * capacity comes out within an eighth instead of a factor of two.
 */
export async function measureLadder(
  quick: boolean,
  workerCounts: readonly number[],
  serverCpus: readonly number[],
  log: (line: string) => void,
): Promise<PacedRun[]> {
  const processes = Math.max(1, serverCpus.length)
  const server = await startServerProcess(
    'paced',
    ['--interval-ms', String(LADDER_INTERVAL_MS), '--phases', 'spread', '--processes', String(processes)],
    { cpus: serverCpus },
  )
  // The cell's process runs on the CPUs below the server's.
  const cpu = serverCpus[0] ?? null
  log(`  server: ${ladderServerText(serverCpus)}`)
  try {
    // Unmeasured: the server compiles as it goes in its first seconds, and was late at the first
    // rung for it (late p99 1.8–2.2 ms at C = 64 in three runs, under 0.3 ms at C = 128 after).
    await pacedRun(server.origin, cpu, LADDER_LEVELS[0], 0, quick ? 30 : 100, 1)
    const runs: PacedRun[] = []
    // One rung, measured, logged and kept: a doubling of the climb or a bisection step.
    const rung = async (step: 'ladder' | 'bisect', concurrency: number, workers: number): Promise<PacedRun> => {
      const r = await pacedRun(server.origin, cpu, concurrency, workers, quick ? 30 : 100, 2)
      log(
        `  ${step} C=${concurrency}, ${workers} workers: delivered ${(r.run.deliveredShare * 100).toFixed(1)}%, ` +
          `ITL error p99 ${r.run.itlErrorMs?.p99?.toFixed(2)} ms, ${Math.round(r.run.chunksPerSPerWorker)} chunks/s per thread, ` +
          `server late p99 ${r.server.lateP99Ms?.toFixed(2)} ms, host steal ${percent(r.run.harness.hostStealShare ?? null)}`,
      )
      runs.push(r)
      return r
    }
    for (const workers of workerCounts) {
      for (const concurrency of quick ? LADDER_LEVELS.slice(0, 1) : LADDER_LEVELS) {
        const r = await rung('ladder', concurrency, workers)
        if (!r.holds && (r.serverOnTime || serverOverloaded(r) || r.run.deliveredShare < RUNG_DELIVERED)) break
      }
      for (let c = quick ? null : nextBisectionRung(runs, workers); c !== null; c = nextBisectionRung(runs, workers)) {
        await rung('bisect', c, workers)
      }
    }
    return runs
  } finally {
    await server.close()
  }
}

/** The ladder's server in words: its processes, and the CPUs they and the cell's process are pinned to. */
export function ladderServerText(serverCpus: readonly number[]): string {
  const n = Math.max(1, serverCpus.length)
  const processes = `${n} paced process${n === 1 ? '' : 'es'}`
  return serverCpus.length === 0
    ? `${processes}, unpinned`
    : `${processes} on CPU ${serverCpus.join(', ')}; the cell's process on the CPUs below`
}

/**
 * The next rung to try between a worker count's highest rung that held and its lowest rung above
 * that the client failed with the server on time, so the capacity is known to within an eighth
 * of the held rung rather than a doubling; null when the two are that close, when either is
 * missing, or when the middle was already tried (it failed on the server: the bisection cannot
 * go on).
 */
export function nextBisectionRung(runs: readonly PacedRun[], workers: number): number | null {
  const own = runs.filter((r) => r.workers === workers)
  const held = own.filter((r) => r.holds).map((r) => r.concurrency)
  if (held.length === 0) return null
  const lo = Math.max(...held)
  const failed = own.filter((r) => !r.holds && r.serverOnTime && r.concurrency > lo).map((r) => r.concurrency)
  if (failed.length === 0) return null
  const hi = Math.min(...failed)
  if (hi - lo <= Math.max(1, lo / 8)) return null
  const mid = Math.round((lo + hi) / 2)
  return own.some((r) => r.concurrency === mid) ? null : mid
}

/** One rung of the conversation comparison: the cell's figures and the paced server's lateness over it. */
export interface ConversationRungRun {
  label: string
  run: CellRunResult
  server: ServerSchedule
}

/** Sessions and turns of the conversation rung; the single-turn rung beside it sends as many requests at the same concurrency. */
export const CONVERSATION_RUNG = { sessions: 256, turns: 4 } as const

/**
 * The conversation rung beside a single-turn one: C = 256 streams either way, against the paced
 * server, each a fresh process; what the client's ITL error and peak RSS become when every
 * request carries its session's history (turn k holds k − 1 earlier turns and replies).
 */
export async function measureConversation(quick: boolean, cpu: number | null, log: (line: string) => void): Promise<ConversationRungRun[]> {
  const server = await startServerProcess('paced', ['--interval-ms', String(LADDER_INTERVAL_MS)], { cpu })
  const { sessions, turns } = CONVERSATION_RUNG
  const chunks = quick ? 20 : 100
  try {
    const out: ConversationRungRun[] = []
    const rungs = [
      { label: `single turn, C = ${sessions} × ${turns} rounds`, conversation: undefined },
      { label: `conversation, ${sessions} sessions × ${turns} turns`, conversation: { sessions, turns } },
    ]
    for (const rung of rungs) {
      await serverSchedule(server.origin)
      const run = await runCellProcess({
        origin: server.origin,
        serverCpu: cpu,
        concurrency: sessions,
        requests: sessions * turns,
        tokens: chunks,
        workers: 0,
        intervalMs: LADDER_INTERVAL_MS,
        ...(rung.conversation === undefined ? {} : { conversation: rung.conversation }),
      })
      const late = await serverSchedule(server.origin)
      log(
        `  ${rung.label}: delivered ${(run.deliveredShare * 100).toFixed(1)}%, ITL error p99 ${run.itlErrorMs?.p99?.toFixed(3)} ms, ` +
          `peak RSS ${run.peakRssMB.toFixed(0)} MB, server late p99 ${late.lateP99Ms?.toFixed(3)} ms`,
      )
      out.push({ label: rung.label, run, server: late })
    }
    return out
  } finally {
    await server.close()
  }
}

/** The cell-path parts of a bench:client report. */
export interface CellBenchReport {
  memory: { peaks: MemoryFigure[]; retained: RetainedFigure } | null
  /** The conversation rung beside the single-turn one; null where not run. */
  conversation?: ConversationRungRun[] | null
  precision: PrecisionReport | null
  ladder: PacedRun[] | null
  /** The ladder's server: as many paced processes as these CPUs, pinned to them (empty: one process, unpinned). */
  ladderServerCpus?: number[]
}

/** vLLM's client's ITL error p99 at C = 1 in the issue's external measurement (a quiet machine), ms. */
export const C1_ITL_P99_EXTERNAL_MS = 0.3
/** Retained heap per finished request, spilled, bytes. */
export const RETAINED_TARGET_BYTES = 200

/** A share as a percentage with one decimal, or '–'. */
const percent = (share: number | null): string => (share === null ? '–' : `${(share * 100).toFixed(1)}%`)

const ms = (v: number | null | undefined, digits = 2): string => (v === null || v === undefined ? '–' : `${v.toFixed(digits)} ms`)
const mark = (ok: boolean): string => (ok ? 'met' : '**not met**')

/** What the ladder says of one streaming thread's capacity, chunk arrivals/s. */
export interface ThreadCapacity {
  /** The worker count the figures come from (0: the cell's thread). */
  workers: number
  /**
   * The most one thread kept at a rung that held; where none held, at the best rung only the
   * server failed without overloading (then a lower bound); null where no rung gives either (every
   * rung the server was on time for, the client failed).
   */
  chunksPerS: number | null
  held: boolean
  /** What one thread was offered at that count's first rung above it that the client failed (the server on time), or null. */
  failedAtChunksPerS: number | null
}

/**
 * One streaming thread's capacity from the ladder, from the worker count whose threads kept the
 * most at a rung that held: that rate, and what its first rung above it that the client failed
 * offered a thread (the capacity within the rung's bound lies between the two). A rung the
 * client failed with the server on time bounds the capacity from above only, never from below.
 */
export function perThreadCapacity(ladder: readonly PacedRun[]): ThreadCapacity | null {
  const held = ladder.filter((r) => r.holds)
  const clientFailed = ladder.filter((r) => !r.holds && r.serverOnTime)
  const offer = (r: PacedRun): number => offeredPerThread(r.concurrency, r.workers)
  const pool = held.length > 0 ? held : ladder.filter((r) => !r.serverOnTime && !serverOverloaded(r))
  if (pool.length === 0) {
    if (clientFailed.length === 0) return null
    // No lower bound: the lowest offer a thread failed bounds it from above.
    const lowest = clientFailed.reduce((a, b) => (offer(b) < offer(a) ? b : a))
    return { workers: lowest.workers, chunksPerS: null, held: false, failedAtChunksPerS: offer(lowest) }
  }
  const best = pool.reduce((a, b) => (b.run.chunksPerSPerWorker > a.run.chunksPerSPerWorker ? b : a))
  const chunksPerS = best.run.chunksPerSPerWorker
  const failed = clientFailed
    .filter((r) => r.workers === best.workers)
    .map(offer)
    .filter((offered) => offered > chunksPerS)
  return { workers: best.workers, chunksPerS, held: held.length > 0, failedAtChunksPerS: failed.length > 0 ? Math.min(...failed) : null }
}

const p99s = (ds: ReadonlyArray<Distribution | null>): number[] =>
  ds.flatMap((d) => (d?.p99 === null || d?.p99 === undefined ? [] : [d.p99]))
const spread = (xs: readonly number[]): string =>
  xs.length === 0 ? '–' : `${median(xs).toFixed(3)} ms [${Math.min(...xs).toFixed(3)}–${Math.max(...xs).toFixed(3)}]`

/** The median of the shares known, as a percentage; '–' when none is. */
function medianPercent(shares: ReadonlyArray<number | null>): string {
  const known = shares.filter((v): v is number => v !== null)
  return known.length === 0 ? '–' : percent(median(known))
}

/**
 * The C = 1 section: each client's ITL error p99 and its own error p99 (each gap against the
 * server's actual send gap), median [min–max] over its runs. The own error is judged, against the
 * vLLM-style client's median on the same server where it ran, else against the external figure:
 * the server's lateness differs from run to run, and would judge whichever client ran in a late one.
 */
function renderPrecision(p: PrecisionReport): string[] {
  const pyOwn = p.python === null ? [] : p99s(p.python.runs.map((r) => r.clientErrorMs))
  const target = pyOwn.length > 0 ? median(pyOwn) : C1_ITL_P99_EXTERNAL_MS
  const targetText =
    pyOwn.length > 0
      ? `the vLLM-style client's median here, ${target.toFixed(3)} ms`
      : `${C1_ITL_P99_EXTERNAL_MS} ms (external: no Python client here)`
  const out = [
    `## ITL precision at C = 1 (${LADDER_INTERVAL_MS} ms a chunk, the cell path, runs alternated on one paced server)`,
    '',
    `Target: the client's own error p99 ≤ ${targetText}. vLLM's client gave ${C1_ITL_P99_EXTERNAL_MS} ms ITL error p99 on the quiet machine of the external measurement.`,
    '',
    "The ITL error is each gap against the schedule; the client's own error is each gap against the gap the server actually sent it with " +
      "(from the server's lateness, chunk by chunk), so a run in which the server was late does not count against the client that ran then. " +
      "Host steal is the share of the machine's CPU time the hypervisor gave to other guests during a run (`/proc/stat`). " +
      'A chunk due in a stolen slice is read late by what is left of the slice, in any client: on a virtual machine that shares its cores, ' +
      'the p99 can follow the steal more than the client.',
    '',
    "| client | runs | ITL error p50 | ITL error p99 | client's own error p99 | vs target | server late p99 (max of runs) | host steal (median) |",
    '|---|--:|--:|--:|--:|---|--:|--:|',
  ]
  for (const workers of [...new Set(p.runs.map((r) => r.workers))]) {
    const runs = p.runs.filter((r) => r.workers === workers)
    const late = Math.max(...runs.map((r) => r.server.lateP99Ms ?? Infinity))
    const itl = p99s(runs.map((r) => r.run.itlErrorMs))
    const own = p99s(runs.map((r) => r.clientErrorMs))
    const p50 = median(runs.map((r) => r.run.itlErrorMs?.p50 ?? Infinity))
    out.push(
      `| servegate, ${workers === 0 ? "cell's thread" : `${workers} worker`} | ${runs.length} | ${p50.toFixed(3)} ms | ${spread(itl)} | ${spread(own)} | ` +
        `${own.length > 0 && median(own) <= target ? 'met' : '**not met**'} | ${ms(late, 3)}${runs.every((r) => r.serverOnTime) ? '' : ' (late: its ITL error holds the server’s lateness)'} | ` +
        `${medianPercent(runs.map((r) => r.run.harness.hostStealShare ?? null))} |`,
    )
  }
  if (p.python !== null) {
    const late = Math.max(...p.python.runs.map((r) => r.server.lateP99Ms ?? Infinity))
    const p50 = median(p.python.runs.map((r) => r.itlErrorMs.p50 ?? Infinity))
    const itl = p99s(p.python.runs.map((r) => r.itlErrorMs))
    out.push(
      `| vLLM-style (Python ${p.python.python}, aiohttp ${p.python.aiohttp}) | ${p.python.runs.length} | ${p50.toFixed(3)} ms | ${spread(itl)} | ${spread(pyOwn)} | (the target) | ${ms(late, 3)} | ` +
        `${medianPercent(p.python.runs.map((r) => r.hostStealShare))} |`,
    )
  }
  out.push('')
  return out
}

/** The cell-path sections of the bench:client report, as Markdown. */
export function renderCellBench(r: CellBenchReport): string {
  const out: string[] = []
  if (r.memory !== null) {
    out.push('## Memory per stream (the cell path, compiled package, a fresh process per figure)', '')
    out.push(
      `Peak RSS under the Node flags the plugin gives \`vitest bench\`'s workers (\`${BENCH_WORKER_NODE_FLAGS.join(' ')}\`), median of its runs; ` +
        'plain `node` beside it (the CLI, or a `threads` pool).',
      '',
      '| shape | peak RSS (runs) | target | plain node | heap after GC |',
      '|---|--:|--:|--:|--:|',
    )
    for (const p of r.memory.peaks) {
      out.push(
        `| ${p.label} | ${p.workerFlagsMB.toFixed(0)} MB (${p.workerFlagsRunsMB.map((v) => v.toFixed(0)).join(', ')}) | ` +
          `≤ ${p.targetMB} MB (${mark(p.workerFlagsMB <= p.targetMB)}) | ${p.defaultMB.toFixed(0)} MB | ${p.heapAfterGcMB?.toFixed(1) ?? '–'} MB |`,
      )
    }
    const k = r.memory.retained
    const spilled = k.spilledBytesPerRequest
    out.push(
      '',
      `Retained per finished request (C = ${k.concurrency} × ${k.tokens} tokens; in one process after a warm-up cell, the heap after GC grown by ${k.requests[1]} more finished requests beside ${k.requests[0]}): ` +
        `${spilled === null ? '–' : spilled < 0 ? `0 B (the heap shrank by ${(-spilled).toFixed(0)} B a request: noise)` : `${spilled.toFixed(0)} B`} spilled to disk (target ≤ ${RETAINED_TARGET_BYTES} B: ${mark(spilled !== null && spilled <= RETAINED_TARGET_BYTES)}), ` +
        `${k.inMemoryBytesPerRequest?.toFixed(0) ?? '–'} B with the records in memory (a vitest cell: each keeps its ITL array).`,
      '',
    )
  }
  if (r.conversation !== undefined && r.conversation !== null) {
    out.push(
      `## Conversations beside single turns (C = ${CONVERSATION_RUNG.sessions}, ${LADDER_INTERVAL_MS} ms a chunk, a fresh process each)`,
      '',
      '| rung | delivered | ITL error p50 | ITL error p99 | peak RSS | server late p99 |',
      '|---|--:|--:|--:|--:|--:|',
      ...r.conversation.map(
        (c) =>
          `| ${c.label} | ${(c.run.deliveredShare * 100).toFixed(1)}% | ${ms(c.run.itlErrorMs?.p50)} | ${ms(c.run.itlErrorMs?.p99)} | ` +
          `${c.run.peakRssMB.toFixed(0)} MB | ${ms(c.server.lateP99Ms)} |`,
      ),
      '',
    )
  }
  if (r.precision !== null) out.push(...renderPrecision(r.precision))
  if (r.ladder !== null) {
    out.push(
      `## Scale ladder (${LADDER_INTERVAL_MS} ms a chunk; a rung holds at ≥ ${RUNG_DELIVERED * 100}% delivered, ITL error p99 ≤ ${RUNG_ITL_P99_MS} ms, server late p99 ≤ ${SERVER_ON_TIME_P99_MS} ms)`,
      '',
      ...(r.ladderServerCpus === undefined ? [] : [`The server: ${ladderServerText(r.ladderServerCpus)}.`, '']),
      '| workers | C | delivered | ITL error p99 | chunks/s per thread | server late p99 | host steal | holds |',
      '|--:|--:|--:|--:|--:|--:|--:|---|',
    )
    // By worker count in the order measured, then by C: bisected rungs sit between the doublings.
    const ladder = r.ladder
    const counts = [...new Set(ladder.map((p) => p.workers))]
    const rows = counts.flatMap((w) => ladder.filter((p) => p.workers === w).sort((a, b) => a.concurrency - b.concurrency))
    for (const p of rows) {
      out.push(
        `| ${p.workers} | ${p.concurrency} | ${(p.run.deliveredShare * 100).toFixed(1)}% | ${ms(p.run.itlErrorMs?.p99)} | ` +
          `${Math.round(p.run.chunksPerSPerWorker)} | ${ms(p.server.lateP99Ms)} | ${percent(p.run.harness.hostStealShare ?? null)} | ` +
          `${p.holds ? 'yes' : p.serverOnTime ? 'no' : 'no (server late)'} |`,
      )
    }
    out.push('')
    for (const w of counts) {
      const best = r.ladder.filter((p) => p.workers === w && p.holds).map((p) => p.concurrency)
      out.push(`- ${w} workers: highest C that held: ${best.length === 0 ? 'none' : Math.max(...best)}`)
    }
    const cap = perThreadCapacity(r.ladder)
    const offered = offeredPerThread(2048, 1)
    const need = (perS: number): number => Math.ceil(offered / perS)
    const thread = (workers: number): string => (workers === 0 ? "the cell's thread" : `${workers} workers`)
    const runners = (has: (threads: number) => string): string =>
      `which a 16-core runner (engine ≈ 10 cores for TP 8, 'auto' gives up to 5) ${has(5)} and a 64-core runner (up to 16) ${has(16)}.`
    if (cap !== null && cap.chunksPerS === null && cap.failedAtChunksPerS !== null) {
      // Capacity below the offer: C = 2048 needs more threads than the offer implies.
      const least = Math.floor(offered / cap.failedAtChunksPerS) + 1
      out.push(
        `- Per streaming thread here (${thread(cap.workers)}): no rung held; one that offered ${Math.round(cap.failedAtChunksPerS)} chunk arrivals/s a thread ` +
          `did not hold with the server on time, so its capacity within ${RUNG_ITL_P99_MS} ms p99 is below that. ` +
          `C = 2048 at ${LADDER_INTERVAL_MS} ms is ${offered} chunks/s: at least ${least} worker threads, ` +
          runners((threads) => (least <= threads ? 'may have' : 'does not have')),
      )
    } else if (cap !== null && cap.chunksPerS !== null) {
      const most = need(cap.chunksPerS)
      const least = cap.failedAtChunksPerS === null ? null : need(cap.failedAtChunksPerS)
      const range = least === null || least === most ? `about ${most}` : `${least} to ${most}`
      const has = (threads: number): string =>
        most <= threads ? 'has' : least !== null && least <= threads ? 'may have (within the range)' : 'does not have'
      out.push(
        `- Per streaming thread here (${thread(cap.workers)}): ${Math.round(cap.chunksPerS)} chunk arrivals/s${cap.held ? ' at a rung that held' : ' (at a rung only the server failed: a lower bound)'}` +
          `${cap.failedAtChunksPerS === null ? '' : `; a rung that offered ${Math.round(cap.failedAtChunksPerS)} a thread did not hold, so its capacity within ${RUNG_ITL_P99_MS} ms p99 lies between`}. ` +
          `C = 2048 at ${LADDER_INTERVAL_MS} ms is ${offered} chunks/s: ${range} worker threads, ` +
          runners(has),
      )
    }
    out.push('')
  }
  return out.join('\n')
}
