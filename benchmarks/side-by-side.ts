/**
 * `node benchmarks/side-by-side.ts [--quick] [--json FILE]`: `servegate run`, the real CLI, beside
 * an independent Python client that times streams the way `vllm bench serve` does
 * (`benchmarks/python/aiohttp_client.py`), against the same bench servers, each client's inter-token
 * gaps judged against the gaps the server actually sent.
 *
 * Method: the servers on a CPU of their own, both clients pinned to another (the same one); per
 * figure the runs go A B B A A B… (A = servegate, B = Python), `repeats` of each; every figure is
 * the median [min–max] of its runs.
 *
 * - ITL: the paced server (one chunk every 10 ms per stream, absolute schedule) logs per request
 *   the sha256 of the body it received and each chunk's actual send time (`paced.ts --log`). A
 *   servegate request is matched to it by the record's `wireSha256` (the sha256 of the body bytes
 *   handed to the socket, the head not included), a Python request by the sha256 of the body
 *   aiohttp sent (`json.dumps(payload)`). Per run, over every consecutive pair of content chunks of
 *   every matched request: |client gap − server send gap|, mean and nearest-rank p99, and the first
 *   gap's signed mean (client's first gap − server's first send gap). servegate's send lag p99
 *   (nearest-rank over the record's `sendLagMs`) and its `harness` verdict come from the record.
 * - Ingest: the zero-delay server writing one SSE event per socket write, and 16; output tok/s
 *   and CPU s per 1M tokens. servegate's side is its streaming client in this process
 *   (`measureIngest`), not the CLI: a run of a second would measure the CLI's start-up.
 * - Peak RSS: `servegate run` as installed (this checkout built to `dist/`, `stageBuiltCli`; the
 *   ITL runs use it too), VmHWM of the image that ran the cell, under the bench workers' V8
 *   flags, and the Python client (its own VmHWM), fresh processes against the zero-delay server;
 *   the record's bytes on disk per completion token it holds.
 */
import { mkdtemp, rm } from 'node:fs/promises'
import { availableParallelism, tmpdir } from 'node:os'
import { join } from 'node:path'
import { writeFile } from 'node:fs/promises'
import { fileURLToPath } from 'node:url'
import { parseArgs } from 'node:util'
import { execa } from 'execa'
import { nearestRank } from '../src/metrics/distribution.ts'
import { formatSignificant } from '../src/number-format.ts'
import { warmClientJit } from '../src/runner/warm.ts'
import { runServegateCli, stageBuiltCli } from './cli-run.ts'
import { ingestRequests } from './client-bench.ts'
import { pinToCpu, serverCpu } from './cpu.ts'
import { type IngestOptions, type IngestResult, measureIngest } from './ingest.ts'
import { findPythonClient, type PythonClient, runPythonIngest, runPythonItl } from './python-client.ts'
import { median } from './report.ts'
import { type ClientGaps, type GapErrors, gapErrors, takeSendLog } from './send-truth.ts'
import { startServerProcess } from './servers/spawn.ts'

const INGEST_LEVELS = [1, 16, 64, 256] as const
const EVENTS_PER_WRITE = [1, 16] as const
const INTERVAL_MS = 10
const INGEST_TOKENS = 1000
const DEADLINE_MS = 60_000

/** One ITL level: `concurrency` streams of `chunks` chunks, `rounds` requests per slot, closed loop. */
export interface ItlLevelPlan {
  concurrency: number
  chunks: number
  rounds: number
}

/** One peak-RSS figure: a fresh client process running `requests` of `tokens` at `concurrency`. */
export interface RssCase {
  concurrency: number
  tokens: number
  requests: number
}

/** Run sizes; `--quick` shrinks them to a smoke run. */
export interface SideBySidePlan {
  quick: boolean
  /** Runs per client per figure, in the order A B B A A B… */
  repeats: number
  itl: ItlLevelPlan[]
  ingestLevels: readonly number[]
  /** Wall time each servegate ingest run should last at the warm-up's rate, s (Python's last longer). */
  ingestRunS: number
  rss: RssCase[]
}

