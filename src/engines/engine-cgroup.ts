import { mkdirSync, readFileSync, rmdirSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { signalPid } from './process-tree.ts'

function readOrNull(path: string): string | null {
  try {
    return readFileSync(path, 'utf8')
  } catch {
    return null
  }
}

/** `\040`-style octal escapes of mountinfo paths. */
function unescapeMountPath(path: string): string {
  return path.replace(/\\([0-7]{3})/g, (_, oct: string) => String.fromCharCode(parseInt(oct, 8)))
}

/**
 * The cgroup v2 directory a process is in, from its `/proc/<pid>/cgroup` (the `0::/path` line)
 * and `/proc/<pid>/mountinfo` (a `cgroup2` mount showing that path: `/sys/fs/cgroup` on a pure
 * v2 host, `/sys/fs/cgroup/unified` on a hybrid one); null where no cgroup2 mount shows it
 * (cgroup v1 only, or not Linux). Pure.
 * @example cgroupDirOf('0::/user.slice/x.scope\n', '… /sys/fs/cgroup rw - cgroup2 cgroup2 rw') // '/sys/fs/cgroup/user.slice/x.scope'
 */
export function cgroupDirOf(procCgroup: string, mountinfo: string): string | null {
  const line = procCgroup.split('\n').find((l) => l.startsWith('0::'))
  const path = line?.slice(3).trim()
  if (path === undefined || !path.startsWith('/') || path.endsWith(' (deleted)')) return null
  for (const entry of mountinfo.split('\n')) {
    const fields = entry.trim().split(' ')
    const dash = fields.indexOf('-')
    if (dash < 6 || fields[dash + 1] !== 'cgroup2') continue
    const root = unescapeMountPath(fields[3] as string)
    const mountPoint = unescapeMountPath(fields[4] as string)
    const rel = root === '/' ? path : path === root ? '/' : path.startsWith(`${root}/`) ? path.slice(root.length) : null
    if (rel !== null) return join(mountPoint, rel)
  }
  return null
}

/** This process's cgroup v2 directory (see {@link cgroupDirOf}); null where there is none. */
export function ownCgroupDir(): string | null {
  const procCgroup = readOrNull('/proc/self/cgroup')
  const mountinfo = readOrNull('/proc/self/mountinfo')
  return procCgroup === null || mountinfo === null ? null : cgroupDirOf(procCgroup, mountinfo)
}

/**
 * A cgroup v2 of one engine launch, a child of servegate's own (`servegate-<launch token>`):
 * everything the engine forks stays in it whatever it does to its session, parent or
 * environment, so teardown reads the launch's processes from `cgroup.procs` and kills them all
 * with `cgroup.kill`. Created only where the hierarchy is writable (root, or a delegated
 * cgroup such as systemd's `Delegate=yes`); elsewhere {@link EngineCgroup.create} returns null and
 * teardown hunts by process tree, launch token and port.
 * @example const cgroup = EngineCgroup.create(token); cgroup?.adopt(child.pid); …; await cgroup?.kill(2000); cgroup?.remove()
 */
export class EngineCgroup {
  /** The cgroup's directory, e.g. `/sys/fs/cgroup/user.slice/…/servegate-0b6f…`. */
  readonly dir: string

  private constructor(dir: string) {
    this.dir = dir
  }

  /**
   * Creates the launch's cgroup under `parent` (this process's own by default); null where
   * cgroup v2 is not mounted or the directory cannot be made (read-only, not ours).
   */
  static create(name: string, parent: string | null = ownCgroupDir()): EngineCgroup | null {
    if (parent === null) return null
    const dir = join(parent, `servegate-${name}`)
    try {
      mkdirSync(dir)
      return new EngineCgroup(dir)
    } catch {
      return null
    }
  }

  /** Moves a process in; false when it could not be moved (no permission, gone). */
  adopt(pid: number): boolean {
    try {
      writeFileSync(join(this.dir, 'cgroup.procs'), String(pid))
      return true
    } catch {
      return false
    }
  }

  /** The processes in the cgroup now (an exited one, even unreaped, is not). */
  members(): number[] {
    const text = readOrNull(join(this.dir, 'cgroup.procs')) ?? ''
    return text.split('\n').filter(Boolean).map(Number)
  }

  /**
   * SIGKILL to every member at once: `cgroup.kill` (Linux ≥ 5.14, which also reaches a process
   * forked while it runs), else each pid of `cgroup.procs`. Synchronous, for the exit hook.
   */
  killNow(): void {
    try {
      writeFileSync(join(this.dir, 'cgroup.kill'), '1')
    } catch {
      for (const pid of this.members()) signalPid(pid, 'SIGKILL')
    }
  }

  /**
   * {@link killNow} until the cgroup can be removed, blocking at most `timeoutMs`: for
   * servegate's own exit, where nothing asynchronous runs any more.
   */
  killNowAndRemove(timeoutMs = 1000): void {
    const deadline = performance.now() + timeoutMs
    const pause = new Int32Array(new SharedArrayBuffer(4))
    for (;;) {
      this.killNow()
      if (this.remove() || performance.now() > deadline) return
      Atomics.wait(pause, 0, 0, 10)
    }
  }

  /** Kills the members until none is left or `timeoutMs` passes; true when it emptied. */
  async kill(timeoutMs: number): Promise<boolean> {
    const deadline = performance.now() + timeoutMs
    for (;;) {
      if (this.members().length === 0) return true
      if (performance.now() > deadline) return false
      this.killNow()
      await new Promise((r) => setTimeout(r, 20))
    }
  }

  /** Removes the (empty) cgroup; false when it could not (members left, already gone). */
  remove(): boolean {
    try {
      rmdirSync(this.dir)
      return true
    } catch {
      return false
    }
  }

  /**
   * Removes the cgroup once it can be, trying for at most `timeoutMs`: a member that was killed
   * keeps it busy until the last of its threads has exited. True when it was removed.
   */
  async removeWithin(timeoutMs: number): Promise<boolean> {
    const deadline = performance.now() + timeoutMs
    while (!this.remove()) {
      if (performance.now() > deadline) return false
      await new Promise((r) => setTimeout(r, 20))
    }
    return true
  }
}
