/**
 * `node benchmarks/side-by-side.ts [--quick] [--json FILE]`: servegate's streaming client beside
 * an independent Python client that times streams the way `vllm bench serve` does
 * (`benchmarks/python/aiohttp_client.py`), against the same pinned bench server, so the ratios
 * of the external measurement in `report.ts` (`SIDE_BY_SIDE_WITH_VLLM`) can be rerun here.
 *
 * Method: the server on a CPU of its own, both clients pinned to another; per level the runs go
 * A B B A (A = servegate in this process, B = Python in a fresh process), `cycles` times; each
 * figure is the median [min–max] of its runs. Peak RSS is of a fresh process on both sides.
 */
import { writeFile } from 'node:fs/promises'
import { availableParallelism } from 'node:os'
import { fileURLToPath } from 'node:url'
import { parseArgs } from 'node:util'
import { execa } from 'execa'
import { formatSignificant } from '../src/number-format.ts'
import { warmClientJit } from '../src/runner/warm.ts'
import { ingestRequests } from './client-bench.ts'
import { pinToCpu, serverCpu } from './cpu.ts'
import { type IngestResult, measureIngest } from './ingest.ts'
import { type ItlResult, measureItl } from './itl.ts'
import { findPythonClient, type PythonClient, runPythonIngest, runPythonItl } from './python-client.ts'
import { peakRssMB } from './peak-rss.js'
import { median } from './report.ts'
import { startServerProcess } from './servers/spawn.ts'

const SCRIPT = fileURLToPath(import.meta.url)
const INGEST_LEVELS = [1, 16, 64, 256] as const
const ITL_LEVELS = [1, 64, 256] as const
const INTERVAL_MS = 10
const INGEST_TOKENS = 1000
const DEADLINE_MS = 60_000

/** One peak-RSS figure: a fresh client process running `requests` of `tokens` at `concurrency`. */
export interface RssCase {
  concurrency: number
  tokens: number
  requests: number
}

/** Run sizes; `--quick` shrinks them to a smoke run. */
export interface SideBySidePlan {
  quick: boolean
  /** A B B A repeats per level: each figure has 2 × cycles runs. */
  cycles: number
  /** Wall time each servegate ingest run should last at the warm-up's rate, s (Python's last longer). */
  ingestRunS: number
  itlChunks: number
  itlRounds: (concurrency: number) => number
  rss: RssCase[]
}

