import { createInterface } from 'node:readline'
import { fileURLToPath } from 'node:url'
import { execa } from 'execa'
import { pinToCpu } from '../cpu.ts'

/** The bench servers, each a script run in its own process. */
export const SERVER_SCRIPTS = {
  zeroDelay: fileURLToPath(new URL('./zero-delay.ts', import.meta.url)),
  paced: fileURLToPath(new URL('./paced.ts', import.meta.url)),
  sim: fileURLToPath(new URL('./sim.ts', import.meta.url)),
} as const

/** A bench server running in a child process. */
export interface ServerProcess {
  /** e.g. `http://127.0.0.1:41234` */
  origin: string
  port: number
  pid: number
  /** The CPU the server is pinned to (the first of `options.cpus`), or null when it runs unpinned. */
  cpu: number | null
  /** Every CPU it is pinned to; empty when it runs unpinned. */
  cpus: number[]
  /** Its worker processes' pids (`--processes N`), pinned as the server is; empty for one process. */
  workerPids: number[]
  /** Stops the process and waits for it to exit (SIGKILL after 2 s). Idempotent. */
  close(): Promise<void>
}

const START_TIMEOUT_MS = 10_000

/**
 * Starts a bench server in a child process (argv array, no shell) and waits for its
 * `listening <port>` line (`listening <port> <pid>,…` from a server of several processes, each
 * of them pinned too). The child also exits if this process dies (its stdin closes).
 * @param options.cpu pin the server (all its threads) to this CPU; best effort, see `pinToCpu`
 * @param options.cpus pin it to these CPUs instead (a server of several processes)
 * @example
 * const server = await startServerProcess('zeroDelay')
 * try { … } finally { await server.close() }
 */
export async function startServerProcess(
  kind: keyof typeof SERVER_SCRIPTS,
  args: readonly string[] = [],
  options: { cpu?: number | null; cpus?: readonly number[] } = {},
): Promise<ServerProcess> {
  const child = execa(process.execPath, [SERVER_SCRIPTS[kind], ...args], {
    stdin: 'pipe',
    stdout: 'pipe',
    stderr: 'inherit',
    buffer: false,
    reject: false,
    cleanup: true,
    forceKillAfterDelay: 2000,
  })
  let closing: Promise<void> | null = null
  const close = (): Promise<void> => {
    closing ??= (async () => {
      child.kill('SIGTERM')
      child.stdin.end()
      await child
    })()
    return closing
  }
  try {
    let workerPids: number[] = []
    const port = await new Promise<number>((resolve, reject) => {
      const lines = createInterface({ input: child.stdout })
      const timeout = setTimeout(
        () => reject(new Error(`the ${kind} server printed no "listening <port>" within ${START_TIMEOUT_MS} ms`)),
        START_TIMEOUT_MS,
      )
      lines.on('line', (line) => {
        const match = /^listening (\d+)(?: (\d+(?:,\d+)*))?$/.exec(line)
        if (match === null) return
        clearTimeout(timeout)
        workerPids = match[2] === undefined ? [] : match[2].split(',').map(Number)
        resolve(Number(match[1]))
      })
      void child.then((result) => {
        clearTimeout(timeout)
        reject(new Error(`the ${kind} server exited before listening: ${result.shortMessage ?? `exit code ${result.exitCode}`}`))
      })
    })
    const cpu = options.cpus?.join(',') ?? options.cpu ?? null
    const pids = child.pid === undefined ? [] : [child.pid, ...workerPids]
    const pinned = cpu !== null && pids.length > 0 && (await Promise.all(pids.map((pid) => pinToCpu(pid, cpu)))).every(Boolean)
    const cpus = !pinned ? [] : (options.cpus?.slice() ?? (options.cpu == null ? [] : [options.cpu]))
    return { origin: `http://127.0.0.1:${port}`, port, pid: child.pid ?? -1, cpu: cpus[0] ?? null, cpus, workerPids, close }
  } catch (error) {
    await close()
    throw error
  }
}