export function sideBySidePlan(quick: boolean): SideBySidePlan {
  return quick
    ? {
        quick,
        repeats: 1,
        itl: [
          { concurrency: 1, chunks: 20, rounds: 2 },
          { concurrency: 64, chunks: 20, rounds: 1 },
          { concurrency: 256, chunks: 20, rounds: 1 },
        ],
        ingestLevels: [1, 16],
        ingestRunS: 0.05,
        rss: [
          { concurrency: 1, tokens: 1000, requests: 2 },
          { concurrency: 256, tokens: 100, requests: 256 },
        ],
      }
    : {
        quick,
        repeats: 3,
        itl: [
          // 20 requests, so the p99 is the 20th largest of 1980 gaps: over 6 it was the 6th of 594,
          // and one stall of the VM that hit a few gaps moved it 4× between runs.
          { concurrency: 1, chunks: 100, rounds: 20 },
          { concurrency: 64, chunks: 100, rounds: 4 },
          { concurrency: 256, chunks: 100, rounds: 4 },
        ],
        ingestLevels: INGEST_LEVELS,
        ingestRunS: 0.8,
        rss: [
          { concurrency: 1, tokens: 1000, requests: 20 },
          { concurrency: 256, tokens: 1000, requests: 512 },
          { concurrency: 1024, tokens: 200, requests: 1024 },
        ],
      }
}

/** A figure over runs: the median (lower middle for an even count) and the range. */
export interface Figure {
  median: number
  min: number
  max: number
  runs: number[]
}

/** The figure of the runs that have a value; null when none has. */
export function figure(runs: ReadonlyArray<number | null>): Figure | null {
  const values = runs.filter((v): v is number => v !== null && Number.isFinite(v))
  if (values.length === 0) return null
  return { median: median(values), min: Math.min(...values), max: Math.max(...values), runs: values }
}

/** The same figure for both clients. */
export interface Pair<T> {
  servegate: T
  python: T
}

/** servegate's median over Python's; null where either is missing. */
function ratio(pair: Pair<Figure | null>): number | null {
  return pair.servegate === null || pair.python === null || pair.python.median === 0 ? null : pair.servegate.median / pair.python.median
}

export interface ItlComparison extends ItlLevelPlan {
  intervalMs: number
  /** Requests per run. */
  requests: number
  /** Per run: mean of |client gap − server's actual send gap|, ms. */
  errorMeanMs: Pair<Figure | null>
  /** Per run: nearest-rank p99 of the same, ms. */
  errorP99Ms: Pair<Figure | null>
  /** Per run: mean of (client's first gap − server's first send gap), ms. */
  firstGapSignedMeanMs: Pair<Figure | null>
  /** The lowest share of a run's requests matched to the send log. */
  matchedShareMin: Pair<number>
  /** The fewest gaps a run compared. */
  gapsMin: Pair<number>
  /** Per run: the client's CPU over wall time (servegate: the record's `harness.clientCpuShare`). */
  cpuShare: Pair<Figure | null>
  /** servegate only, per run: nearest-rank p99 of the record's `sendLagMs`, ms. */
  sendLagP99Ms: Figure | null
  /**
   * servegate only, per run: the same over the sends after the opening round (each due alone, as
   * the harness verdict judges them), and the opening round's last send lag
   * (`harness.openingSendLagMaxMs`: the C sends due at one instant took that long to go out), ms.
   * Absent in reports written before.
   */
  sendLagAfterOpeningP99Ms?: Figure | null
  openingSendLagMaxMs?: Figure | null
  /** servegate only: each run's `harness.harnessLimited`, and the reasons of the first run that was. */
  harnessLimited: boolean[]
  harnessReasons: string[]
}

export interface IngestComparison {
  /** SSE events per socket write of the zero-delay server. */
  eventsPerWrite: number
  concurrency: number
  tokens: number
  requests: number
  tokPerS: Pair<Figure | null>
  /** Client process CPU time per million completion tokens, s. */
  cpuSPerMTok: Pair<Figure | null>
  allOk: Pair<boolean>
}

