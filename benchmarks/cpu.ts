import { availableParallelism } from 'node:os'
import { execa } from 'execa'

/**
 * Pins a process, every thread of it, to one CPU (or a list, `2,3`) with `taskset` (Linux).
 * Loopback wake-ups are "sync": the kernel tends to run the woken client on the CPU of the
 * server that woke it, behind the server's work, which shows up as client latency. A server on
 * a CPU of its own keeps the two apart, as a remote engine would be.
 * @returns false where `taskset` is missing or refuses (the server then runs unpinned)
 */
export async function pinToCpu(pid: number, cpu: number | string): Promise<boolean> {
  const result = await execa('taskset', ['-a', '-p', '-c', String(cpu), String(pid)], { reject: false, stdin: 'ignore' })
  return result.exitCode === 0
}

/**
 * The CPUs for the scale ladder's paced server, as many processes as CPUs, pinned to them: the
 * last one where the machine has fewer than 8 (none below 2), else the last quarter, rounded up
 * (4 of 16, 16 of 64).
 * A C = 2048 rung asks 204,800 chunks a second, several times what one server process sends on
 * time; the cell's process takes the CPUs below them.
 * @param count how many; @default a quarter from 8 CPUs up, else 1
 */
export function ladderServerCpus(cpus = availableParallelism(), count?: number): number[] {
  if (cpus < 2) return []
  const n = Math.min(cpus - 1, Math.max(1, count ?? (cpus >= 8 ? Math.ceil(cpus / 4) : 1)))
  return Array.from({ length: n }, (_, i) => cpus - n + i)
}

/** The CPU for bench servers: the last one, when there are at least two (else null: no pinning). */
export function serverCpu(): number | null {
  const cpus = availableParallelism()
  return cpus >= 2 ? cpus - 1 : null
}
