import { spawn } from 'node:child_process'
import { pollEvery } from './poll.ts'
import { sanitizeMessage } from '../errors.ts'
import type { GpuFact, GpuSample, GpuSamples } from '../schema/telemetry.ts'

/** The `--query-gpu` fields of {@link queryGpuFacts}, in output order. */
const GPU_FACT_FIELDS = ['index', 'name', 'uuid', 'driver_version', 'memory.total'] as const
/** The MIG query, separate so a driver that predates MIG (and rejects the field) still gives its facts. */
const GPU_MIG_FIELDS = ['index', 'mig.mode.current'] as const
/** The `--query-gpu` fields of the sampler, in output order. */
const GPU_SAMPLE_FIELDS = ['index', 'timestamp', 'power.draw', 'memory.used', 'temperature.gpu', 'utilization.gpu'] as const

const FORMAT = '--format=csv,noheader,nounits'
/** One nvidia-smi call: fast with persistence mode, up to a few seconds without it (driver init). */
const CALL_TIMEOUT_MS = 10_000

export interface NvidiaSmiOptions {
  /** @default 'nvidia-smi' */
  executable?: string
  /** Extra environment for nvidia-smi (the harness's own is inherited). */
  env?: Record<string, string | undefined>
  /**
   * `CUDA_VISIBLE_DEVICES` of the engine: indices or `GPU-…` UUIDs (unique prefixes allowed, as
   * CUDA does). `undefined` reads it from `env`, then from this process; `null` keeps every GPU.
   */
  visibleDevices?: string | null
}

export type GpuFactsResult =
  | {
      status: 'ok'
      gpus: GpuFact[]
      /** The `CUDA_VISIBLE_DEVICES` the GPUs were filtered by; null when all were kept. */
      visibleDevices: string | null
      /** Caveat on the filtering (index order), or null. */
      note: string | null
    }
  | { status: 'absent'; reason: string }

type CallResult = { status: 'ok'; stdout: string } | { status: 'absent'; reason: string }

/** How one run of nvidia-smi ended. */
interface SmiRun {
  /** The spawn's own error code (`ENOENT`, `EACCES`…) and message; null when it ran. */
  spawnError: { code: string; message: string } | null
  exitCode: number | null
  signal: NodeJS.Signals | null
  timedOut: boolean
  stdout: string
  stderr: string
}

/**
 * Runs nvidia-smi once, no shell, stdin closed, killed after `CALL_TIMEOUT_MS`. With
 * `node:child_process`, not execa: every cell asks it for the manifest's GPU facts, and on a host
 * without GPUs that alone loaded execa's 130 modules into the measuring process (3 MB of the
 * peak RSS of `servegate run` at C = 1, 89–90 MB against 86–87 MB without it).
 */
function runNvidiaSmi(executable: string, args: string[], env: NvidiaSmiOptions['env']): Promise<SmiRun> {
  return new Promise((resolve) => {
    const run: SmiRun = { spawnError: null, exitCode: null, signal: null, timedOut: false, stdout: '', stderr: '' }
    const child = spawn(executable, args, { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] })
    const timer = setTimeout(() => {
      run.timedOut = true
      child.kill('SIGKILL')
    }, CALL_TIMEOUT_MS)
    child.stdout.setEncoding('utf8').on('data', (text: string) => (run.stdout += text))
    child.stderr.setEncoding('utf8').on('data', (text: string) => (run.stderr += text))
    child.on('error', (error: NodeJS.ErrnoException) => {
      run.spawnError = { code: error.code ?? 'ERROR', message: error.message }
    })
    child.on('close', (code, signal) => {
      clearTimeout(timer)
      run.exitCode = code
      run.signal = signal
      resolve(run)
    })
  })
}

async function callNvidiaSmi(executable: string, args: string[], env: NvidiaSmiOptions['env']): Promise<CallResult> {
  const result = await runNvidiaSmi(executable, args, env)
  if (result.spawnError?.code === 'ENOENT')
    return { status: 'absent', reason: `${executable} not found (ENOENT): no NVIDIA driver tools on this host` }
  if (result.timedOut) return { status: 'absent', reason: `${executable} did not answer within ${CALL_TIMEOUT_MS / 1000} s` }
  if (result.spawnError !== null)
    return {
      status: 'absent',
      reason: `${executable} could not be run (${result.spawnError.code}): ${sanitizeMessage(result.spawnError.message)}`,
    }
  if (result.exitCode !== 0) {
    const said = sanitizeMessage(`${result.stderr.trim()} ${result.stdout.trim()}`.trim())
    const how = result.exitCode === null ? `was killed by ${result.signal ?? 'a signal'}` : `exited with code ${result.exitCode}`
    return { status: 'absent', reason: `${executable} ${how}${said === '' ? '' : `: ${said}`}` }
  }
  if (result.stdout.trim() === '') return { status: 'absent', reason: `${executable} printed nothing (no GPU visible to the driver)` }
  return { status: 'ok', stdout: result.stdout }
}

