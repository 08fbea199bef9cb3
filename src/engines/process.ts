import { spawn } from 'node:child_process'
import { createWriteStream } from 'node:fs'
import { mkdir } from 'node:fs/promises'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import type { ResultPromise } from 'execa'
import type { EngineTeardown, TeardownSurvivor } from '../schema/run.ts'
import { EngineCgroup } from './engine-cgroup.ts'
import { commandLine, LAUNCH_TOKEN_VAR, markedProcesses, newLaunchToken, processGroup, running } from './launch-token.ts'
import { LogTail } from './log-tail.ts'
import { killTreeSync, ProcessTree, signalPid, startTime } from './process-tree.ts'

/** How a launch's processes are held together (the record's `teardown.confinement`). */
type Confinement = NonNullable<EngineTeardown['confinement']>

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
  /** Processes found outside the tree (by the launch token or in the cgroup), or that outlived SIGTERM. */
  survivors: TeardownSurvivor[]
  confinement: Confinement
}

/** A launched process: its whole tree is torn down by `stop()`. */
export interface EngineProcess {
  pid: number
  /** The value of `SERVEGATE_LAUNCH` in the environment of every process of this launch. */
  launchToken: string
  /** `cgroup` when the launch runs in a cgroup v2 of its own, else `process-group`. */
  confinement: Confinement
  /** The engine's start time (clock ticks since boot, /proc/<pid>/stat), to tell its processes from older ones; null when unknown. */
  startTicks: number | null
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
   * SIGTERM to the whole tree, to every process carrying the launch token and to every process
   * in the launch's cgroup, SIGKILL after the grace period (the whole cgroup); resolves when all
   * are gone, with those that escaped the tree or outlived SIGTERM. Idempotent.
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
  /** Where `argv[0]` resolves on the engine's PATH (the exec into a cgroup needs a path). @default argv[0] */
  executable?: string
  env: Record<string, string>
  logPath: string
  graceMs: number
  /** Run the launch in a cgroup v2 of its own where one can be created. @default false */
  ownCgroup?: boolean
}

/** The helper that joins a cgroup and execs the engine: the sources in a clone, the build in the package. */
const CGROUP_EXEC = fileURLToPath(new URL(import.meta.url.endsWith('.ts') ? './cgroup-exec.ts' : './cgroup-exec.js', import.meta.url))

/** The watchdog that stops a launch when servegate dies without tearing it down (same two homes). */
const ENGINE_REAPER = fileURLToPath(new URL(import.meta.url.endsWith('.ts') ? './engine-reaper.ts' : './engine-reaper.js', import.meta.url))

/**
 * Starts the launch's {@link ENGINE_REAPER}: a process of its own (its own group, so a Ctrl-C to
 * servegate's does not reach it first) that reads a pipe from servegate. The kernel closes the
 * pipe however servegate ends; when it closes before the returned stand-down was called,
 * servegate died without its exit hooks (SIGKILL, the OOM killer) and the reaper stops the
 * launch. Neither the process nor its pipe keeps servegate running.
 */
function startReaper(pid: number, startTicks: number | null, token: string, graceMs: number, cgroup: EngineCgroup | null): () => void {
  const ticks = startTicks === null ? '-' : String(startTicks)
  const argv = [ENGINE_REAPER, String(pid), ticks, token, String(graceMs), ...(cgroup === null ? [] : [cgroup.dir])]
  // Not execa: its `cleanup` would kill the reaper on servegate's exit, when it may be needed.
  const reaper = spawn(process.execPath, ['--disable-warning=ExperimentalWarning', ...argv], {
    detached: true,
    // Holds no directory of servegate's busy (a temporary one to remove, a mount).
    cwd: '/',
    // Not servegate's environment: no launch token of an enclosing launch, no NODE_OPTIONS to load.
    env: {},
    stdio: ['pipe', 'ignore', 'ignore'],
  })
  // One that could not start or already exited is no failure of the launch: the exit hooks remain.
  reaper.on('error', () => {})
  reaper.stdin.on('error', () => {})
  // An idle pipe holds no event loop; the process handle would.
  reaper.unref()
  let stoodDown = false
  return () => {
    if (stoodDown) return
    stoodDown = true
    reaper.stdin.end('done\n')
  }
}

