import { readFileSync } from 'node:fs'
import type { Distribution } from '../src/schema/run.ts'
import { distribution } from '../src/metrics/distribution.ts'
import { readCpuTicks } from '../src/runner/host-steal.ts'

/**
 * The machine's wake-up noise floor: how late this thread wakes from a 2 ms sleep
 * (`Atomics.wait`), ms. Virtual CPUs that halt when idle wake late now and then; an idle
 * client between chunks pays the same, so this bounds how exact any ITL figure here can be.
 */
export function wakeLatency(samples: number): Distribution {
  const cell = new Int32Array(new SharedArrayBuffer(4))
  const lateMs: number[] = []
  for (let i = 0; i < samples; i++) {
    const start = performance.now()
    Atomics.wait(cell, 0, 0, 2)
    lateMs.push(Math.max(0, performance.now() - start - 2))
  }
  return distribution(lateMs)
}

/** `/proc` clock ticks per second (USER_HZ, 100 on every mainstream Linux build). */
const TICKS_PER_S = 100

function busyTicks(): number | null {
  return readCpuTicks()?.busyTicks ?? null
}

/** utime + stime of a process, all its threads, in ticks; 0 once it is gone. */
function processTicks(pid: number): number {
  try {
    // Fields after the parenthesized name: state is field 3, utime 14, stime 15.
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
    return Number(fields[11]) + Number(fields[12])
  } catch {
    return 0
  }
}

/**
 * Measures the CPU that processes other than this one and `pids` used meanwhile, in cores
 * (Linux `/proc`; null elsewhere). The bench shares its machine: figures taken while
 * something else ran are not the client's.
 * @example const meter = foreignCpu([server.pid]); …; meter.stop() // 0.02
 */
export function foreignCpu(pids: readonly number[]): { stop(): number | null } {
  const ownTicks = (): number => processTicks(process.pid) + pids.reduce((sum, pid) => sum + processTicks(pid), 0)
  const busy0 = busyTicks()
  const own0 = ownTicks()
  const t0 = performance.now()
  return {
    stop() {
      const busy1 = busyTicks()
      if (busy0 === null || busy1 === null) return null
      const wallS = (performance.now() - t0) / 1000
      return Math.max(0, busy1 - busy0 - (ownTicks() - own0)) / TICKS_PER_S / wallS
    },
  }
}