/** A cell nvidia-smi prints as `[N/A]`, `[Not Supported]`, `[Unknown Error]`…: no value. */
function isUnavailable(raw: string): boolean {
  return raw === '' || raw === 'N/A' || (raw.startsWith('[') && raw.endsWith(']'))
}

function text(raw: string): string | null {
  return isUnavailable(raw) ? null : raw
}

/** A numeric cell; null when nvidia-smi has no value there or it is not a number. */
function parseSmiNumber(raw: string): number | null {
  if (isUnavailable(raw)) return null
  const value = Number(raw)
  return Number.isFinite(value) ? value : null
}

/**
 * nvidia-smi's `timestamp` (`2024/05/14 10:32:11.123`, its local time) as epoch milliseconds;
 * null when it is not in that shape.
 */
export function parseNvidiaSmiTimestamp(raw: string): number | null {
  const m = /^(\d{4})\/(\d{2})\/(\d{2}) (\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,3}))?$/.exec(raw.trim())
  if (m === null) return null
  const [, y, mo, d, h, mi, s, ms] = m
  return new Date(Number(y), Number(mo) - 1, Number(d), Number(h), Number(mi), Number(s), Number((ms ?? '0').padEnd(3, '0'))).getTime()
}

/** Rows of `--format=csv,noheader,nounits` output: cells separated by `, `. */
function rows(stdout: string, fields: number): { cells: string[][]; invalid: string[] } {
  const cells: string[][] = []
  const invalid: string[] = []
  for (const line of stdout.split(/\r?\n/)) {
    if (line.trim() === '') continue
    const row = line.split(', ').map((c) => c.trim())
    if (row.length === fields && /^\d+$/.test(row[0] ?? '')) cells.push(row)
    else invalid.push(line)
  }
  return { cells, invalid }
}

/** Parses `--query-gpu=index,name,uuid,driver_version,memory.total` output. Pure. */
export function parseGpuFacts(stdout: string): { gpus: GpuFact[]; invalid: string[] } {
  const { cells, invalid } = rows(stdout, GPU_FACT_FIELDS.length)
  const gpus = cells.map(([index, name, uuid, driver, memory]) => ({
    index: Number(index),
    name: text(name ?? ''),
    uuid: text(uuid ?? ''),
    driverVersion: text(driver ?? ''),
    memoryTotalMiB: parseSmiNumber(memory ?? ''),
  }))
  return { gpus, invalid }
}

/**
 * Parses `--query-gpu=index,timestamp,power.draw,memory.used,temperature.gpu,utilization.gpu`
 * output. Pure. A row whose timestamp does not parse gets `fallbackMs`.
 */
export function parseGpuSamples(stdout: string, fallbackMs: number): { samples: GpuSample[]; invalid: string[] } {
  const { cells, invalid } = rows(stdout, GPU_SAMPLE_FIELDS.length)
  const samples = cells.map(([index, timestamp, power, memory, temperature, utilization]) => ({
    index: Number(index),
    timestampMs: parseNvidiaSmiTimestamp(timestamp ?? '') ?? fallbackMs,
    powerW: parseSmiNumber(power ?? ''),
    memoryUsedMiB: parseSmiNumber(memory ?? ''),
    temperatureC: parseSmiNumber(temperature ?? ''),
    utilizationPct: parseSmiNumber(utilization ?? ''),
  }))
  return { samples, invalid }
}

/** Parses `--query-gpu=index,mig.mode.current` output: the indices whose MIG mode is `Enabled`. Pure. */
export function parseMigEnabled(stdout: string): Set<number> {
  const { cells } = rows(stdout, GPU_MIG_FIELDS.length)
  return new Set(cells.filter(([, mode]) => mode === 'Enabled').map(([index]) => Number(index)))
}

/**
 * The GPUs chosen, unless one is in MIG mode: nvidia-smi's `--query-gpu` power, memory and
 * utilization are then the whole GPU's, not the MIG instance the engine runs on, so no figure is
 * kept rather than a wrong one (the absent reason says so). Pure.
 */
function refuseMigGpus(selection: GpuFactsResult, migEnabled: ReadonlySet<number>): GpuFactsResult {
  if (selection.status === 'absent') return selection
  const mig = selection.gpus.filter((g) => g.index !== null && migEnabled.has(g.index))
  if (mig.length === 0) return selection
  const which = mig.map((g) => `GPU ${g.index}${g.name === null ? '' : ` (${g.name})`}`).join(', ')
  return {
    status: 'absent',
    reason:
      `${which} has MIG mode enabled: nvidia-smi --query-gpu reports the whole GPU's power, memory and utilization, ` +
      'not the MIG instance the engine runs on, so no GPU figures are recorded; run on a GPU without MIG to measure them',
  }
}

