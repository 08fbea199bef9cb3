import { pollEvery } from './poll.ts'
import { closeSync, openSync, readSync } from 'node:fs'
import { access, readFile } from 'node:fs/promises'
import { join } from 'node:path'
import { sanitizeMessage } from '../errors.ts'
import type { HostMemory, NullReasons } from '../schema/telemetry.ts'

/** The memory cgroup this process (and every engine it launches, which inherits it) is charged to. */
export type MemoryCgroup = { status: 'ok'; version: 'v1' | 'v2'; dir: string } | { status: 'absent'; reason: string }

/** One line of `/proc/<pid>/cgroup`: `hierarchy-id:controller,list:/path`. */
export interface ProcCgroupLine {
  hierarchy: string
  controllers: string[]
  path: string
}

/** A cgroup filesystem mount from `/proc/<pid>/mountinfo`. */
export interface CgroupMount {
  /** The directory of the hierarchy that is mounted (`/` unless a namespace or bind narrows it). */
  root: string
  mountPoint: string
  fsType: 'cgroup' | 'cgroup2'
  superOptions: string[]
}

/** Parses `/proc/<pid>/cgroup`. Pure. */
export function parseProcCgroup(text: string): ProcCgroupLine[] {
  const out: ProcCgroupLine[] = []
  for (const line of text.split('\n')) {
    const m = /^([^:]*):([^:]*):(.*)$/.exec(line.trim())
    if (m === null) continue
    out.push({ hierarchy: m[1] as string, controllers: (m[2] as string).split(',').filter((c) => c !== ''), path: m[3] as string })
  }
  return out
}

/** `\040`-style octal escapes of mountinfo paths. */
function unescapeMountPath(path: string): string {
  return path.replace(/\\([0-7]{3})/g, (_, oct: string) => String.fromCharCode(parseInt(oct, 8)))
}

/** The cgroup and cgroup2 mounts of `/proc/<pid>/mountinfo`. Pure. */
export function parseMountinfo(text: string): CgroupMount[] {
  const out: CgroupMount[] = []
  for (const line of text.split('\n')) {
    const fields = line.trim().split(' ')
    const dash = fields.indexOf('-')
    if (dash < 6) continue
    const fsType = fields[dash + 1]
    if (fsType !== 'cgroup' && fsType !== 'cgroup2') continue
    out.push({
      root: unescapeMountPath(fields[3] as string),
      mountPoint: unescapeMountPath(fields[4] as string),
      fsType,
      superOptions: (fields[dash + 3] ?? '').split(','),
    })
  }
  return out
}

/** `path` inside a mount of hierarchy directory `root`, or null when the mount does not show it. */
function within(root: string, path: string): string | null {
  if (root === '/') return path
  if (path === root) return '/'
  return path.startsWith(`${root}/`) ? path.slice(root.length) : null
}

async function exists(path: string): Promise<boolean> {
  try {
    await access(path)
    return true
  } catch {
    return false
  }
}

export interface CgroupLocation {
  /** @default '/proc/self/cgroup' */
  procCgroupPath?: string
  /** @default '/proc/self/mountinfo' */
  mountinfoPath?: string
}

/**
 * Finds this process's memory cgroup: cgroup v2 (the `0::/path` line, a cgroup2 mount with
 * `memory.current`), else the v1 `memory` controller (`memory.usage_in_bytes`). Hybrid hosts
 * mount cgroup2 without the memory controller; they fall through to v1.
 */
