import { createWriteStream, type WriteStream } from 'node:fs'
import { mkdir, readdir, readFile } from 'node:fs/promises'
import { join } from 'node:path'
import { StringDecoder } from 'node:string_decoder'
import { execa, type ResultPromise } from 'execa'
import { sanitizeMessage } from '../errors.ts'
import { SecretStreamScrubber } from '../secrets.ts'

/** How an engine process ended. */
export interface ExitInfo {
  code: number | null
  signal: string | null
  /** True when servegate asked it to stop. */
  requested: boolean
}

/** A launched process: its whole tree is torn down by `stop()`. */
export interface EngineProcess {
  pid: number
  logPath: string
  /** The last lines of its output, sanitized. */
  logTail(): string
  /** Settles when the process exits, for whatever reason. */
  exited: Promise<ExitInfo>
  /** The exit, once it happened; null while running. */
  exit(): ExitInfo | null
  /** Records the current descendants (done every second too); call it once the engine is ready. */
  track(): Promise<void>
  /** SIGTERM to the whole tree, SIGKILL after the grace period; resolves when all are gone. */
  stop(): Promise<ExitInfo>
}

const TAIL_LINES = 40

/** Live processes, torn down when servegate's own process is interrupted or exits. */
const live = new Set<{ killNow(): void }>()
let hooksInstalled = false

function installExitHooks(): void {
  if (hooksInstalled) return
  hooksInstalled = true
  const killAll = (): void => {
    for (const p of live) p.killNow()
  }
  process.once('exit', killAll)
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
    const onSignal = (): void => {
      killAll()
      // With no other listener (library use), keep the signal's default outcome; otherwise the
      // other listener (the CLI's graceful stop) decides.
      if (process.listenerCount(signal) === 1) {
        process.off(signal, onSignal)
        process.kill(process.pid, signal)
      }
    }
    process.on(signal, onSignal)
  }
}

/** A process's start time (clock ticks since boot), to tell a pid from a later reuse of it. */
async function startTime(pid: number): Promise<string | null> {
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

function signalPid(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(pid, signal)
  } catch {
    // Already gone.
  }
}

function killTreeSync(pid: number, signal: NodeJS.Signals): void {
  // The engine leads its own process group (detached), so this reaches every member that did
  // not start a session of its own.
  try {
    process.kill(-pid, signal)
  } catch {
    signalPid(pid, signal)
  }
}

export interface SpawnOptions {
  argv: string[]
  env: Record<string, string>
  logPath: string
  graceMs: number
}

/**
 * Spawns an engine from an argv array (never a shell) in its own process group, with exactly
 * the given environment, its output to a log file (scrubbed of the registered secrets as it is
 * written) and a tail kept in memory (sanitized when read).
 */
export async function spawnEngine(o: SpawnOptions): Promise<EngineProcess> {
  await mkdir(join(o.logPath, '..'), { recursive: true })
  const log: WriteStream = createWriteStream(o.logPath, { flags: 'a' })
  const tail: string[] = []
  let partial = ''
  const scrubber = new SecretStreamScrubber()
  const onText = (text: string): void => {
    log.write(scrubber.write(text))
    const lines = (partial + text).split(/\r?\n/)
    partial = lines.pop() ?? ''
    for (const line of lines) {
      tail.push(line)
      if (tail.length > TAIL_LINES) tail.shift()
    }
  }

  const [file, ...args] = o.argv
  const child: ResultPromise = execa(file as string, args, {
    env: o.env,
    extendEnv: false,
    detached: true,
    cleanup: true,
    reject: false,
    stdin: 'ignore',
    stdout: 'pipe',
    stderr: 'pipe',
    buffer: false,
  })
  // One decoder per stream: a character split between two chunks of one stream stays whole.
  const decoders = [new StringDecoder('utf8'), new StringDecoder('utf8')] as const
  child.stdout?.on('data', (bytes: Buffer) => onText(decoders[0].write(bytes)))
  child.stderr?.on('data', (bytes: Buffer) => onText(decoders[1].write(bytes)))

  let exitInfo: ExitInfo | null = null
  let requested = false
  // Every descendant ever seen, with its start time: a worker that detached into a session of
  // its own, and whose parent died first, is still ours to stop (vLLM forks engine cores).
  const seen = new Map<number, string>()
  const snapshot = async (): Promise<void> => {
    if (child.pid === undefined) return
    for (const p of await descendants(child.pid)) {
      if (!seen.has(p)) {
        const started = await startTime(p)
        if (started !== null) seen.set(p, started)
      }
    }
  }
  const watcher = setInterval(() => void snapshot(), 1000)
  watcher.unref()
  const exited: Promise<ExitInfo> = child.then(
    (result) => {
      exitInfo = { code: result.exitCode ?? null, signal: result.signal ?? null, requested }
      return exitInfo
    },
    (error: unknown) => {
      exitInfo = { code: null, signal: null, requested }
      onText(`servegate: ${(error as Error).message}\n`)
      return exitInfo
    },
  )
  void exited.then(() => {
    clearInterval(watcher)
    if (partial !== '') tail.push(partial)
    log.end(scrubber.write(decoders[0].end() + decoders[1].end()) + scrubber.end())
  })

  const pid = child.pid ?? -1
  const proc: EngineProcess = {
    pid,
    logPath: o.logPath,
    logTail: () =>
      sanitizeMessage(
        [...tail, partial]
          .filter((l) => l !== '')
          .slice(-TAIL_LINES)
          .join('\n'),
        4000,
      ),
    exited,
    exit: () => exitInfo,
    track: snapshot,
    async stop() {
      if (pid < 0) return exited
      requested = true
      // Collect the tree first: children that started their own session escape the group signal.
      if (exitInfo === null) await snapshot()
      const tree: number[] = []
      for (const [p, started] of seen) if ((await startTime(p)) === started) tree.push(p)
      killTreeSync(pid, 'SIGTERM')
      for (const p of tree) signalPid(p, 'SIGTERM')
      const timer = setTimeout(() => {
        killTreeSync(pid, 'SIGKILL')
        for (const p of tree) signalPid(p, 'SIGKILL')
      }, o.graceMs)
      const info = await exited
      clearTimeout(timer)
      // The leader may exit first and leave members behind: make sure the whole tree is gone.
      await waitGone(tree, o.graceMs)
      return info
    },
  }
  if (pid > 0) {
    void snapshot()
    // On servegate's own exit or interrupt: the stop was asked for, so it is no engine failure.
    const entry = {
      killNow() {
        requested = true
        killTreeSync(pid, 'SIGKILL')
        for (const p of seen.keys()) signalPid(p, 'SIGKILL')
      },
    }
    live.add(entry)
    installExitHooks()
    void exited.then(() => live.delete(entry))
  }
  return proc
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0)
    return true
  } catch {
    return false
  }
}

/** Waits for the given pids to exit, SIGKILLing stragglers after `graceMs`. */
async function waitGone(pids: number[], graceMs: number): Promise<void> {
  const deadline = performance.now() + graceMs
  let remaining = pids.filter(alive)
  while (remaining.length > 0 && performance.now() < deadline) {
    await new Promise((r) => setTimeout(r, 50))
    remaining = remaining.filter(alive)
  }
  for (const p of remaining) signalPid(p, 'SIGKILL')
}
