import { availableParallelism } from 'node:os'
import { execa } from 'execa'

/**
 * Pins a process, every thread of it, to one CPU with `taskset` (Linux). Loopback wake-ups
 * are "sync": the kernel tends to run the woken client on the CPU of the server that woke it,
 * behind the server's work, which shows up as client latency. A server on a CPU of its own
 * keeps the two apart, as a remote engine would be.
 * @returns false where `taskset` is missing or refuses (the server then runs unpinned)
 */
export async function pinToCpu(pid: number, cpu: number): Promise<boolean> {
  const result = await execa('taskset', ['-a', '-p', '-c', String(cpu), String(pid)], { reject: false, stdin: 'ignore' })
  return result.exitCode === 0
}

/** The CPU for bench servers: the last one, when there are at least two (else null: no pinning). */
export function serverCpu(): number | null {
  const cpus = availableParallelism()
  return cpus >= 2 ? cpus - 1 : null
}
