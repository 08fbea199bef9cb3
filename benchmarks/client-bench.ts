/**
 * `npm run bench:client [-- --quick] [-- --json FILE] [-- --side-by-side]`: how fast and how
 * truthfully the streaming client ingests OpenAI-compatible streams, then the cell path at GPU-
 * runner scale (memory per stream, ITL precision at C = 1, the scale ladder per worker count),
 * and with `--side-by-side` the same server measured by a vLLM-style aiohttp client, A B B A.
 * The ladder's server takes the last CPUs (`ladderServerCpus`; `--ladder-server-cpus N` sets how many);
 * `--ladder-only` runs the ladder alone, `--ladder-workers 0,4,8` picks its worker counts, and
 * `--no-build` takes `dist/` as it is (a machine without the TypeScript compiler).
 * Prints figures with targets beside them; timing never fails the run (shared, noisy machines);
 * a failed ingest request or setup does.
 */
import { writeFile } from 'node:fs/promises'
import { fileURLToPath } from 'node:url'
import { execa } from 'execa'
import { type CellBenchReport, measureConversation, measureLadder, measureMemory, measurePrecision, renderCellBench } from './cell-bench.ts'
import { findPythonClient } from './python-client.ts'
import { renderSideBySide, runSideBySide, type SideBySideReport } from './side-by-side.ts'
import { availableParallelism, loadavg } from 'node:os'
import { parseArgs } from 'node:util'
import { intFlag } from '../src/cli/flags.ts'
import { warmClientJit } from '../src/runner/warm.ts'
import { type IngestResult, measureIngest } from './ingest.ts'
import { ladderServerCpus, serverCpu } from './cpu.ts'
import { measureItl } from './itl.ts'
import { runMicro } from './micro.ts'
import { foreignCpu, wakeLatency } from './noise.ts'
import { type ClientBenchReport, type IngestLevel, ingestLevel, type ItlLevel, judge, renderReport } from './report.ts'
import { startServerProcess } from './servers/spawn.ts'

const INGEST_LEVELS = [1, 16, 64, 256]
const ITL_LEVELS = [1, 64, 256]
const INTERVAL_MS = 10

/** Run sizes; `--quick` shrinks them to a smoke test. */
export interface BenchPlan {
  quick: boolean
  microTimeMs: number
  ingestTokens: number
  ingestRepeats: number
  /** Wall time each measured ingest run should last, at the warm-up's rate, s. */
  ingestRunS: number
  itlChunks: number
  itlRounds: (concurrency: number) => number
  wakeSamples: number
}

export function benchPlan(quick: boolean): BenchPlan {
  return quick
    ? {
        quick,
        microTimeMs: 200,
        ingestTokens: 1000,
        ingestRepeats: 1,
        ingestRunS: 0.05,
        itlChunks: 50,
        itlRounds: () => 1,
        wakeSamples: 100,
      }
    : {
        quick,
        microTimeMs: 1000,
        ingestTokens: 1000,
        ingestRepeats: 3,
        ingestRunS: 0.8,
        itlChunks: 200,
        itlRounds: (c) => (c === 256 ? 2 : 3),
        wakeSamples: 500,
      }
}

/** Requests for a run of about `seconds` at `tokPerS`: whole rounds of C, at least two. */
export function ingestRequests(concurrency: number, tokPerS: number, tokens: number, seconds: number): number {
  const wanted = Math.ceil((tokPerS * seconds) / tokens)
  return Math.max(2, Math.ceil(wanted / concurrency)) * concurrency
}

