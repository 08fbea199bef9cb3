/**
 * Watches one engine launch for servegate's death. servegate holds the write end of this
 * process's stdin and writes `done` once it no longer needs the watch (the launch was torn down,
 * or the engine exited and left nothing running). When stdin ends without it, servegate was
 * killed without running its exit hooks (SIGKILL after a SIGTERM it did not finish, the OOM
 * killer, a cancelled CI job), and this process stops the launch the way teardown would: SIGTERM
 * to the engine's process group, to every process whose environment carries the launch token
 * and to the launch's cgroup; SIGKILL after the grace period to whatever is left; then it removes
 * the cgroup. The group is signalled only while the engine's pid still belongs to the engine
 * (its start time matches), never to a later process that reused the pid. It imports only Node's
 * own modules: one starts with every launch.
 *
 * Usage: node engine-reaper.js PID START_TICKS|- TOKEN GRACE_MS [CGROUP_DIR]
 */
import { readdirSync, readFileSync, rmdirSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'

const [leaderArg, startTicks, token, graceArg, cgroupDir] = process.argv.slice(2)
const leader = Number(leaderArg)
const graceMs = Number(graceArg)
// Same name as LAUNCH_TOKEN_VAR in launch-token.ts, which this script does not load.
const needle = `SERVEGATE_LAUNCH=${token}`

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms))

/** The fields of /proc/<pid>/stat after the command name (state, ppid, pgrp, …); null when it is gone. */
function statFields(pid: number): string[] | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')
  } catch {
    return null
  }
}

function marked(pid: number): boolean {
  try {
    return readFileSync(`/proc/${pid}/environ`, 'latin1').split('\0').includes(needle)
  } catch {
    return false
  }
}

function cgroupMembers(): number[] {
  if (cgroupDir === undefined) return []
  try {
    return readFileSync(join(cgroupDir, 'cgroup.procs'), 'utf8').split('\n').filter(Boolean).map(Number)
  } catch {
    return []
  }
}

/** The launch's running processes: the engine's group (when it is the engine's), the token's and the cgroup's. */
function launchProcesses(groupIsOurs: boolean): number[] {
  const out = new Set(cgroupMembers())
  let entries: string[] = []
  try {
    entries = readdirSync('/proc')
  } catch {
    // No /proc: only the group signal reaches anything.
  }
  for (const entry of entries) {
    const pid = Number(entry)
    if (!/^\d+$/.test(entry) || pid === process.pid) continue
    const fields = statFields(pid)
    if (fields === null || fields[0] === 'Z' || fields[0] === 'X') continue
    if ((groupIsOurs && Number(fields[2]) === leader) || marked(pid)) out.add(pid)
  }
  return [...out]
}

function signal(pid: number, name: NodeJS.Signals): void {
  try {
    process.kill(pid, name)
  } catch {
    // Already gone.
  }
}

function signalAll(pids: number[], name: NodeJS.Signals, groupIsOurs: boolean): void {
  if (groupIsOurs) signal(-leader, name)
  for (const pid of pids) signal(pid, name)
  if (name === 'SIGKILL' && cgroupDir !== undefined) {
    try {
      writeFileSync(join(cgroupDir, 'cgroup.kill'), '1')
    } catch {
      // No cgroup.kill before Linux 5.14: its members were signalled one by one above.
    }
  }
}

function removeCgroup(): boolean {
  if (cgroupDir === undefined) return true
  try {
    rmdirSync(cgroupDir)
    return true
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'ENOENT'
  }
}

async function reap(): Promise<void> {
  // Checked once: while any member is left the kernel does not hand the group's number to a new process.
  const groupIsOurs = startTicks !== '-' && statFields(leader)?.[19] === startTicks
  signalAll(launchProcesses(groupIsOurs), 'SIGTERM', groupIsOurs)
  const graceEnd = performance.now() + graceMs
  while (launchProcesses(groupIsOurs).length > 0 && performance.now() < graceEnd) await sleep(100)
  // SIGKILL until nothing is left (a worker forked during the shutdown too), for at most 2 s.
  for (const killEnd = performance.now() + 2000; performance.now() < killEnd; await sleep(50)) {
    const left = launchProcesses(groupIsOurs)
    if (left.length === 0 && removeCgroup()) break
    signalAll(left, 'SIGKILL', groupIsOurs)
  }
  process.exit(0)
}

// A terminal hang-up is for servegate, which then tears down or dies; this watch must outlast it.
process.on('SIGHUP', () => {})
let heard = ''
let reaping = false
const onLost = (): void => {
  if (reaping) return
  reaping = true
  void reap()
}
process.stdin.setEncoding('utf8')
process.stdin.on('data', (chunk: string) => {
  heard += chunk
  if (heard.split('\n').includes('done')) process.exit(0)
})
process.stdin.once('end', onLost)
process.stdin.once('error', onLost)