/**
 * The GPUs an engine with this `CUDA_VISIBLE_DEVICES` sees, the way CUDA reads it: a comma list
 * of indices or `GPU-` UUIDs (a unique prefix is enough), read up to the first entry that names no
 * device. Pure.
 */
export function selectVisibleGpus(gpus: readonly GpuFact[], visibleDevices: string, deviceOrder?: string): GpuFactsResult {
  const listed = gpus.map((g) => g.index).join(', ')
  if (visibleDevices.trim() === '') return { status: 'absent', reason: 'CUDA_VISIBLE_DEVICES is empty: the engine sees no GPU' }
  const chosen: GpuFact[] = []
  let usedIndices = false
  for (const entry of visibleDevices.split(',').map((e) => e.trim())) {
    let match: GpuFact | undefined
    if (/^\d+$/.test(entry)) {
      usedIndices = true
      match = gpus.find((g) => g.index === Number(entry))
    } else if (/^MIG-/i.test(entry)) {
      return {
        status: 'absent',
        reason:
          `CUDA_VISIBLE_DEVICES names a MIG instance (${entry}); ` +
          "nvidia-smi --query-gpu reports whole GPUs, so its power and memory are not the instance's",
      }
    } else if (/^GPU-/i.test(entry)) {
      const candidates = gpus.filter((g) => g.uuid !== null && g.uuid.toLowerCase().startsWith(entry.toLowerCase()))
      if (candidates.length === 1) match = candidates[0]
    }
    if (match === undefined) break
    if (!chosen.includes(match)) chosen.push(match)
  }
  if (chosen.length === 0) {
    return {
      status: 'absent',
      reason: `CUDA_VISIBLE_DEVICES="${sanitizeMessage(visibleDevices, 120)}" names none of the GPUs nvidia-smi lists (indices ${listed})`,
    }
  }
  const note =
    usedIndices && deviceOrder !== 'PCI_BUS_ID'
      ? "CUDA_VISIBLE_DEVICES indices were read in nvidia-smi's PCI bus order; " +
        "CUDA's default order (FASTEST_FIRST) can differ on hosts with mixed GPUs: set CUDA_DEVICE_ORDER=PCI_BUS_ID or use GPU UUIDs"
      : null
  return { status: 'ok', gpus: chosen, visibleDevices, note }
}

function resolveVisibleDevices(options: NvidiaSmiOptions): string | null {
  if (options.visibleDevices !== undefined) return options.visibleDevices
  return options.env?.CUDA_VISIBLE_DEVICES ?? process.env.CUDA_VISIBLE_DEVICES ?? null
}

/**
 * GPU facts from `nvidia-smi --query-gpu=index,name,uuid,driver_version,memory.total`, kept to the
 * engine's devices. `absent` (with the reason) when nvidia-smi is missing, fails (no driver) or
 * prints nothing: a machine without a GPU records that, never invented facts.
 * @example
 * const facts = await queryGpuFacts({ visibleDevices: '0,1' })
 * if (facts.status === 'ok') facts.gpus[0]?.memoryTotalMiB // 81559
 */
export async function queryGpuFacts(options: NvidiaSmiOptions = {}): Promise<GpuFactsResult> {
  const executable = options.executable ?? 'nvidia-smi'
  // Both at once: the sampler's idle baseline starts after these.
  const [call, mig] = await Promise.all([
    callNvidiaSmi(executable, [`--query-gpu=${GPU_FACT_FIELDS.join(',')}`, FORMAT], options.env),
    callNvidiaSmi(executable, [`--query-gpu=${GPU_MIG_FIELDS.join(',')}`, FORMAT], options.env),
  ])
  if (call.status === 'absent') return call
  const { gpus, invalid } = parseGpuFacts(call.stdout)
  if (gpus.length === 0) {
    return { status: 'absent', reason: `${executable} printed no GPU rows: ${sanitizeMessage(invalid.join(' | '), 200)}` }
  }
  const visibleDevices = resolveVisibleDevices(options)
  const order = options.env?.CUDA_DEVICE_ORDER ?? process.env.CUDA_DEVICE_ORDER
  const selection: GpuFactsResult =
    visibleDevices === null ? { status: 'ok', gpus, visibleDevices: null, note: null } : selectVisibleGpus(gpus, visibleDevices, order)
  if (selection.status === 'absent') return selection
  // A driver that predates MIG rejects the field: its GPUs cannot be in MIG mode.
  return mig.status === 'ok' ? refuseMigGpus(selection, parseMigEnabled(mig.stdout)) : selection
}