/**
 * The argv that starts the engine: through {@link CGROUP_EXEC} into the cgroup where this Node can
 * exec (Node ≥ 22.15), else the engine's own (moved into the cgroup right after the spawn).
 */
function launchArgv(o: SpawnOptions, cgroup: EngineCgroup | null): string[] {
  if (cgroup === null || process.execve === undefined) return o.argv
  const [argv0, ...args] = o.argv as [string, ...string[]]
  return [process.execPath, '--disable-warning=ExperimentalWarning', CGROUP_EXEC, cgroup.dir, o.executable ?? argv0, argv0, ...args]
}

/**
 * Spawns an engine from an argv array (never a shell) in its own process group, with exactly
 * the given environment, its output to a log file (scrubbed of the registered secrets as it is
 * written) and a tail kept in memory (sanitized when read). With `ownCgroup`, where cgroup v2 is
 * writable, the engine starts in a cgroup of its own.
 */
export async function spawnEngine(o: SpawnOptions): Promise<EngineProcess> {
  await mkdir(join(o.logPath, '..'), { recursive: true })
  const log = new LogTail(createWriteStream(o.logPath, { flags: 'a' }))
  const token = newLaunchToken()
  let cgroup = o.ownCgroup === true ? EngineCgroup.create(token) : null
  const [file, ...args] = launchArgv(o, cgroup)
  // Loaded when an engine is launched: a cell against a running endpoint never pays its ~20 MB.
  const { execa } = await import('execa')
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
  // The helper joined the cgroup before it exec'd the engine; without it this move races with
  // the engine's first forks (a fork that wins keeps the token and is hunted by it). Either way
  // a launch the cgroup does not hold is not confined by it.
  if (cgroup !== null && (pid < 0 || !cgroup.adopt(pid))) {
    cgroup.remove()
    cgroup = null
  }
  const confinement: Confinement = cgroup === null ? 'process-group' : 'cgroup'
  const started = pid < 0 ? null : await startTime(pid)
  const startTicks = started === null ? null : Number(started)
  const standDown = pid > 0 ? startReaper(pid, startTicks, token, o.graceMs, cgroup) : () => {}
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
    // An engine that ended by itself and left nothing running needs no watch; what it left is
    // stop()'s, or the reaper's should servegate die first.
    if (!requested && markedProcesses(token).length === 0 && (cgroup?.members().length ?? 0) === 0) standDown()
  })

  let stopping: Promise<TreeTeardown> | null = null
  const tearDown = async (): Promise<TreeTeardown> => {
    if (pid < 0) return { exit: await exited, survivors: [], confinement }
    requested = true
    // Collect the tree first: children that started their own session escape the group signal.
    if (exitInfo === null) await tree.snapshot()
    const members = [...(exitInfo === null ? [pid] : []), ...(await tree.members())]
    const hunt = new LaunchHunt(pid, token, cgroup)
    const survivors = await hunt.stop(members, o.graceMs, () => exitInfo !== null)
    return { exit: await exited, survivors, confinement }
  }
  if (pid > 0) {
    void tree.snapshot()
    // On servegate's own exit or interrupt: the stop was asked for, so it is no engine failure.
    const entry = {
      killNow() {
        requested = true
        tree.killNow()
        for (const p of markedProcesses(token)) signalPid(p, 'SIGKILL')
        cgroup?.killNowAndRemove()
      },
    }
    live.add(entry)
    installExitHooks()
    void exited.then(() => live.delete(entry))
  }
  return {
    pid,
    launchToken: token,
    confinement,
    startTicks,
    logPath: o.logPath,
    logTail: () => log.tail(),
    exited,
    exit: () => exitInfo,
    track: () => tree.snapshot(),
    stop: () => (stopping ??= tearDown().finally(standDown)),
  }
}

type Target = TeardownSurvivor & { foundBy: 'process-tree' | 'launch-token' | 'cgroup' }

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms))

/**
 * The stop of one launch: SIGTERM to the leader's group, to the tree seen by parent walks, to
 * every process whose environment carries the launch token (a double-forked daemon reparented
 * to init) and to every process in the launch's cgroup (one that also cleared its
 * environment); SIGKILL to whatever still runs after the grace period (the whole cgroup at
 * once); then sweeps once more for marked processes forked during the shutdown.
 */