export async function findMemoryCgroup(location: CgroupLocation = {}): Promise<MemoryCgroup> {
  const procPath = location.procCgroupPath ?? '/proc/self/cgroup'
  const mountinfoPath = location.mountinfoPath ?? '/proc/self/mountinfo'
  let lines: ProcCgroupLine[]
  let mounts: CgroupMount[]
  try {
    lines = parseProcCgroup(await readFile(procPath, 'utf8'))
    mounts = parseMountinfo(await readFile(mountinfoPath, 'utf8'))
  } catch (error) {
    return {
      status: 'absent',
      reason:
        `cannot read ${procPath} or ${mountinfoPath} (not Linux?): ` +
        sanitizeMessage(error instanceof Error ? error.message : String(error)),
    }
  }
  const tried: string[] = []
  const unified = lines.find((l) => l.hierarchy === '0' && l.controllers.length === 0)
  if (unified !== undefined) {
    for (const mount of mounts.filter((m) => m.fsType === 'cgroup2')) {
      const rel = within(mount.root, unified.path)
      if (rel === null) continue
      const dir = join(mount.mountPoint, rel)
      if (await exists(join(dir, 'memory.current'))) return { status: 'ok', version: 'v2', dir }
      tried.push(`${dir}/memory.current`)
    }
  }
  const v1 = lines.find((l) => l.controllers.includes('memory'))
  if (v1 !== undefined) {
    for (const mount of mounts.filter((m) => m.fsType === 'cgroup' && m.superOptions.includes('memory'))) {
      const rel = within(mount.root, v1.path)
      if (rel === null) continue
      const dir = join(mount.mountPoint, rel)
      if (await exists(join(dir, 'memory.usage_in_bytes'))) return { status: 'ok', version: 'v1', dir }
      tried.push(`${dir}/memory.usage_in_bytes`)
    }
  }
  return {
    status: 'absent',
    reason:
      tried.length === 0
        ? `no memory cgroup: ${procPath} names no cgroup2 or v1 memory hierarchy that is mounted`
        : `no memory cgroup files (tried ${tried.join(', ')})`,
  }
}

const FILES = {
  v2: { current: 'memory.current', peak: 'memory.peak', limit: 'memory.max' },
  v1: { current: 'memory.usage_in_bytes', peak: 'memory.max_usage_in_bytes', limit: 'memory.limit_in_bytes' },
} as const

/** v1 reports "no limit" as PAGE_COUNTER_MAX pages (9223372036854771712 on 4 KiB pages); anything this large is unlimited. */
const V1_UNLIMITED = 2n ** 62n

type Read = { bytes: number } | { bytes: null; reason: string }

function unreadable(file: string, error: unknown): Read {
  const code = (error as NodeJS.ErrnoException).code
  return { bytes: null, reason: code === 'ENOENT' ? `${file} does not exist` : `${file} could not be read (${code ?? 'error'})` }
}

function parseBytes(file: string, raw: string): Read {
  if (raw === 'max') return { bytes: null, reason: `${file} is "max" (no limit)` }
  if (!/^\d+$/.test(raw)) return { bytes: null, reason: `${file} holds "${sanitizeMessage(raw, 40)}", not a byte count` }
  if (BigInt(raw) >= V1_UNLIMITED) return { bytes: null, reason: `${file} is ${raw} (no limit)` }
  const bytes = Number(raw)
  if (!Number.isSafeInteger(bytes)) return { bytes: null, reason: `${file} holds ${raw}, beyond exact numbers` }
  return { bytes }
}

async function readBytes(dir: string, file: string): Promise<Read> {
  try {
    return parseBytes(file, (await readFile(join(dir, file), 'utf8')).trim())
  } catch (error) {
    return unreadable(file, error)
  }
}

const counterBuffer = Buffer.alloc(64)

/**
 * Reads a counter file while requests stream: open, one read and close, synchronously, some 20
 * µs of the thread in one turn. Through `fs/promises` the same took 0.5-1 ms in several turns,
 * each a chunk's stamp could wait behind.
 */
function readCounterNow(dir: string, file: string): Read {
  let fd: number | null = null
  try {
    fd = openSync(join(dir, file), 'r')
    const n = readSync(fd, counterBuffer, 0, counterBuffer.length, 0)
    return parseBytes(file, counterBuffer.toString('latin1', 0, n).trim())
  } catch (error) {
    return unreadable(file, error)
  } finally {
    if (fd !== null) closeSync(fd)
  }
}

