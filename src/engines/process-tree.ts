import { readFileSync } from 'node:fs'
import { readdir, readFile } from 'node:fs/promises'
import { join } from 'node:path'

/** A process's start time (clock ticks since boot), to tell a pid from a later reuse of it. */
export async function startTime(pid: number): Promise<string | null> {
  try {
    const stat = await readFile(join('/proc', String(pid), 'stat'), 'utf8')
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19] ?? null
  } catch {
    return null
  }
}

/** Every descendant of `pid` (Linux /proc), children before grandchildren. */
export async function descendants(pid: number): Promise<number[]> {
  const parents = new Map<number, number[]>()
  let entries: string[]
  try {
    entries = await readdir('/proc')
  } catch {
    return []
  }
  for (const entry of entries) {
    if (!/^\d+$/.test(entry)) continue
    try {
      const stat = await readFile(join('/proc', entry, 'stat'), 'utf8')
      // Field 4 (ppid) follows the ")" that closes the command name, which may contain spaces.
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1])
      const list = parents.get(ppid) ?? []
      list.push(Number(entry))
      parents.set(ppid, list)
    } catch {
      // The process ended while we looked.
    }
  }
  const out: number[] = []
  const queue = [pid]
  while (queue.length > 0) {
    const next = queue.shift() as number
    for (const child of parents.get(next) ?? []) {
      out.push(child)
      queue.push(child)
    }
  }
  return out
}

/** The parent pid of a process from /proc/<pid>/stat, or null when it is gone. */
function parentOf(pid: number): number | null {
  try {
    const stat = readFileSync(join('/proc', String(pid), 'stat'), 'utf8')
    return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1])
  } catch {
    return null
  }
}

/** A process and every ancestor of it up to init (Linux /proc), itself first. Synchronous. */
export function lineage(pid: number): Set<number> {
  const out = new Set<number>()
  for (let p: number | null = pid; p !== null && p > 0 && !out.has(p); p = parentOf(p)) out.add(p)
  return out
}

/** Sends a signal to one process; one already gone is no error. */
export function signalPid(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(pid, signal)
  } catch {
    // Already gone.
  }
}

/** Sends a signal to a process group led by `pid`, or to `pid` alone when it leads none. */
export function killTreeSync(pid: number, signal: NodeJS.Signals): void {
  // The engine leads its own process group (detached), so this reaches every member that did
  // not start a session of its own.
  try {
    process.kill(-pid, signal)
  } catch {
    signalPid(pid, signal)
  }
}

/** How a process tree is read: the descendants of a pid, and a process's start time. */
export interface ProcessProbe {
  descendants(pid: number): Promise<number[]>
  startTime(pid: number): Promise<string | null>
}

const PROC: ProcessProbe = { descendants, startTime }

/**
 * Every descendant of a launched engine ever seen, with its start time: a worker that detached
 * into a session of its own, and whose parent died first, is still ours to stop (vLLM forks
 * engine cores). Looked at on `snapshot()` and, while watched, every second.
 * @example const tree = new ProcessTree(child.pid); tree.watch(); …; await tree.members() // [1234, 1240]
 */
export class ProcessTree {
  readonly #root: number
  readonly #probe: ProcessProbe
  readonly #seen = new Map<number, string>()
  #watcher: NodeJS.Timeout | null = null

  /** @param root the engine's pid; below 0 when it never started (the tree is then empty) */
  constructor(root: number, probe: ProcessProbe = PROC) {
    this.#root = root
    this.#probe = probe
  }

  /** Every descendant seen so far, live or not. */
  get seen(): readonly number[] {
    return [...this.#seen.keys()]
  }

  /** Records the root's current descendants, each with its start time. */
  async snapshot(): Promise<void> {
    if (this.#root < 0) return
    for (const p of await this.#probe.descendants(this.#root)) {
      if (this.#seen.has(p)) continue
      const started = await this.#probe.startTime(p)
      if (started !== null) this.#seen.set(p, started)
    }
  }

  /** Takes a snapshot every second until `unwatch()`; the timer keeps no process alive. */
  watch(): void {
    this.#watcher ??= setInterval(() => void this.snapshot(), 1000)
    this.#watcher.unref()
  }

  unwatch(): void {
    if (this.#watcher !== null) clearInterval(this.#watcher)
    this.#watcher = null
  }

  /** The descendants seen that still run as themselves: their pid not reused by a later process. */
  async members(): Promise<number[]> {
    const live: number[] = []
    for (const [p, started] of this.#seen) if ((await this.#probe.startTime(p)) === started) live.push(p)
    return live
  }

  /** SIGKILL at once to the root's group and every descendant seen (servegate itself is going down). */
  killNow(): void {
    if (this.#root < 0) return
    killTreeSync(this.#root, 'SIGKILL')
    for (const p of this.#seen.keys()) signalPid(p, 'SIGKILL')
  }
}
