import type { TeardownSurvivor } from '../schema/run.ts'
import { commandLine, listeningSockets, markedProcesses, portListeners, processUid, running } from './launch-token.ts'
import { lineage, signalPid, startTime } from './process-tree.ts'

/** What the port hunt knows of the launch whose port is still open after its processes were stopped. */
export interface PortHuntOptions {
  /** The engine's name in findings, e.g. `vllm`. */
  kind: string
  port: number
  /** True when servegate picked the port for this launch (`port: 0`); a port set in the config is not servegate's to clear. */
  allocated: boolean
  /** The launch token: a listener carrying it is the launch's wherever the port came from. */
  token: string
  /** The engine's start (clock ticks since boot); a listener that started before it is not the launch's. null: unknown. */
  startTicks: number | null
  /** The socket inodes that listened on the port when teardown began, while the launch held it. */
  socketsAtStop: ReadonlySet<string>
  /** How long a listener has between SIGTERM and SIGKILL, ms. */
  graceMs: number
}

/** A listener the hunt found: as the record keeps it, and the sentence for people. */
export interface PortFinding {
  survivor: TeardownSurvivor
  finding: string
}

async function until(done: () => boolean, ms: number): Promise<void> {
  const deadline = performance.now() + ms
  while (!done() && performance.now() < deadline) await new Promise((r) => setTimeout(r, 50))
}

/**
 * Waits (at most `ms`) while the port's listening sockets are held by no process: one that has
 * just exited leaves its socket open a moment longer (a multi-threaded process is a zombie once
 * its main thread ends; its files close when the last thread does).
 */
export async function settlePort(port: number, ms = 2000): Promise<void> {
  await until(() => listeningSockets(port).size === 0 || portListeners(port).length > 0, ms)
}

/**
 * Why a listener on the launch's port is not the launch's to stop, or null when it is: it
 * carries the launch token, or (on a port servegate picked) it runs as servegate's user, is
 * neither servegate nor one of its parents, started after the engine and already held the port
 * when teardown began (nothing else could bind it while the engine did). One that cleared its
 * environment and left the tree (`setsid env -i`, a supervisor's daemon) is stopped this way.
 */
async function notOurs(pid: number, o: PortHuntOptions, marked: ReadonlySet<number>, early: ReadonlySet<number>): Promise<string | null> {
  if (marked.has(pid)) return null
  if (!o.allocated) return `the engine's config set port ${o.port} and the process carries no token of this launch`
  if (lineage(process.pid).has(pid)) return 'it is servegate itself or one of its parents'
  if (processUid(pid) !== process.getuid?.()) return 'it runs as another user'
  const started = Number((await startTime(pid)) ?? NaN)
  if (o.startTicks === null || !(started >= o.startTicks)) return 'it did not start after the engine'
  if (!early.has(pid)) return 'it bound the port after teardown began'
  return null
}

function sentence(o: PortHuntOptions, s: TeardownSurvivor, why: string | null): string {
  const who = `engine ${o.kind}: pid ${s.pid} (${s.command})`
  if (why !== null) return `${who} listens on the engine's port and was left running: ${why}`
  return s.endedBy === null
    ? `${who} still listened on the engine's port after teardown and could not be ended`
    : `${who} still listened on the engine's port after teardown: ended by ${s.endedBy}`
}

/**
 * Stops what still listens on a launch's loopback port after its processes were stopped, found
 * through /proc's socket tables (the listening socket's inode, then the /proc/<pid>/fd link that
 * holds it): SIGTERM, SIGKILL after the grace period. A listener that is not the launch's (see
 * {@link notOurs}) is reported and left running.
 */
export async function huntPortListeners(o: PortHuntOptions): Promise<PortFinding[]> {
  const marked = new Set(markedProcesses(o.token))
  const early = new Set(portListeners(o.port, o.socketsAtStop))
  const found: Array<{ survivor: TeardownSurvivor; why: string | null }> = []
  for (const pid of portListeners(o.port)) {
    const why = await notOurs(pid, o, marked, early)
    found.push({ survivor: { pid, command: await commandLine(pid), foundBy: 'port', endedBy: null }, why })
    if (why === null) signalPid(pid, 'SIGTERM')
  }
  const targets = found.filter((f) => f.why === null).map((f) => f.survivor)
  await until(() => targets.every((t) => !running(t.pid)), o.graceMs)
  for (const t of targets) {
    t.endedBy = running(t.pid) ? 'SIGKILL' : 'SIGTERM'
    if (t.endedBy === 'SIGKILL') signalPid(t.pid, 'SIGKILL')
  }
  await until(() => targets.every((t) => !running(t.pid)), 2000)
  for (const t of targets) if (running(t.pid)) t.endedBy = null
  await settlePort(o.port)
  return found.map(({ survivor, why }) => ({ survivor, finding: sentence(o, survivor, why) }))
}
