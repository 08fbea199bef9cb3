/**
 * Drives `benchmarks/python/aiohttp_client.py`, an independent Python client that times streams
 * the way `vllm bench serve` does, and turns its raw output into the shapes servegate's own
 * client bench reports (`IngestResult`, `ItlResult`), percentiles by servegate's `distribution()`.
 */
import { fileURLToPath } from 'node:url'
import { execa } from 'execa'
import { z } from 'zod'
import { distribution } from '../src/metrics/distribution.ts'
import { pinToCpu } from './cpu.ts'
import type { IngestOptions, IngestResult } from './ingest.ts'
import type { ItlOptions, ItlResult } from './itl.ts'
import type { ClientGaps } from './send-truth.ts'

export const PYTHON_CLIENT_SCRIPT = fileURLToPath(new URL('./python/aiohttp_client.py', import.meta.url))

/** A Python interpreter that has aiohttp and numpy, with the versions it reported. */
export interface PythonClient {
  executable: string
  pythonVersion: string
  aiohttpVersion: string
  numpyVersion: string
}

const PROBE =
  'import json, platform, aiohttp, numpy; print(json.dumps([platform.python_version(), aiohttp.__version__, numpy.__version__]))'
const ProbeOutput = z.tuple([z.string(), z.string(), z.string()])

/**
 * Finds a Python with aiohttp and numpy: `$SERVEGATE_PYTHON`, then `/usr/bin/python3` (where
 * Debian's python3-aiohttp and python3-numpy install), then `python3` on PATH.
 * @returns null, never throws, when none of them imports both
 */
export async function findPythonClient(): Promise<PythonClient | null> {
  const fromEnv = process.env.SERVEGATE_PYTHON
  const candidates = [...(fromEnv ? [fromEnv] : []), '/usr/bin/python3', 'python3']
  for (const executable of candidates) {
    const result = await execa(executable, ['-c', PROBE], { reject: false, stdin: 'ignore', timeout: 15_000 })
    if (result.exitCode !== 0) continue
    const parsed = ProbeOutput.safeParse(parseJson(result.stdout))
    if (!parsed.success) continue
    const [pythonVersion, aiohttpVersion, numpyVersion] = parsed.data
    return { executable, pythonVersion, aiohttpVersion, numpyVersion }
  }
  return null
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text)
  } catch {
    return undefined
  }
}

const Common = {
  concurrency: z.number().int(),
  requests: z.number().int(),
  okRequests: z.number().int(),
  wallS: z.number(),
  /** Process CPU time over the measured part, s. */
  cpuS: z.number(),
  /** Peak RSS (VmHWM) of the Python process over its whole life, MB. */
  peakRssMB: z.number(),
  failures: z.array(z.string()),
}

/** `aiohttp_client.py ingest` output. */
const PythonIngestOutput = z.object({
  mode: z.literal('ingest'),
  ...Common,
  completionTokens: z.number().int(),
  tokPerS: z.number(),
})

/** `aiohttp_client.py itl` output: raw per-gap and per-chunk values, ms. */
const PythonItlOutput = z.object({
  mode: z.literal('itl'),
  ...Common,
  deadlineMs: z.number(),
  offeredTokens: z.number().int(),
  deliveredTokens: z.number().int(),
  itlErrorMs: z.array(z.number()),
  clientErrorMs: z.array(z.number()),
  serverErrorMs: z.array(z.number()),
  arrivalLatencyMs: z.array(z.number()),
  /** With `--detail`: per request, its body's sha256 and its gaps between content chunks, ms. */
  requestsDetail: z.array(z.object({ sha256: z.string(), gapsMs: z.array(z.number()) })).nullable(),
})

/** Where to run the Python process and how long it may take. */
export interface PythonRunOptions {
  /** Pin the Python process to this CPU (`pinToCpu`); null or absent: unpinned. */
  cpu?: number | null
  /** Kill the process after this long, ms. Default: from the run's size and deadlines. */
  timeoutMs?: number
  signal?: AbortSignal
}

/** Extra time a run gets over its requests' deadlines: interpreter start, imports, warm-up. */
const STARTUP_ALLOWANCE_MS = 30_000