async function runIngest(plan: BenchPlan, cpu: number | null, log: (line: string) => void): Promise<IngestLevel[]> {
  const server = await startServerProcess('zeroDelay', [], { cpu })
  try {
    const base = { origin: server.origin, tokens: plan.ingestTokens, deadlineMs: 60_000 }
    warmClientJit()
    // Unmeasured: compiles undici's and our per-read paths at a realistic load, and sizes the runs.
    const warm = await measureIngest({ ...base, concurrency: 16, requests: plan.quick ? 16 : 128 })
    const levels: IngestLevel[] = []
    for (const concurrency of INGEST_LEVELS) {
      const requests = ingestRequests(concurrency, warm.tokPerS, plan.ingestTokens, plan.ingestRunS)
      const meter = foreignCpu([server.pid])
      const runs: IngestResult[] = []
      for (let i = 0; i < plan.ingestRepeats; i++) {
        const run = await measureIngest({ ...base, concurrency, requests })
        log(
          `  ingest C=${concurrency} run ${i + 1}: ${Math.round(run.tokPerS)} tok/s, ` +
            `CPU ${(run.cpuShare * 100).toFixed(0)}%, ok ${run.okRequests}/${run.requests}`,
        )
        runs.push(run)
      }
      levels.push(ingestLevel(runs, meter.stop()))
    }
    return levels
  } finally {
    await server.close()
  }
}

async function runItl(
  plan: BenchPlan,
  cpu: number | null,
  log: (line: string) => void,
): Promise<{ levels: ItlLevel[]; serverCpu: number | null }> {
  const server = await startServerProcess('paced', ['--interval-ms', String(INTERVAL_MS)], { cpu })
  try {
    warmClientJit()
    const levels: ItlLevel[] = []
    for (const concurrency of ITL_LEVELS) {
      const meter = foreignCpu([server.pid])
      const result = await measureItl({
        origin: server.origin,
        intervalMs: INTERVAL_MS,
        concurrency,
        chunks: plan.itlChunks,
        rounds: plan.itlRounds(concurrency),
      })
      log(
        `  ITL C=${concurrency}: error p99 ${result.itlErrorMs.p99?.toFixed(3)} ms, delivered ${(result.deliveredShare * 100).toFixed(2)}%`,
      )
      levels.push({ ...result, foreignCpuCores: meter.stop() })
    }
    return { levels, serverCpu: server.cpu }
  } finally {
    await server.close()
  }
}