export interface GpuSamplerOptions extends NvidiaSmiOptions {
  /** Time between polls, ms. @default 500 */
  intervalMs?: number
  /** Stops polling when aborted; `stop()` still returns what was collected. */
  signal?: AbortSignal
}

export interface GpuSampler {
  /**
   * Marks the end of the idle baseline (samples before it) and the start of the load; resolves
   * with the mark, epoch ms. Where no poll has returned a sample yet (a load that starts within
   * the first poll, or nvidia-smi slow to answer), it takes one first, so the baseline is never
   * empty on a GPU that answers.
   */
  markLoadStart(): Promise<number>
  /** Stops polling, takes one last sample (so the load window's end is covered) and returns everything. */
  stop(): Promise<GpuSamples>
}

/**
 * Samples power, memory, temperature and utilization of the engine's GPUs every `intervalMs`.
 *
 * It polls (one short `nvidia-smi --query-gpu=…` per interval) rather than running one
 * `nvidia-smi -lms` for the whole cell: nvidia-smi's C stdio block-buffers stdout when it is a
 * pipe (people wrap it in `unbuffer`), so a looping process delivers rows in bursts of several
 * kilobytes and loses the unflushed tail when it is killed, exactly the end of the load window.
 * A poll exits, so its output is complete; each row carries nvidia-smi's own timestamp, so spawn
 * latency does not skew the time axis; and nothing outlives a poll (each has a timeout). The cost
 * is one process per interval: a few ms of CPU with persistence mode on, more without it, in
 * which case polls stretch the interval (the next poll waits for the previous one) rather than
 * pile up.
 * @example
 * const gpu = startGpuSampler({ intervalMs: 500 })
 * // … idle baseline …
 * const loadStartedAt = await gpu.markLoadStart()
 * // … run the cell …
 * const summary = summarizeGpu(await gpu.stop(), { outputTokens, loadStartedAt, loadEndedAt: Date.now() })
 */
export function startGpuSampler(options: GpuSamplerOptions = {}): GpuSampler {
  const executable = options.executable ?? 'nvidia-smi'
  const intervalMs = options.intervalMs ?? 500
  if (!(intervalMs > 0)) throw new RangeError(`startGpuSampler: intervalMs must be > 0, got ${intervalMs}`)
  const startedAt = Date.now()
  const stopping = new AbortController()
  const signal = options.signal === undefined ? stopping.signal : AbortSignal.any([options.signal, stopping.signal])
  const samples: GpuSample[] = []
  let polls = 0
  let pollErrors = 0
  let lastPollError: string | null = null
  let loadStartedAt: number | null = null

  const poll = async (devices: ReadonlySet<number>): Promise<void> => {
    polls++
    const call = await callNvidiaSmi(executable, [`--query-gpu=${GPU_SAMPLE_FIELDS.join(',')}`, FORMAT], options.env)
    if (call.status === 'absent') {
      pollErrors++
      lastPollError = call.reason
      return
    }
    const parsed = parseGpuSamples(call.stdout, Date.now())
    for (const s of parsed.samples) if (devices.has(s.index)) samples.push(s)
    if (parsed.invalid.length > 0) {
      pollErrors++
      lastPollError = `unparseable nvidia-smi row: ${sanitizeMessage(parsed.invalid[0] ?? '', 160)}`
    }
  }

  const ready = (async (): Promise<{ status: 'ok'; devices: Set<number> } | { status: 'absent'; reason: string }> => {
    const facts = await queryGpuFacts(options)
    if (facts.status === 'absent') return facts
    return { status: 'ok', devices: new Set(facts.gpus.flatMap((g) => (g.index === null ? [] : [g.index]))) }
  })()
  const running = ready.then(async (state) => {
    if (state.status === 'ok') await pollEvery(intervalMs, signal, () => poll(state.devices))
    return state
  })

  let stopped: Promise<GpuSamples> | null = null
  return {
    async markLoadStart() {
      const state = await ready
      if (state.status === 'ok' && samples.length === 0 && !signal.aborted) await poll(state.devices)
      loadStartedAt = Date.now()
      return loadStartedAt
    },
    stop() {
      stopped ??= (async (): Promise<GpuSamples> => {
        const callerAborted = options.signal?.aborted === true
        stopping.abort()
        const state = await running
        if (state.status === 'absent') return state
        if (!callerAborted) await poll(state.devices)
        samples.sort((a, b) => a.timestampMs - b.timestampMs || a.index - b.index)
        return {
          status: 'ok',
          intervalMs,
          devices: [...state.devices].sort((a, b) => a - b),
          samples,
          startedAt,
          stoppedAt: Date.now(),
          loadStartedAt,
          polls,
          pollErrors,
          lastPollError,
        }
      })()
      return stopped
    },
  }
}