async function runScript<S extends z.ZodType>(
  py: PythonClient,
  args: string[],
  schema: S,
  options: PythonRunOptions,
  defaultTimeoutMs: number,
): Promise<z.infer<S>> {
  const what = `the Python client (${py.executable} ${['aiohttp_client.py', ...args].join(' ')})`
  const child = execa(py.executable, [PYTHON_CLIENT_SCRIPT, ...args], {
    reject: false,
    stdin: 'ignore',
    cleanup: true,
    timeout: options.timeoutMs ?? defaultTimeoutMs,
    forceKillAfterDelay: 2000,
    maxBuffer: 512 * 1024 * 1024,
    ...(options.signal === undefined ? {} : { cancelSignal: options.signal }),
  })
  if (options.cpu !== undefined && options.cpu !== null && child.pid !== undefined) await pinToCpu(child.pid, options.cpu)
  const result = await child
  if (result.failed) {
    const why = result.timedOut ? 'timed out' : result.isCanceled ? 'was canceled' : (result.shortMessage ?? `exit code ${result.exitCode}`)
    throw new Error(`${what} failed: ${why}\n${String(result.stderr).slice(-2000)}`)
  }
  const parsed = schema.safeParse(parseJson(String(result.stdout)))
  if (!parsed.success) {
    throw new Error(`${what} printed no valid result: ${z.prettifyError(parsed.error)}\nstdout: ${String(result.stdout).slice(0, 500)}`)
  }
  return parsed.data
}

/**
 * Runs the Python client's ingest mode against a zero-delay server: `concurrency` warm-up
 * requests, then `requests` measured ones, closed loop, in a fresh Python process.
 * @example
 * const py = await findPythonClient()
 * if (py !== null) await runPythonIngest(py, { origin, concurrency: 16, requests: 256, tokens: 1000, deadlineMs: 60_000 })
 */
export async function runPythonIngest(
  py: PythonClient,
  options: IngestOptions & PythonRunOptions,
): Promise<IngestResult & { peakRssMB: number }> {
  const args = [
    'ingest',
    ...['--url', options.origin, '--concurrency', String(options.concurrency), '--requests', String(options.requests)],
    ...['--tokens', String(options.tokens), '--deadline-s', String(options.deadlineMs / 1000)],
  ]
  const rounds = Math.ceil(options.requests / options.concurrency) + 1
  const out = await runScript(py, args, PythonIngestOutput, options, rounds * options.deadlineMs + STARTUP_ALLOWANCE_MS)
  return {
    concurrency: out.concurrency,
    requests: out.requests,
    okRequests: out.okRequests,
    completionTokens: out.completionTokens,
    wallS: out.wallS,
    tokPerS: out.tokPerS,
    cpuShare: out.cpuS / out.wallS,
    failures: out.failures,
    peakRssMB: out.peakRssMB,
  }
}

/**
 * Runs the Python client's ITL mode against a paced server: `concurrency` × `rounds` requests of
 * `chunks` chunks after a warm-up, each chunk timed by `time.perf_counter()` (CLOCK_MONOTONIC
 * on Linux, the clock of the server's `"t"` stamps).
 * @param options.detail also return each request's body sha256 and gaps (`requestsDetail`), to
 * match against the paced server's send log (`send-truth.ts`)
 */
export async function runPythonItl(
  py: PythonClient,
  options: ItlOptions & PythonRunOptions & { detail?: boolean },
): Promise<ItlResult & { peakRssMB: number; requestsDetail: ClientGaps[] | null }> {
  const deadlineFactor = options.deadlineFactor ?? 1.5
  const args = [
    'itl',
    ...['--url', options.origin, '--concurrency', String(options.concurrency), '--chunks', String(options.chunks)],
    ...['--rounds', String(options.rounds), '--interval-ms', String(options.intervalMs), '--deadline-factor', String(deadlineFactor)],
    ...(options.detail === true ? ['--detail'] : []),
  ]
  const deadlineMs = deadlineFactor * options.chunks * options.intervalMs
  const out = await runScript(py, args, PythonItlOutput, options, (options.rounds + 1) * deadlineMs + STARTUP_ALLOWANCE_MS)
  return {
    concurrency: out.concurrency,
    requests: out.requests,
    okRequests: out.okRequests,
    deadlineMs: out.deadlineMs,
    itlErrorMs: distribution(out.itlErrorMs),
    clientErrorMs: distribution(out.clientErrorMs),
    serverErrorMs: distribution(out.serverErrorMs),
    arrivalLatencyMs: distribution(out.arrivalLatencyMs),
    offeredTokens: out.offeredTokens,
    deliveredTokens: out.deliveredTokens,
    deliveredShare: out.deliveredTokens / out.offeredTokens,
    cpuShare: out.cpuS / out.wallS,
    failures: out.failures,
    peakRssMB: out.peakRssMB,
    requestsDetail: out.requestsDetail,
  }
}