export interface HostMemorySamplerOptions extends CgroupLocation {
  /** The cgroup to read; found with {@link findMemoryCgroup} when omitted. */
  cgroup?: MemoryCgroup
  /** Time between reads of the current usage, ms. @default 500 */
  intervalMs?: number
  signal?: AbortSignal
}

export interface HostMemorySampler {
  /** Stops sampling, reads the usage once more and the cgroup's lifetime peak, and summarizes. */
  stop(): Promise<HostMemory>
}

/**
 * Samples the memory cgroup's current usage every `intervalMs` (the sampled peak of the cell) and
 * reads its lifetime peak at the end: `memory.peak` on cgroup v2 (Linux ≥ 5.19, else null with
 * the reason), `memory.max_usage_in_bytes` on v1. The lifetime peak covers everything the cgroup
 * ever ran, earlier cells included. Engines launched by servegate inherit its cgroup; an engine in
 * its own container is not counted here.
 * @example
 * const host = startHostMemorySampler()
 * // … run the cell …
 * const hostMemory = await host.stop() // { status: 'ok', cgroupVersion: 'v2', sampledPeakBytes: 1873215488, … }
 */
export function startHostMemorySampler(options: HostMemorySamplerOptions = {}): HostMemorySampler {
  const intervalMs = options.intervalMs ?? 500
  if (!(intervalMs > 0)) throw new RangeError(`startHostMemorySampler: intervalMs must be > 0, got ${intervalMs}`)
  const stopping = new AbortController()
  const signal = options.signal === undefined ? stopping.signal : AbortSignal.any([options.signal, stopping.signal])
  let samples = 0
  let readErrors = 0
  let lastReadError: string | null = null
  let firstBytes: number | null = null
  let lastBytes: number | null = null
  let sampledPeakBytes: number | null = null

  const sample = (dir: string, file: string): void => {
    const read = readCounterNow(dir, file)
    if (read.bytes === null) {
      readErrors++
      lastReadError = read.reason
      return
    }
    samples++
    firstBytes ??= read.bytes
    lastBytes = read.bytes
    sampledPeakBytes = Math.max(sampledPeakBytes ?? 0, read.bytes)
  }

  const running = (async (): Promise<MemoryCgroup> => {
    const cgroup = options.cgroup ?? (await findMemoryCgroup(options))
    if (cgroup.status === 'absent') return cgroup
    const file = FILES[cgroup.version].current
    await pollEvery(intervalMs, signal, () => sample(cgroup.dir, file))
    return cgroup
  })()

  let stopped: Promise<HostMemory> | null = null
  return {
    stop() {
      stopped ??= (async (): Promise<HostMemory> => {
        stopping.abort()
        const cgroup = await running
        if (cgroup.status === 'absent') return cgroup
        const files = FILES[cgroup.version]
        sample(cgroup.dir, files.current)
        const reasons: NullReasons = {}
        const peak = await readBytes(cgroup.dir, files.peak)
        if (peak.bytes === null) {
          reasons.lifetimePeakBytes =
            cgroup.version === 'v2' && peak.reason.endsWith('does not exist')
              ? 'memory.peak does not exist: the kernel predates Linux 5.19'
              : peak.reason
        }
        const limit = await readBytes(cgroup.dir, files.limit)
        if (limit.bytes === null) reasons.limitBytes = limit.reason
        if (samples === 0) {
          const why = `no read of ${files.current} succeeded (${readErrors} failed; last: ${lastReadError ?? 'none'})`
          reasons.sampledPeakBytes = why
          reasons.firstBytes = why
          reasons.lastBytes = why
        }
        return {
          status: 'ok',
          cgroupVersion: cgroup.version,
          cgroupDir: cgroup.dir,
          lifetimePeakBytes: peak.bytes,
          lifetimePeakSource: peak.bytes === null ? null : files.peak,
          sampledPeakBytes,
          firstBytes,
          lastBytes,
          limitBytes: limit.bytes,
          samples,
          intervalMs,
          readErrors,
          reasons,
        }
      })()
      return stopped
    },
  }
}