/** `--ladder-workers 0,4,8`: the worker counts the ladder climbs with; undefined for the default. */
export function ladderWorkerCounts(flag: string | undefined): number[] | undefined {
  if (flag === undefined) return undefined
  const parts = flag.split(',').map((part) => part.trim())
  const counts = parts.map(Number)
  if (parts.some((part) => part === '') || counts.some((n) => !(Number.isInteger(n) && n >= 0))) {
    throw new Error(`--ladder-workers: whole numbers ≥ 0 separated by commas (0: the cell's thread), got ${flag}`)
  }
  return counts
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      quick: { type: 'boolean', default: false },
      json: { type: 'string' },
      'side-by-side': { type: 'boolean', default: false },
      'ladder-server-cpus': { type: 'string' },
      'ladder-only': { type: 'boolean', default: false },
      'ladder-workers': { type: 'string' },
      'no-build': { type: 'boolean', default: false },
    },
  })
  const plan = benchPlan(values.quick)
  // How many CPUs (as many paced processes) the ladder's server takes.
  const ladderCount = intFlag('--ladder-server-cpus', values['ladder-server-cpus'], 1)
  const ladderWorkers = ladderWorkerCounts(values['ladder-workers'])
  const log = (line: string): void => console.error(line)
  const ladderCpus = ladderServerCpus(availableParallelism(), ladderCount)
  // Workers beyond the cell's thread, on the CPUs the ladder's server leaves.
  const clientCpus = ladderCpus[0] ?? availableParallelism()
  const workerCounts = (ladderWorkers ?? [0, 1, 2, 4, 8, 16]).filter((w) => w === 0 || w <= clientCpus - 1)
  // The cell path runs from the compiled package, as a user's vitest worker does.
  const build = async (): Promise<void> => {
    if (values['no-build']) return log('c. the cell path: dist/ as it is (--no-build)…')
    log('c. the cell path: building dist/…')
    await execa(process.execPath, [fileURLToPath(new URL('../scripts/build.ts', import.meta.url))], { stdio: 'inherit' })
  }
  if (values['ladder-only']) {
    await build()
    log(`c3. scale ladder, workers ${workerCounts.join(', ')}…`)
    const ladder = await measureLadder(plan.quick, workerCounts, ladderCpus, log)
    const cellPath: CellBenchReport = { memory: null, precision: null, ladder, ladderServerCpus: ladderCpus }
    console.log(`\n${renderCellBench(cellPath)}`)
    if (values.json !== undefined) {
      const report = { startedAt: new Date().toISOString(), node: process.version, cpus: availableParallelism(), cellPath }
      await writeFile(values.json, `${JSON.stringify(report, null, 2)}\n`)
      log(`figures written to ${values.json}`)
    }
    return
  }
  const startedAt = new Date()
  const loadBefore = loadavg()[0] ?? 0
  const t0 = performance.now()

  // Servers get a CPU of their own (see `pinToCpu`); this process stays free to use any.
  const cpu = serverCpu()

  // ITL first: the ingest and micro parts allocate over 1 GB/s, which grows V8's young
  // generation to ~50 MB, and each scavenge of it then pauses the client for 4–8 ms. A cell's
  // process measures with the heap its own load gives it, not the heap of a throughput test.
  log('b. ITL accuracy…')
  const wakeLateMs = wakeLatency(plan.wakeSamples)
  const itlRun = await runItl(plan, cpu, log)
  log('0. micro-benchmarks…')
  const micro = await runMicro(plan.microTimeMs)
  log('a. ingest throughput…')
  const ingest = await runIngest(plan, cpu, log)
  const itl = itlRun.levels
  await build()
  log('c1. memory per stream…')
  const memory = await measureMemory(plan.quick, cpu, log)
  log('c1b. conversations beside single turns…')
  const conversation = await measureConversation(plan.quick, cpu, log)
  // Beside the vLLM-style client where one is installed (python3-aiohttp, python3-numpy).
  const py = await findPythonClient()
  log(
    `c2. ITL precision at C = 1${py === null ? ' (no Python with aiohttp: against the external figure)' : ', beside the vLLM-style client'}…`,
  )
  const precision = await measurePrecision(plan.quick, cpu, log, py)
  log(`c3. scale ladder, workers ${workerCounts.join(', ')}…`)
  const ladder = await measureLadder(plan.quick, workerCounts, ladderCpus, log)
  const cellPath: CellBenchReport = { memory, conversation, precision, ladder, ladderServerCpus: ladderCpus }
  let sideBySide: SideBySideReport | null = null
  if (values['side-by-side']) {
    log('d. side by side with a vLLM-style aiohttp client…')
    sideBySide = await runSideBySide({ quick: plan.quick, log })
  }

  const report: ClientBenchReport = {
    startedAt: startedAt.toISOString(),
    quick: plan.quick,
    node: process.version,
    cpus: availableParallelism(),
    loadAvg1: { before: loadBefore, after: loadavg()[0] ?? 0 },
    wallS: (performance.now() - t0) / 1000,
    serverCpu: itlRun.serverCpu,
    wakeLateMs,
    micro,
    ingest,
    itl,
    targets: judge(ingest, itl),
  }
  console.log(`\n${renderReport(report)}`)
  console.log(`\n${renderCellBench(cellPath)}`)
  if (sideBySide !== null) console.log(`\n${renderSideBySide(sideBySide)}`)
  if (values.json !== undefined) {
    await writeFile(values.json, `${JSON.stringify({ ...report, cellPath, sideBySide }, null, 2)}\n`)
    log(`figures written to ${values.json}`)
  }
  // A failed request against a zero-delay server is a client bug, not noise.
  if (ingest.some((l) => !l.allOk)) process.exitCode = 1
}

if (import.meta.main) {
  main().catch((error: unknown) => {
    console.error(error)
    process.exitCode = 1
  })
}