export interface RssComparison extends RssCase {
  peakRssMB: Pair<Figure | null>
  /** servegate's `--out` record on disk over the completion tokens it holds, bytes. */
  recordBytesPerToken: Figure | null
}

export interface SideBySideReport {
  startedAt: string
  quick: boolean
  cpus: number
  /** CPU of the bench servers and of both clients; null where the machine has one CPU (unpinned). */
  serverCpu: number | null
  clientCpu: number | null
  /** Runs behind each figure, per client. */
  runsPerFigure: number
  /** What ran as servegate, per section. */
  servegateSide: { itl: string; ingest: string; rss: string }
  versions: { node: string; python: string; aiohttp: string; numpy: string; pythonExecutable: string }
  itl: ItlComparison[]
  ingest: IngestComparison[]
  rss: RssComparison[]
  wallS: number
  /** Runs with a failed request or an unmatched one: `client section run: what`. */
  failures: string[]
}

export interface SideBySideOptions {
  quick?: boolean
  /** Default: `findPythonClient()`, and an error when it finds none. */
  python?: PythonClient
  log?: (line: string) => void
  signal?: AbortSignal
}

/** A B B A A B…: which client runs i-th, `repeats` runs each. */
export function abba(repeats: number): Array<keyof Pair<unknown>> {
  const order: Array<keyof Pair<unknown>> = []
  for (let i = 0; i < 2 * repeats; i++) order.push(i % 4 === 0 || i % 4 === 3 ? 'servegate' : 'python')
  return order
}

async function affinityMask(pid: number): Promise<string | null> {
  const result = await execa('taskset', ['-p', String(pid)], { reject: false, stdin: 'ignore' })
  return /mask:\s*([0-9a-f,]+)/i.exec(String(result.stdout))?.[1] ?? null
}

/**
 * Pins this process (all its threads) to `cpu`.
 * @returns a function that restores the affinity it had, or null where pinning failed
 */
async function pinSelf(cpu: number): Promise<(() => Promise<void>) | null> {
  const before = await affinityMask(process.pid)
  if (before === null || !(await pinToCpu(process.pid, cpu))) return null
  return async () => {
    await execa('taskset', ['-a', '-p', before, String(process.pid)], { reject: false, stdin: 'ignore' })
  }
}

interface Context {
  plan: SideBySidePlan
  py: PythonClient
  cpus: { server: number | null; client: number | null }
  dir: string
  /** `servegate run` built and laid out as installed (`stageBuiltCli`). */
  bin: string
  failures: string[]
  log: (line: string) => void
  signal: AbortSignal | undefined
}

/** One ITL run's figures for one client. */
interface ItlRun {
  errors: GapErrors
  cpuShare: number | null
  failed: number
  sendLagP99Ms: number | null
  sendLagAfterOpeningP99Ms: number | null
  openingSendLagMaxMs: number | null
  harnessLimited: boolean | null
  harnessReasons: string[]
}

function noteItl(ctx: Context, label: string, run: ItlRun): void {
  const unmatched = run.errors.requests - run.errors.matched
  if (run.failed > 0 || unmatched > 0 || run.errors.incomplete > 0) {
    ctx.failures.push(`${label}: ${run.failed} failed, ${unmatched} unmatched, ${run.errors.incomplete} incomplete`)
  }
}

