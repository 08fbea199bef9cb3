import { readFileSync } from 'node:fs'

/** The machine's CPU time since boot, all CPUs together, in `/proc/stat` ticks (USER_HZ). */
export interface CpuTicks {
  /** Every tick: user, nice, system, idle, iowait, irq, softirq and steal. */
  totalTicks: number
  /** Ticks the hypervisor ran something else while this machine's virtual CPU was ready to run. */
  stealTicks: number
  /** Ticks spent running (user, nice, system, irq, softirq) or stolen: neither idle nor waiting. */
  busyTicks: number
}

/**
 * Reads the aggregate `cpu` line of a `/proc/stat` text; null when it has none. Pure.
 * `guest` and `guest_nice` are left out: the kernel counts them in `user` and `nice` already.
 * @example parseProcStat('cpu  10 0 5 80 1 0 2 2 0 0\n') // { totalTicks: 100, stealTicks: 2, busyTicks: 19 }
 */
export function parseProcStat(text: string): CpuTicks | null {
  const line = text.split('\n').find((l) => l.startsWith('cpu '))
  return line === undefined ? null : ticksOf(line)
}

/**
 * Each CPU's ticks by its number, from the `cpuN` lines of a `/proc/stat` text (they come first,
 * so the interrupt counts after them are not split). Pure.
 * @example parsePerCpuStat('cpu  2 0 0 8\ncpu0 1 0 0 4\ncpu1 1 0 0 4\nintr 9\n').get(1) // { totalTicks: 5, stealTicks: 0, busyTicks: 1 }
 */
export function parsePerCpuStat(text: string): Map<number, CpuTicks> {
  const cpus = new Map<number, CpuTicks>()
  let at = 0
  while (text.startsWith('cpu', at)) {
    const end = text.indexOf('\n', at)
    const line = text.slice(at, end === -1 ? text.length : end)
    const id = Number(line.slice(3, line.indexOf(' ')))
    const ticks = ticksOf(line)
    if (line[3] !== ' ' && Number.isInteger(id) && ticks !== null) cpus.set(id, ticks)
    if (end === -1) break
    at = end + 1
  }
  return cpus
}

/** One `cpu` line's ticks; null when it has fewer than four numbers. */
function ticksOf(line: string): CpuTicks | null {
  const fields = line.trim().split(/\s+/).slice(1, 9).map(Number)
  if (fields.length < 4 || fields.some((f) => !Number.isFinite(f))) return null
  const [user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0] = fields
  return {
    totalTicks: user + nice + system + idle + iowait + irq + softirq + steal,
    stealTicks: steal,
    busyTicks: user + nice + system + irq + softirq + steal,
  }
}

/** This machine's CPU ticks; null off Linux or where `/proc/stat` cannot be read. */
export function readCpuTicks(path = '/proc/stat'): CpuTicks | null {
  try {
    return parseProcStat(readFileSync(path, 'latin1'))
  } catch {
    return null
  }
}

/**
 * The share of the machine's CPU time the hypervisor took while a cell measured (steal over all
 * ticks, every CPU), summed over the spans between `start` and `stop`. On a virtual machine whose
 * host runs other guests, a stolen slice delays whatever was due in it: a chunk's arrival is
 * stamped late by up to the slice, in any client, so ITL tails of a few milliseconds on such a
 * machine measure the host as much as the engine.
 * @example const meter = new HostSteal(); meter.start(); …; meter.stop(); meter.share() // 0.012
 */
export class HostSteal {
  #at: CpuTicks | null = null
  #stealTicks = 0
  #totalTicks = 0
  #readable = true
  readonly #read: () => CpuTicks | null

  /** @param read where the ticks come from; `/proc/stat` by default */
  constructor(read: () => CpuTicks | null = readCpuTicks) {
    this.#read = read
  }

  start(): void {
    this.#at = this.#read()
    if (this.#at === null) this.#readable = false
  }

  stop(): void {
    const at = this.#read()
    if (this.#at === null || at === null) {
      this.#readable = false
      return
    }
    this.#stealTicks += Math.max(0, at.stealTicks - this.#at.stealTicks)
    this.#totalTicks += Math.max(0, at.totalTicks - this.#at.totalTicks)
    this.#at = null
  }

  /** Stolen over all ticks in the spans measured, 0…1; null when unreadable or no tick passed. */
  share(): number | null {
    return this.#readable && this.#totalTicks > 0 ? this.#stealTicks / this.#totalTicks : null
  }
}