class LaunchHunt {
  readonly #leader: number
  readonly #token: string
  readonly #cgroup: EngineCgroup | null
  readonly #targets = new Map<number, Target>()

  constructor(leader: number, token: string, cgroup: EngineCgroup | null) {
    this.#leader = leader
    this.#token = token
    this.#cgroup = cgroup
  }

  /** Targets `pid` unless it already is; the new target, or null. */
  async #add(pid: number, foundBy: Target['foundBy']): Promise<Target | null> {
    if (this.#targets.has(pid)) return null
    const target: Target = { pid, command: await commandLine(pid), foundBy, endedBy: null }
    this.#targets.set(pid, target)
    return target
  }

  /** Targets the cgroup's members not targeted yet (a fork since the last look); those it added. */
  async #addCgroupMembers(): Promise<Target[]> {
    const added: Target[] = []
    for (const p of this.#cgroup?.members() ?? []) {
      const target = await this.#add(p, 'cgroup')
      if (target !== null) added.push(target)
    }
    return added
  }

  #live(): Target[] {
    return [...this.#targets.values()].filter((t) => running(t.pid))
  }

  #settled(): boolean {
    return this.#live().length === 0 && (this.#cgroup === null || this.#cgroup.members().length === 0)
  }

  /** Waits until `done()` holds or `ms` pass, SIGTERMing each process that joins the cgroup meanwhile. */
  async #until(done: () => boolean, ms: number): Promise<void> {
    const deadline = performance.now() + ms
    while (!done() && performance.now() < deadline) {
      await sleep(50)
      for (const t of await this.#addCgroupMembers()) signalPid(t.pid, 'SIGTERM')
    }
  }

  /**
   * Stops the launch whose tree holds `tree`; returns the processes found only by the token or
   * the cgroup, and those that needed SIGKILL or could not be ended.
   */
  async stop(tree: number[], graceMs: number, leaderExited: () => boolean): Promise<TeardownSurvivor[]> {
    for (const p of tree) await this.#add(p, 'process-tree')
    // A marked process still in the leader's group is part of the tree the group signal reaches.
    for (const p of markedProcesses(this.#token)) await this.#add(p, processGroup(p) === this.#leader ? 'process-tree' : 'launch-token')
    await this.#addCgroupMembers()

    killTreeSync(this.#leader, 'SIGTERM')
    for (const t of this.#targets.values()) signalPid(t.pid, 'SIGTERM')
    await this.#until(() => leaderExited() && this.#settled(), graceMs)
    const stubborn = new Set(this.#live())
    if (!leaderExited() || stubborn.size > 0) killTreeSync(this.#leader, 'SIGKILL')
    for (const t of this.#targets.values()) {
      t.endedBy = stubborn.has(t) ? 'SIGKILL' : 'SIGTERM'
      if (stubborn.has(t)) signalPid(t.pid, 'SIGKILL')
    }
    await this.#killCgroup()
    await this.#sweep()
    await this.#until(() => this.#settled(), 2000)
    await this.#cgroup?.removeWithin(2000)
    for (const t of this.#live()) t.endedBy = null
    return [...this.#targets.values()].filter((t) => t.foundBy !== 'process-tree' || t.endedBy !== 'SIGTERM')
  }

  /** SIGKILL to the whole cgroup: what joined it during the grace period had its SIGTERM. */
  async #killCgroup(): Promise<void> {
    if (this.#cgroup === null) return
    for (const t of await this.#addCgroupMembers()) t.endedBy = 'SIGKILL'
    await this.#cgroup.kill(2000)
  }

  /** Workers forked while the tree shut down: nothing of this launch may outlive it. */
  async #sweep(): Promise<void> {
    for (let sweep = 0; sweep < 3; sweep++) {
      const late = markedProcesses(this.#token).filter((p) => !this.#targets.has(p))
      if (late.length === 0) break
      for (const p of late) {
        const target = await this.#add(p, 'launch-token')
        signalPid(p, 'SIGKILL')
        if (target !== null) target.endedBy = 'SIGKILL'
      }
      await this.#until(() => this.#live().length === 0, 1000)
    }
  }
}