async function servegateItl(ctx: Context, origin: string, level: ItlLevelPlan): Promise<ItlRun> {
  const run = await runServegateCli({
    bin: ctx.bin,
    origin,
    concurrency: level.concurrency,
    requests: level.concurrency * level.rounds,
    warmup: level.concurrency,
    maxTokens: level.chunks,
    out: join(ctx.dir, `itl-${level.concurrency}.json`),
    cpu: ctx.cpus.client,
    ...(ctx.signal === undefined ? {} : { signal: ctx.signal }),
  })
  if (run.exitCode !== 0) throw new Error(`servegate run (ITL C=${level.concurrency}) exited ${run.exitCode}\n${run.stderrTail}`)
  const sendLog = await takeSendLog(origin)
  const requests = run.record.requests
  const gaps: ClientGaps[] = requests.filter((r) => r.status === 'ok').map((r) => ({ sha256: r.wireSha256, gapsMs: r.itlMs ?? [] }))
  const lags = Float64Array.from(requests.flatMap((r) => (r.sendLagMs === null ? [] : [r.sendLagMs]))).sort()
  // The opening round: the first C requests sent.
  const after = Float64Array.from(
    [...requests]
      .sort((a, b) => (a.startOffsetMs ?? Infinity) - (b.startOffsetMs ?? Infinity))
      .slice(level.concurrency)
      .flatMap((r) => (r.sendLagMs === null ? [] : [r.sendLagMs])),
  ).sort()
  const h = run.record.harness
  return {
    errors: gapErrors(gaps, sendLog),
    cpuShare: h.clientCpuShare,
    failed: requests.length - gaps.length,
    sendLagP99Ms: lags.length === 0 ? null : nearestRank(lags, 99),
    sendLagAfterOpeningP99Ms: after.length === 0 ? null : nearestRank(after, 99),
    openingSendLagMaxMs: h.openingSendLagMaxMs ?? null,
    harnessLimited: h.harnessLimited,
    harnessReasons: h.reasons,
  }
}

async function pythonItl(ctx: Context, origin: string, level: ItlLevelPlan): Promise<ItlRun> {
  const run = await runPythonItl(ctx.py, {
    origin,
    intervalMs: INTERVAL_MS,
    ...level,
    detail: true,
    cpu: ctx.cpus.client,
    ...(ctx.signal === undefined ? {} : { signal: ctx.signal }),
  })
  const sendLog = await takeSendLog(origin)
  return {
    errors: gapErrors(run.requestsDetail ?? [], sendLog),
    cpuShare: run.cpuShare,
    failed: run.requests - run.okRequests,
    sendLagP99Ms: null,
    sendLagAfterOpeningP99Ms: null,
    openingSendLagMaxMs: null,
    harnessLimited: null,
    harnessReasons: [],
  }
}

async function compareItl(ctx: Context): Promise<ItlComparison[]> {
  const sends = join(ctx.dir, 'sends.jsonl')
  const server = await startServerProcess('paced', ['--interval-ms', String(INTERVAL_MS), '--log', sends], { cpu: ctx.cpus.server })
  try {
    const levels: ItlComparison[] = []
    for (const level of ctx.plan.itl) {
      const runs: Pair<ItlRun[]> = { servegate: [], python: [] }
      for (const [i, client] of abba(ctx.plan.repeats).entries()) {
        const run = client === 'servegate' ? await servegateItl(ctx, server.origin, level) : await pythonItl(ctx, server.origin, level)
        runs[client].push(run)
        noteItl(ctx, `${client} ITL C=${level.concurrency} run ${i + 1}`, run)
        const e = run.errors
        ctx.log(
          `  ITL C=${level.concurrency} ${client}: error mean ${formatSignificant(e.errorMeanMs)} ms, p99 ${formatSignificant(e.errorP99Ms)} ms, ` +
            `first gap ${formatSignificant(e.firstGapSignedMeanMs)} ms, ${e.matched}/${e.requests} matched` +
            (run.sendLagP99Ms === null ? '' : `, send lag p99 ${formatSignificant(run.sendLagP99Ms)} ms`) +
            `; worst (request.gap) ${e.worst.map((w) => `${formatSignificant(w.errorMs)}@${w.request}.${w.gap}`).join(' ')}`,
        )
      }
      const of = (pick: (r: ItlRun) => number | null): Pair<Figure | null> => ({
        servegate: figure(runs.servegate.map(pick)),
        python: figure(runs.python.map(pick)),
      })
      const lowest = (pick: (r: ItlRun) => number): Pair<number> => ({
        servegate: Math.min(...runs.servegate.map(pick)),
        python: Math.min(...runs.python.map(pick)),
      })
      levels.push({
        ...level,
        intervalMs: INTERVAL_MS,
        requests: level.concurrency * level.rounds,
        errorMeanMs: of((r) => r.errors.errorMeanMs),
        errorP99Ms: of((r) => r.errors.errorP99Ms),
        firstGapSignedMeanMs: of((r) => r.errors.firstGapSignedMeanMs),
        matchedShareMin: lowest((r) => r.errors.matched / Math.max(1, r.errors.requests + r.failed)),
        gapsMin: lowest((r) => r.errors.gaps),
        cpuShare: of((r) => r.cpuShare),
        sendLagP99Ms: figure(runs.servegate.map((r) => r.sendLagP99Ms)),
        sendLagAfterOpeningP99Ms: figure(runs.servegate.map((r) => r.sendLagAfterOpeningP99Ms)),
        openingSendLagMaxMs: figure(runs.servegate.map((r) => r.openingSendLagMaxMs)),
        harnessLimited: runs.servegate.map((r) => r.harnessLimited === true),
        harnessReasons: runs.servegate.find((r) => r.harnessLimited === true)?.harnessReasons ?? [],
      })
    }
    return levels
  } finally {
    await server.close()
  }
}