export function sideBySidePlan(quick: boolean): SideBySidePlan {
  return quick
    ? {
        quick,
        cycles: 1,
        ingestRunS: 0.05,
        itlChunks: 50,
        itlRounds: () => 1,
        rss: [
          { concurrency: 1, tokens: 1000, requests: 4 },
          { concurrency: 256, tokens: 1000, requests: 256 },
          { concurrency: 1024, tokens: 200, requests: 1024 },
        ],
      }
    : {
        quick,
        cycles: 2,
        ingestRunS: 0.8,
        itlChunks: 200,
        itlRounds: (c) => (c === 256 ? 2 : 3),
        rss: [
          { concurrency: 1, tokens: 1000, requests: 200 },
          { concurrency: 256, tokens: 1000, requests: 512 },
          { concurrency: 1024, tokens: 200, requests: 2048 },
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

export function figure(runs: readonly number[]): Figure {
  return { median: median(runs), min: Math.min(...runs), max: Math.max(...runs), runs: [...runs] }
}

/** The same figure for both clients. */
export interface Pair<T> {
  servegate: T
  python: T
}

export interface IngestComparison {
  concurrency: number
  tokens: number
  requests: number
  tokPerS: Pair<Figure>
  /** Client process CPU time per million completion tokens, s. */
  cpuSPerMTok: Pair<Figure>
  /** servegate's median tok/s over Python's. */
  tokPerSRatio: number
  allOk: Pair<boolean>
}

export interface ItlComparison {
  concurrency: number
  intervalMs: number
  chunks: number
  rounds: number
  /** Per run: p99 of |client-measured gap − interval|, ms. */
  itlErrorP99Ms: Pair<Figure>
  /** Per run: p99 of |client gap − server send gap|, ms. */
  clientErrorP99Ms: Pair<Figure>
  /** Per run: median of client read time − server send time, ms (small and positive: one clock). */
  arrivalLatencyP50Ms: Pair<Figure>
  /** The lowest delivered share over the runs. */
  deliveredShareMin: Pair<number>
}

export interface RssComparison extends RssCase {
  peakRssMB: Pair<Figure>
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
  versions: { node: string; python: string; aiohttp: string; numpy: string; pythonExecutable: string }
  ingest: IngestComparison[]
  itl: ItlComparison[]
  rss: RssComparison[]
  wallS: number
  /** Runs with a failed request: `client level run: first failure`. */
  failures: string[]
}

export interface SideBySideOptions {
  quick?: boolean
  /** Default: `findPythonClient()`, and an error when it finds none. */
  python?: PythonClient
  log?: (line: string) => void
  signal?: AbortSignal
}

/** A B B A, `cycles` times: which client runs i-th. */
function abba(cycles: number): Array<keyof Pair<unknown>> {
  return Array.from({ length: cycles }, () => ['servegate', 'python', 'python', 'servegate'] as const).flat()
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

function noteFailures(failures: string[], label: string, run: { okRequests: number; requests: number; failures: string[] }): void {
  if (run.okRequests < run.requests) failures.push(`${label}: ${run.requests - run.okRequests} failed, e.g. ${run.failures[0] ?? '?'}`)
}

async function compareIngest(
  plan: SideBySidePlan,
  py: PythonClient,
  cpus: { server: number | null; client: number | null },
  failures: string[],
  log: (line: string) => void,
  signal: AbortSignal | undefined,
): Promise<IngestComparison[]> {
  const server = await startServerProcess('zeroDelay', [], { cpu: cpus.server })
  try {
    const base = { origin: server.origin, tokens: INGEST_TOKENS, deadlineMs: DEADLINE_MS }
    // Unmeasured: compiles servegate's per-read paths and sizes the runs.
    const warm = await measureIngest({ ...base, concurrency: 16, requests: plan.quick ? 16 : 128 })
    const levels: IngestComparison[] = []
    for (const concurrency of INGEST_LEVELS) {
      const requests = ingestRequests(concurrency, warm.tokPerS, INGEST_TOKENS, plan.ingestRunS)
      const runs: Pair<IngestResult[]> = { servegate: [], python: [] }
      for (const [i, client] of abba(plan.cycles).entries()) {
        const options = { ...base, concurrency, requests }
        const run =
          client === 'servegate' ? await measureIngest(options) : await runPythonIngest(py, { ...options, cpu: cpus.client, signal })
        runs[client].push(run)
        noteFailures(failures, `${client} ingest C=${concurrency} run ${i + 1}`, run)
        log(`  ingest C=${concurrency} ${client}: ${Math.round(run.tokPerS)} tok/s, CPU ${(run.cpuShare * 100).toFixed(0)}%`)
      }
      const cpuPerMTok = (r: IngestResult): number => (r.cpuShare * r.wallS * 1e6) / Math.max(1, r.completionTokens)
      const tokPerS = { servegate: figure(runs.servegate.map((r) => r.tokPerS)), python: figure(runs.python.map((r) => r.tokPerS)) }
      levels.push({
        concurrency,
        tokens: INGEST_TOKENS,
        requests,
        tokPerS,
        cpuSPerMTok: { servegate: figure(runs.servegate.map(cpuPerMTok)), python: figure(runs.python.map(cpuPerMTok)) },
        tokPerSRatio: tokPerS.servegate.median / tokPerS.python.median,
        allOk: {
          servegate: runs.servegate.every((r) => r.okRequests === r.requests),
          python: runs.python.every((r) => r.okRequests === r.requests),
        },
      })
    }
    return levels
  } finally {
    await server.close()
  }
}

async function compareItl(
  plan: SideBySidePlan,
  py: PythonClient,
  cpus: { server: number | null; client: number | null },
  failures: string[],
  log: (line: string) => void,
  signal: AbortSignal | undefined,
): Promise<ItlComparison[]> {
  const server = await startServerProcess('paced', ['--interval-ms', String(INTERVAL_MS)], { cpu: cpus.server })
  try {
    const levels: ItlComparison[] = []
    for (const concurrency of ITL_LEVELS) {
      const options = {
        origin: server.origin,
        intervalMs: INTERVAL_MS,
        concurrency,
        chunks: plan.itlChunks,
        rounds: plan.itlRounds(concurrency),
      }
      const runs: Pair<ItlResult[]> = { servegate: [], python: [] }
      for (const [i, client] of abba(plan.cycles).entries()) {
        const run = client === 'servegate' ? await measureItl(options) : await runPythonItl(py, { ...options, cpu: cpus.client, signal })
        runs[client].push(run)
        noteFailures(failures, `${client} ITL C=${concurrency} run ${i + 1}`, run)
        log(
          `  ITL C=${concurrency} ${client}: error p99 ${run.itlErrorMs.p99?.toFixed(3)} ms, ` +
            `delivered ${(run.deliveredShare * 100).toFixed(2)}%`,
        )
      }
      const of = (pick: (r: ItlResult) => number | null): Pair<Figure> => ({
        servegate: figure(runs.servegate.map((r) => pick(r) ?? Number.NaN)),
        python: figure(runs.python.map((r) => pick(r) ?? Number.NaN)),
      })
      levels.push({
        ...options,
        itlErrorP99Ms: of((r) => r.itlErrorMs.p99),
        clientErrorP99Ms: of((r) => r.clientErrorMs.p99),
        arrivalLatencyP50Ms: of((r) => r.arrivalLatencyMs.p50),
        deliveredShareMin: {
          servegate: Math.min(...runs.servegate.map((r) => r.deliveredShare)),
          python: Math.min(...runs.python.map((r) => r.deliveredShare)),
        },
      })
    }
    return levels
  } finally {
    await server.close()
  }
}

/** servegate's side of a peak-RSS figure: `measureIngest` in a fresh Node process (this script's `rss-child` mode). */
async function servegateRss(origin: string, c: RssCase, cpu: number | null, signal: AbortSignal | undefined): Promise<RssChildOutput> {
  const child = execa(process.execPath, [SCRIPT, 'rss-child', origin, String(c.concurrency), String(c.requests), String(c.tokens)], {
    reject: false,
    stdin: 'ignore',
    cleanup: true,
    timeout: (Math.ceil(c.requests / c.concurrency) + 1) * DEADLINE_MS + 30_000,
    forceKillAfterDelay: 2000,
    ...(signal === undefined ? {} : { cancelSignal: signal }),
  })
  if (cpu !== null && child.pid !== undefined) await pinToCpu(child.pid, cpu)
  const result = await child
  if (result.failed)
    throw new Error(`servegate's RSS child (C=${c.concurrency}) failed: ${result.shortMessage}\n${String(result.stderr).slice(-2000)}`)
  return JSON.parse(String(result.stdout)) as RssChildOutput
}

interface RssChildOutput {
  peakRssMB: number
  okRequests: number
  requests: number
  failures: string[]
}

async function compareRss(
  plan: SideBySidePlan,
  py: PythonClient,
  cpus: { server: number | null; client: number | null },
  failures: string[],
  log: (line: string) => void,
  signal: AbortSignal | undefined,
): Promise<RssComparison[]> {
  const server = await startServerProcess('zeroDelay', [], { cpu: cpus.server })
  try {
    const figures: RssComparison[] = []
    for (const c of plan.rss) {
      const runs: Pair<number[]> = { servegate: [], python: [] }
      for (const [i, client] of abba(plan.cycles).entries()) {
        const options = {
          origin: server.origin,
          concurrency: c.concurrency,
          requests: c.requests,
          tokens: c.tokens,
          deadlineMs: DEADLINE_MS,
        }
        const run =
          client === 'servegate'
            ? await servegateRss(server.origin, c, cpus.client, signal)
            : await runPythonIngest(py, { ...options, cpu: cpus.client, signal })
        runs[client].push(run.peakRssMB)
        noteFailures(failures, `${client} RSS C=${c.concurrency}×${c.tokens} run ${i + 1}`, run)
        log(`  peak RSS C=${c.concurrency}×${c.tokens} ${client}: ${run.peakRssMB.toFixed(0)} MB`)
      }
      figures.push({ ...c, peakRssMB: { servegate: figure(runs.servegate), python: figure(runs.python) } })
    }
    return figures
  } finally {
    await server.close()
  }
}

/**
 * Measures servegate's client and the Python client side by side: ingest at C = 1, 16, 64, 256
 * × 1000 tokens, ITL error at 10 ms/chunk at C = 1, 64, 256, and peak RSS of a fresh process at
 * C = 1, 256 × 1000 tokens and 1024 × 200 tokens. This process is pinned to the client CPU for
 * the run and its affinity restored afterwards.
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
  // Both read before this process is pinned: afterwards it sees one CPU.
  const machineCpus = availableParallelism()
  const server = serverCpu()
  // The clients share a CPU that is not the server's: the first one.
  const restore = server === null ? null : await pinSelf(0)
  const cpus = { server, client: restore === null ? null : 0 }
  const startedAt = new Date()
  const t0 = performance.now()
  const failures: string[] = []
  try {
    warmClientJit()
    // ITL first, as in client-bench.ts: the ingest runs grow V8's young generation.
    log('ITL error, 10 ms/chunk…')
    const itl = await compareItl(plan, py, cpus, failures, log, options.signal)
    log('ingest throughput…')
    const ingest = await compareIngest(plan, py, cpus, failures, log, options.signal)
    log('peak RSS, fresh processes…')
    const rss = await compareRss(plan, py, cpus, failures, log, options.signal)
    return {
      startedAt: startedAt.toISOString(),
      quick: plan.quick,
      cpus: machineCpus,
      serverCpu: cpus.server,
      clientCpu: cpus.client,
      runsPerFigure: 2 * plan.cycles,
      versions: {
        node: process.version,
        python: py.pythonVersion,
        aiohttp: py.aiohttpVersion,
        numpy: py.numpyVersion,
        pythonExecutable: py.executable,
      },
      ingest,
      itl,
      rss,
      wallS: (performance.now() - t0) / 1000,
      failures,
    }
  } finally {
    await restore?.()
  }
}

function cell(f: Figure, format: (v: number) => string): string {
  return f.min === f.max ? format(f.median) : `${format(f.median)} [${format(f.min)}–${format(f.max)}]`
}

const kilo = (v: number): string => `${formatSignificant(v / 1000)}k`
const plain = (v: number): string => formatSignificant(v)
const times = (v: number): string => `${formatSignificant(v)}×`

function span(values: readonly number[], format: (v: number) => string): string {
  const lo = Math.min(...values)
  const hi = Math.max(...values)
  return lo === hi ? format(lo) : `${format(lo)}–${format(hi)}`
}

/** The report as Markdown: a summary line, the method, one table row per figure. */
export function renderSideBySide(r: SideBySideReport): string {
  const rows: string[][] = []
  for (const l of r.ingest) {
    rows.push([
      `ingest, C=${l.concurrency} × ${l.tokens} tok (tok/s)`,
      cell(l.tokPerS.servegate, kilo),
      cell(l.tokPerS.python, kilo),
      times(l.tokPerSRatio),
    ])
  }
  for (const l of r.ingest) {
    rows.push([
      `CPU per 1M tokens, C=${l.concurrency} (s)`,
      cell(l.cpuSPerMTok.servegate, plain),
      cell(l.cpuSPerMTok.python, plain),
      times(l.cpuSPerMTok.python.median / l.cpuSPerMTok.servegate.median),
    ])
  }
  for (const l of r.itl) {
    rows.push([
      `ITL error p99, ${l.intervalMs} ms/chunk, C=${l.concurrency} (ms)`,
      cell(l.itlErrorP99Ms.servegate, plain),
      cell(l.itlErrorP99Ms.python, plain),
      times(l.itlErrorP99Ms.python.median / l.itlErrorP99Ms.servegate.median),
    ])
  }
  for (const l of r.itl) {
    rows.push([
      `delivered (lowest run), C=${l.concurrency}`,
      `${(l.deliveredShareMin.servegate * 100).toFixed(2)}%`,
      `${(l.deliveredShareMin.python * 100).toFixed(2)}%`,
      '',
    ])
  }
  for (const f of r.rss) {
    rows.push([
      `peak RSS, C=${f.concurrency} × ${f.tokens} tok (MB)`,
      cell(f.peakRssMB.servegate, plain),
      cell(f.peakRssMB.python, plain),
      times(f.peakRssMB.servegate.median / f.peakRssMB.python.median),
    ])
  }
  const summary =
    r.ingest.length === 0
      ? ''
      : `servegate ingests ${span(
          r.ingest.map((l) => l.tokPerSRatio),
          times,
        )} the Python client's tokens/s; CPU per 1M tokens ${span(
          r.ingest.map((l) => l.cpuSPerMTok.servegate.median),
          plain,
        )} s vs ${span(
          r.ingest.map((l) => l.cpuSPerMTok.python.median),
          plain,
        )} s.`
  const pinned = r.serverCpu === null ? 'unpinned (one CPU)' : `server pinned to CPU ${r.serverCpu}, both clients to CPU ${r.clientCpu}`
  const lines = [
    `## servegate's client beside a vLLM-style Python client (${r.startedAt.slice(0, 10)})`,
    '',
    `Method: the same local bench server for both clients, ${pinned}; per level the runs alternate A B B A ` +
      `(A = servegate in-process, B = \`benchmarks/python/aiohttp_client.py\`, a fresh process timing streams as ` +
      `\`vllm bench serve\` does); ${r.runsPerFigure} runs per figure per client, median [min–max]; peak RSS of a ` +
      `fresh process on both sides. ${r.cpus} CPUs, ${r.wallS.toFixed(0)} s${r.quick ? ', quick smoke run' : ''}.`,
    `Versions: Node ${r.versions.node}, Python ${r.versions.python}, aiohttp ${r.versions.aiohttp}, numpy ${r.versions.numpy}.`,
    '',
    ...(summary === '' ? [] : [summary, '']),
    '| figure | servegate | Python (aiohttp) | ratio |',
    '|---|--:|--:|--:|',
    ...rows.map((cells) => `| ${cells.join(' | ')} |`),
  ]
  if (r.failures.length > 0) lines.push('', `Failed requests (${r.failures.length} runs):`, ...r.failures.map((f) => `- ${f}`))
  return lines.join('\n')
}

/** `rss-child ORIGIN C N T`: one `measureIngest` in this fresh process; prints its peak RSS. */
async function rssChild(args: readonly string[]): Promise<void> {
  const [origin, concurrency, requests, tokens] = args
  if (origin === undefined || tokens === undefined) throw new Error('rss-child: usage rss-child ORIGIN CONCURRENCY REQUESTS TOKENS')
  const run = await measureIngest({
    origin,
    concurrency: Number(concurrency),
    requests: Number(requests),
    tokens: Number(tokens),
    deadlineMs: DEADLINE_MS,
  })
  const output: RssChildOutput = {
    peakRssMB: peakRssMB(),
    okRequests: run.okRequests,
    requests: run.requests,
    failures: run.failures,
  }
  console.log(JSON.stringify(output))
}

async function main(): Promise<void> {
  const { values, positionals } = parseArgs({
    allowPositionals: true,
    options: { quick: { type: 'boolean', default: false }, json: { type: 'string' } },
  })
  if (positionals[0] === 'rss-child') return rssChild(positionals.slice(1))
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
