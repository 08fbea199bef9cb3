import { createWriteStream } from 'node:fs'
import { mkdir } from 'node:fs/promises'
import { join } from 'node:path'
import { execa, type ResultPromise } from 'execa'
import type { TeardownSurvivor } from '../schema/run.ts'
import { commandLine, LAUNCH_TOKEN_VAR, markedProcesses, newLaunchToken, processGroup, running } from './launch-token.ts'
import { LogTail } from './log-tail.ts'
import { killTreeSync, ProcessTree, signalPid } from './process-tree.ts'

/** How an engine process ended. */
interface ExitInfo {
  code: number | null
  signal: string | null
  /** True when servegate asked it to stop. */
  requested: boolean
}

/** How a launched process tree went down. */
interface TreeTeardown {
  exit: ExitInfo
  /** Processes found outside the tree (by the launch token), or that outlived SIGTERM. */
  survivors: TeardownSurvivor[]
}

/** A launched process: its whole tree is torn down by `stop()`. */
export interface EngineProcess {
  pid: number
  /** The value of `SERVEGATE_LAUNCH` in the environment of every process of this launch. */
  launchToken: string
  logPath: string
  /** The last lines of its output, sanitized. */
  logTail(): string
  /** Settles when the process exits, for whatever reason. */
  exited: Promise<ExitInfo>
  /** The exit, once it happened; null while running. */
  exit(): ExitInfo | null
  /** Records the current descendants (done every second too); call it once the engine is ready. */
  track(): Promise<void>
  /**
   * SIGTERM to the whole tree and to every process carrying the launch token, SIGKILL after the
   * grace period; resolves when all are gone, with those that escaped the tree or outlived
   * SIGTERM. Idempotent.
   */
  stop(): Promise<TreeTeardown>
}

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
  const log = new LogTail(createWriteStream(o.logPath, { flags: 'a' }))
  const [file, ...args] = o.argv
  const token = newLaunchToken()
  const child: ResultPromise = execa(file as string, args, {
    env: { ...o.env, [LAUNCH_TOKEN_VAR]: token },
    extendEnv: false,
    detached: true,
    cleanup: true,
    reject: false,
    stdin: 'ignore',
    stdout: 'pipe',
    stderr: 'pipe',
    buffer: false,
  })
  child.stdout?.on('data', (bytes: Buffer) => log.stdout(bytes))
  child.stderr?.on('data', (bytes: Buffer) => log.stderr(bytes))

  const pid = child.pid ?? -1
  const tree = new ProcessTree(pid)
  tree.watch()
  let exitInfo: ExitInfo | null = null
  let requested = false
  const exited: Promise<ExitInfo> = child.then(
    (result) => (exitInfo = { code: result.exitCode ?? null, signal: result.signal ?? null, requested }),
    (error: unknown) => {
      exitInfo = { code: null, signal: null, requested }
      log.text(`servegate: ${(error as Error).message}\n`)
      return exitInfo
    },
  )
  void exited.then(() => {
    tree.unwatch()
    log.end()
  })

  let stopping: Promise<TreeTeardown> | null = null
  const tearDown = async (): Promise<TreeTeardown> => {
    if (pid < 0) return { exit: await exited, survivors: [] }
    requested = true
    // Collect the tree first: children that started their own session escape the group signal.
    if (exitInfo === null) await tree.snapshot()
    const members = [...(exitInfo === null ? [pid] : []), ...(await tree.members())]
    const survivors = await stopTree(pid, members, token, o.graceMs, () => exitInfo !== null)
    return { exit: await exited, survivors }
  }
  if (pid > 0) {
    void tree.snapshot()
    // On servegate's own exit or interrupt: the stop was asked for, so it is no engine failure.
    const entry = {
      killNow() {
        requested = true
        tree.killNow()
        for (const p of markedProcesses(token)) signalPid(p, 'SIGKILL')
      },
    }
    live.add(entry)
    installExitHooks()
    void exited.then(() => live.delete(entry))
  }
  return {
    pid,
    launchToken: token,
    logPath: o.logPath,
    logTail: () => log.tail(),
    exited,
    exit: () => exitInfo,
    track: () => tree.snapshot(),
    stop: () => (stopping ??= tearDown()),
  }
}

type Target = TeardownSurvivor & { foundBy: 'process-tree' | 'launch-token' }

/** Resolves once `done()` holds or the deadline (performance.now() ms) passes. */
async function until(done: () => boolean, deadline: number): Promise<void> {
  while (!done() && performance.now() < deadline) await new Promise((r) => setTimeout(r, 50))
}

/**
 * Stops a launch: SIGTERM to the leader's group, to the tree seen by parent walks and to every
 * process whose environment carries the launch token (a double-forked daemon reparented to
 * init); SIGKILL to whatever still runs after `graceMs`; then sweeps once more for marked
 * processes forked during the shutdown. Returns the processes found only by the token, and
 * those that needed SIGKILL or could not be ended.
 */
async function stopTree(
  leader: number,
  tree: number[],
  token: string,
  graceMs: number,
  leaderExited: () => boolean,
): Promise<TeardownSurvivor[]> {
  const targets = new Map<number, Target>()
  const add = async (pid: number, foundBy: Target['foundBy']): Promise<Target | null> => {
    if (targets.has(pid)) return null
    const target: Target = { pid, command: await commandLine(pid), foundBy, endedBy: null }
    targets.set(pid, target)
    return target
  }
  for (const p of tree) await add(p, 'process-tree')
  // A marked process still in the leader's group is part of the tree the group signal reaches.
  for (const p of markedProcesses(token)) await add(p, processGroup(p) === leader ? 'process-tree' : 'launch-token')
  const live = (): Target[] => [...targets.values()].filter((t) => running(t.pid))

  killTreeSync(leader, 'SIGTERM')
  for (const t of targets.values()) signalPid(t.pid, 'SIGTERM')
  await until(() => leaderExited() && live().length === 0, performance.now() + graceMs)
  const stubborn = new Set(live())
  if (!leaderExited() || stubborn.size > 0) killTreeSync(leader, 'SIGKILL')
  for (const t of targets.values()) {
    t.endedBy = stubborn.has(t) ? 'SIGKILL' : 'SIGTERM'
    if (stubborn.has(t)) signalPid(t.pid, 'SIGKILL')
  }
  // Workers forked while the tree shut down: nothing of this launch may outlive it.
  for (let sweep = 0; sweep < 3; sweep++) {
    const late = markedProcesses(token).filter((p) => !targets.has(p))
    if (late.length === 0) break
    for (const p of late) {
      const target = await add(p, 'launch-token')
      signalPid(p, 'SIGKILL')
      if (target !== null) target.endedBy = 'SIGKILL'
    }
    await until(() => live().length === 0, performance.now() + 1000)
  }
  await until(() => live().length === 0, performance.now() + 2000)
  for (const t of live()) t.endedBy = null
  return [...targets.values()].filter((t) => t.foundBy !== 'process-tree' || t.endedBy !== 'SIGTERM')
}