function noteIngest(ctx: Context, label: string, run: IngestResult): void {
  if (run.okRequests < run.requests) ctx.failures.push(`${label}: ${run.requests - run.okRequests} failed, e.g. ${run.failures[0] ?? '?'}`)
}

const INGEST_PROCESS = fileURLToPath(new URL('./ingest-process.ts', import.meta.url))

/** One servegate ingest run in a fresh process pinned to the client CPU, as each Python run is. */
async function servegateIngest(ctx: Context, options: IngestOptions): Promise<IngestResult> {
  const argv = [process.execPath, INGEST_PROCESS, JSON.stringify(options)]
  const [file, ...args] = ctx.cpus.client === null ? argv : ['taskset', '-c', String(ctx.cpus.client), ...argv]
  const run = await execa(file as string, args, { ...(ctx.signal === undefined ? {} : { cancelSignal: ctx.signal }) })
  return JSON.parse(run.stdout) as IngestResult
}

/**
 * Ingest from the zero-delay server at `eventsPerWrite`: each run a fresh client process pinned to
 * the client CPU, servegate's (`ingest-process.ts`) and Python's alike; the warm-up that sizes the
 * runs is servegate's client in this process.
 */
async function compareIngest(ctx: Context, eventsPerWrite: number): Promise<IngestComparison[]> {
  const server = await startServerProcess('zeroDelay', ['--events-per-write', String(eventsPerWrite)], { cpu: ctx.cpus.server })
  const restore = ctx.cpus.client === null ? null : await pinSelf(ctx.cpus.client)
  try {
    const base = { origin: server.origin, tokens: INGEST_TOKENS, deadlineMs: DEADLINE_MS }
    // Unmeasured: compiles servegate's per-read paths and sizes the runs.
    const warm = await measureIngest({ ...base, concurrency: 16, requests: ctx.plan.quick ? 16 : 128 })
    const levels: IngestComparison[] = []
    for (const concurrency of ctx.plan.ingestLevels) {
      const requests = ingestRequests(concurrency, warm.tokPerS, INGEST_TOKENS, ctx.plan.ingestRunS)
      const runs: Pair<IngestResult[]> = { servegate: [], python: [] }
      for (const [i, client] of abba(ctx.plan.repeats).entries()) {
        const options = { ...base, concurrency, requests }
        const run =
          client === 'servegate'
            ? await servegateIngest(ctx, options)
            : await runPythonIngest(ctx.py, {
                ...options,
                cpu: ctx.cpus.client,
                ...(ctx.signal === undefined ? {} : { signal: ctx.signal }),
              })
        runs[client].push(run)
        noteIngest(ctx, `${client} ingest ${eventsPerWrite}/write C=${concurrency} run ${i + 1}`, run)
        ctx.log(
          `  ingest ${eventsPerWrite}/write C=${concurrency} ${client}: ${Math.round(run.tokPerS)} tok/s, CPU ${(run.cpuShare * 100).toFixed(0)}%`,
        )
      }
      const cpuPerMTok = (r: IngestResult): number => (r.cpuShare * r.wallS * 1e6) / Math.max(1, r.completionTokens)
      levels.push({
        eventsPerWrite,
        concurrency,
        tokens: INGEST_TOKENS,
        requests,
        tokPerS: { servegate: figure(runs.servegate.map((r) => r.tokPerS)), python: figure(runs.python.map((r) => r.tokPerS)) },
        cpuSPerMTok: { servegate: figure(runs.servegate.map(cpuPerMTok)), python: figure(runs.python.map(cpuPerMTok)) },
        allOk: {
          servegate: runs.servegate.every((r) => r.okRequests === r.requests),
          python: runs.python.every((r) => r.okRequests === r.requests),
        },
      })
    }
    return levels
  } finally {
    await restore?.()
    await server.close()
  }
}

