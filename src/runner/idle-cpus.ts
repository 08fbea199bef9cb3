import { readFile } from 'node:fs/promises'
import { type CpuTicks, parsePerCpuStat } from './host-steal.ts'

/**
 * The CPU numbers of a Linux CPU list (`0-3,8,10-11`, as `Cpus_allowed_list` and cpusets write
 * it); null when it is not one. Pure.
 * @example parseCpuList('0-2,5') // [0, 1, 2, 5]
 */
export function parseCpuList(text: string): number[] | null {
  const cpus: number[] = []
  for (const part of text.trim().split(',')) {
    const match = /^(\d+)(?:-(\d+))?$/.exec(part)
    if (match === null) return null
    const first = Number(match[1])
    const last = match[2] === undefined ? first : Number(match[2])
    if (last < first) return null
    for (let cpu = first; cpu <= last; cpu++) cpus.push(cpu)
  }
  return cpus
}

/** The CPUs this process may run on (`Cpus_allowed_list` in `/proc/self/status`); null where that cannot be read. */
export async function allowedCpus(): Promise<number[] | null> {
  try {
    const status = await readFile('/proc/self/status', 'latin1')
    const line = /^Cpus_allowed_list:\s*(.+)$/m.exec(status)
    return line === null ? null : parseCpuList(line[1] as string)
  } catch {
    return null
  }
}

/**
 * How many of `cpus` stood idle between two readings, in cores: each CPU's idle share of its ticks
 * summed (two CPUs half idle read 1). Null when no tick of theirs passed or one is missing. Pure.
 * @example idleCores(before, after, [0, 1]) // 0.5: one core's worth of the pair busy, half of the other
 */
export function idleCores(
  before: ReadonlyMap<number, CpuTicks>,
  after: ReadonlyMap<number, CpuTicks>,
  cpus: readonly number[],
): number | null {
  let idle = 0
  let ticked = false
  for (const cpu of cpus) {
    const a = before.get(cpu)
    const b = after.get(cpu)
    if (a === undefined || b === undefined) return null
    const total = b.totalTicks - a.totalTicks
    if (total <= 0) continue
    ticked = true
    idle += Math.max(0, total - (b.busyTicks - a.busyTicks)) / total
  }
  return ticked ? idle : null
}

/**
 * The idle time of the CPUs this process may run on, read from `/proc/stat` off the calling thread
 * (libuv's pool reads it; on a machine of many CPUs and interrupts the kernel takes a while to
 * write it). Linux only: {@link open} is null elsewhere.
 * @example
 * const idle = await IdleCpus.open()
 * await idle?.read() // null: the first reading only starts the count
 * await idle?.read() // 0.7: cores idle since the last reading
 */
export class IdleCpus {
  readonly #cpus: readonly number[]
  #last: Map<number, CpuTicks> | null = null

  private constructor(cpus: readonly number[]) {
    this.#cpus = cpus
  }

  static async open(): Promise<IdleCpus | null> {
    const cpus = await allowedCpus()
    return cpus === null || cpus.length === 0 ? null : new IdleCpus(cpus)
  }

  /** Cores idle since the last reading; null on the first, or where `/proc/stat` cannot be read. */
  async read(): Promise<number | null> {
    let now: Map<number, CpuTicks>
    try {
      now = parsePerCpuStat(await readFile('/proc/stat', 'latin1'))
    } catch {
      this.#last = null
      return null
    }
    const idle = this.#last === null ? null : idleCores(this.#last, now, this.#cpus)
    this.#last = now
    return idle
  }

  /** The next reading starts the count again. */
  reset(): void {
    this.#last = null
  }
}