async function compareRss(ctx: Context): Promise<RssComparison[]> {
  const server = await startServerProcess('zeroDelay', [], { cpu: ctx.cpus.server })
  try {
    const figures: RssComparison[] = []
    for (const c of ctx.plan.rss) {
      const runs: Pair<number[]> = { servegate: [], python: [] }
      const bytesPerToken: number[] = []
      for (const [i, client] of abba(ctx.plan.repeats).entries()) {
        const label = `${client} RSS C=${c.concurrency}×${c.tokens} run ${i + 1}`
        if (client === 'servegate') {
          const run = await runServegateCli({
            bin: ctx.bin,
            origin: server.origin,
            concurrency: c.concurrency,
            requests: c.requests,
            warmup: c.concurrency,
            maxTokens: c.tokens,
            out: join(ctx.dir, `rss-${c.concurrency}.json`),
            cpu: ctx.cpus.client,
            sampleRss: true,
            ...(ctx.signal === undefined ? {} : { signal: ctx.signal }),
          })
          const tokens = run.record.metrics.totalCompletionTokens ?? 0
          if (run.exitCode !== 0 || run.record.completed !== c.requests) {
            ctx.failures.push(`${label}: exit ${run.exitCode}, ${run.record.completed}/${c.requests} completed`)
          }
          if (run.peakRssMB !== null) runs.servegate.push(run.peakRssMB)
          if (tokens > 0) bytesPerToken.push(run.recordBytes / tokens)
          ctx.log(
            `  peak RSS C=${c.concurrency}×${c.tokens} servegate run: ${formatSignificant(run.peakRssMB)} MB, ` +
              `record ${run.recordBytes} bytes for ${tokens} tokens`,
          )
        } else {
          const run = await runPythonIngest(ctx.py, {
            origin: server.origin,
            concurrency: c.concurrency,
            requests: c.requests,
            tokens: c.tokens,
            deadlineMs: DEADLINE_MS,
            cpu: ctx.cpus.client,
            ...(ctx.signal === undefined ? {} : { signal: ctx.signal }),
          })
          noteIngest(ctx, label, run)
          runs.python.push(run.peakRssMB)
          ctx.log(`  peak RSS C=${c.concurrency}×${c.tokens} python: ${formatSignificant(run.peakRssMB)} MB`)
        }
      }
      figures.push({
        ...c,
        peakRssMB: { servegate: figure(runs.servegate), python: figure(runs.python) },
        recordBytesPerToken: figure(bytesPerToken),
      })
    }
    return figures
  } finally {
    await server.close()
  }
}

/**
 * Measures `servegate run` and the Python client side by side (see the file's comment for the
 * method): ITL error against the server's actual send gaps at C = 1, 64, 256; ingest at one and at
 * 16 events per write at C = 1, 16, 64, 256; peak RSS and record bytes per token.
 * @throws when no Python with aiohttp and numpy is found, or a server or client process fails
 */
export async function runSideBySide(options: SideBySideOptions = {}): Promise<SideBySideReport> {
  const plan = sideBySidePlan(options.quick ?? false)
  const log = options.log ?? ((): void => {})
  const py = options.python ?? (await findPythonClient())
  if (py === null) {
    throw new Error(
      'side-by-side: no Python with aiohttp and numpy; install python3-aiohttp and python3-numpy, or set SERVEGATE_PYTHON to one',
    )
  }
  const machineCpus = availableParallelism()
  const server = serverCpu()
  // The clients share a CPU that is not the server's: the first one.
  const cpus = { server, client: server === null ? null : 0 }
  const startedAt = new Date()
  const t0 = performance.now()
  const dir = await mkdtemp(join(tmpdir(), 'servegate-side-by-side-'))
  try {
    log('building servegate as it is installed (compiled dist/)…')
    const bin = await stageBuiltCli(join(dir, 'servegate'))
    const ctx: Context = { plan, py, cpus, dir, bin, failures: [], log, signal: options.signal }
    warmClientJit()
    log('ITL error against the server’s actual send gaps, 10 ms/chunk…')
    const itl = await compareItl(ctx)
    log('ingest throughput…')
    const ingest: IngestComparison[] = []
    for (const eventsPerWrite of EVENTS_PER_WRITE) ingest.push(...(await compareIngest(ctx, eventsPerWrite)))
    log('peak RSS and record size, fresh processes…')
    const rss = await compareRss(ctx)
    return {
      startedAt: startedAt.toISOString(),
      quick: plan.quick,
      cpus: machineCpus,
      serverCpu: cpus.server,
      clientCpu: cpus.client,
      runsPerFigure: plan.repeats,
      servegateSide: {
        itl: '`servegate run` built as installed (compiled dist/), a fresh process per run',
        ingest: 'its streaming client in a fresh process of its own (`ingest-process.ts`), not the CLI',
        rss: '`servegate run` built as installed, VmHWM of the process that ran the cell',
      },
      versions: {
        node: process.version,
        python: py.pythonVersion,
        aiohttp: py.aiohttpVersion,
        numpy: py.numpyVersion,
        pythonExecutable: py.executable,
      },
      itl,
      ingest,
      rss,
      wallS: (performance.now() - t0) / 1000,
      failures: ctx.failures,
    }
  } finally {
    await rm(dir, { recursive: true, force: true })
  }
}

const kilo = (v: number): string => `${formatSignificant(v / 1000)}k`
const plain = (v: number): string => formatSignificant(v)
const signed = (v: number): string => `${v > 0 ? '+' : v < 0 ? '−' : ''}${formatSignificant(Math.abs(v))}`

function cell(f: Figure | null, format: (v: number) => string): string {
  if (f === null) return '—'
  return f.min === f.max ? format(f.median) : `${format(f.median)} [${format(f.min)}–${format(f.max)}]`
}

function times(pair: Pair<Figure | null>): string {
  const r = ratio(pair)
  return r === null ? '' : `${formatSignificant(r)}×`
}

/** The report as Markdown: the method, one table row per figure (servegate / Python), failures. */
export function renderSideBySide(r: SideBySideReport): string {
  const rows: string[][] = []
  const row = (label: string, pair: Pair<Figure | null>, format: (v: number) => string, withRatio = true): void => {
    rows.push([label, cell(pair.servegate, format), cell(pair.python, format), withRatio ? times(pair) : ''])
  }
  for (const l of r.itl) row(`ITL error vs server's send gaps, mean, C=${l.concurrency} (ms)`, l.errorMeanMs, plain)
  for (const l of r.itl) row(`ITL error vs server's send gaps, p99, C=${l.concurrency} (ms)`, l.errorP99Ms, plain)
  for (const l of r.itl) row(`first gap, signed mean error, C=${l.concurrency} (ms)`, l.firstGapSignedMeanMs, signed, false)
  for (const l of r.itl) {
    const limited = l.harnessLimited.filter(Boolean).length
    const verdict = `harness-limited in ${limited}/${l.harnessLimited.length} runs${l.harnessReasons.length > 0 ? ` (${l.harnessReasons[0]})` : ''}`
    rows.push([`send lag p99, closed loop, C=${l.concurrency} (ms)`, `${cell(l.sendLagP99Ms, plain)}; ${verdict}`, '—', ''])
  }
  for (const l of r.itl.filter((i) => i.rounds > 1 && i.openingSendLagMaxMs != null)) {
    const after = cell(l.sendLagAfterOpeningP99Ms ?? null, plain)
    rows.push([
      `send lag, C=${l.concurrency}: the opening round's last send; p99 after it (ms)`,
      `${cell(l.openingSendLagMaxMs ?? null, plain)}; ${after}`,
      '—',
      '',
    ])
  }
  for (const l of r.itl) row(`client CPU share during ITL, C=${l.concurrency}`, l.cpuShare, plain)
  for (const l of r.ingest) row(`ingest, ${l.eventsPerWrite} event(s)/write, C=${l.concurrency} × ${l.tokens} tok (tok/s)`, l.tokPerS, kilo)
  for (const l of r.ingest.filter((i) => i.eventsPerWrite === 1))
    row(`CPU per 1M tokens, 1 event/write, C=${l.concurrency} (s)`, l.cpuSPerMTok, plain)
  for (const f of r.rss) row(`peak RSS, C=${f.concurrency} × ${f.tokens} tok, ${f.requests} requests (MB)`, f.peakRssMB, plain)
  for (const f of r.rss) {
    rows.push([`record on disk, C=${f.concurrency} × ${f.tokens} tok (bytes/token)`, cell(f.recordBytesPerToken, plain), '—', ''])
  }
  const matched = r.itl.map(
    (l) => `C=${l.concurrency} ${(l.matchedShareMin.servegate * 100).toFixed(1)}% / ${(l.matchedShareMin.python * 100).toFixed(1)}%`,
  )
  const pinned = r.serverCpu === null ? 'unpinned (one CPU)' : `servers pinned to CPU ${r.serverCpu}, both clients to CPU ${r.clientCpu}`
  const lines = [
    `## \`servegate run\` beside a vLLM-style Python client (${r.startedAt.slice(0, 10)})`,
    '',
    `Method: ${pinned}; runs alternate A B B A A B (A = servegate, B = \`benchmarks/python/aiohttp_client.py\`, ` +
      `timing streams as \`vllm bench serve\` does), ${r.runsPerFigure} run(s) per figure per client, median [min–max]. ` +
      `ITL error: each client's gap between consecutive content chunks against the paced server's actual send gap ` +
      `(its \`--log\`), requests matched by the sha256 of the request body (servegate: the record's \`wireSha256\`); ` +
      `p99 nearest-rank. servegate: ITL and RSS ${r.servegateSide.itl}; ingest ${r.servegateSide.ingest}. ` +
      `${r.cpus} CPUs, ${r.wallS.toFixed(0)} s${r.quick ? ', quick smoke run' : ''}.`,
    `Versions: Node ${r.versions.node}, Python ${r.versions.python}, aiohttp ${r.versions.aiohttp}, numpy ${r.versions.numpy}.`,
    `Requests matched to the server's log (lowest run, servegate / Python): ${matched.join(', ')}.`,
    '',
    '| figure | servegate | Python (aiohttp) | servegate / Python |',
    '|---|--:|--:|--:|',
    ...rows.map((cells) => `| ${cells.join(' | ')} |`),
  ]
  if (r.failures.length > 0)
    lines.push('', `Runs with failed or unmatched requests (${r.failures.length}):`, ...r.failures.map((f) => `- ${f}`))
  return lines.join('\n')
}

async function main(): Promise<void> {
  const { values, positionals } = parseArgs({
    allowPositionals: true,
    options: { quick: { type: 'boolean', default: false }, json: { type: 'string' } },
  })
  if (positionals.length > 0) throw new Error(`side-by-side: unknown argument ${positionals[0]}; usage: [--quick] [--json FILE]`)
  const report = await runSideBySide({ quick: values.quick, log: (line) => console.error(line) })
  console.log(`\n${renderSideBySide(report)}`)
  if (values.json !== undefined) {
    await writeFile(values.json, `${JSON.stringify(report, null, 2)}\n`)
    console.error(`figures written to ${values.json}`)
  }
  if (report.failures.length > 0) process.exitCode = 1
}

if (import.meta.main) {
  main().catch((error: unknown) => {
    console.error(error)
    process.exitCode = 1
  })
}
