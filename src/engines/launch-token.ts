import { randomUUID } from 'node:crypto'
import { readdirSync, readFileSync, readlinkSync } from 'node:fs'
import { readFile } from 'node:fs/promises'
import { connect } from 'node:net'
import { sanitizeMessage } from '../errors.ts'
import { redactArgv } from './manifest-facts.ts'

/**
 * The environment variable that marks every process of one engine launch. Children inherit it
 * whatever they do to their session or parent, so teardown finds a worker that double-forked
 * and was reparented to init (the way CI process-tree killers find a build's processes).
 */
export const LAUNCH_TOKEN_VAR = 'SERVEGATE_LAUNCH'

/** A fresh token for one launch. */
export function newLaunchToken(): string {
  return randomUUID()
}

function pidEntries(): number[] {
  return listOrEmpty('/proc')
    .filter((e) => /^\d+$/.test(e))
    .map(Number)
}

/**
 * Every live process (servegate's own excepted) whose environment holds
 * `SERVEGATE_LAUNCH=<token>`, read from /proc/<pid>/environ. Synchronous so that the exit hook
 * can use it; a scan of a few thousand processes takes milliseconds. Only processes of the same
 * user are readable, which are the only ones servegate could have started.
 * @example markedProcesses('0b6f…') // [4121, 4188]
 */
export function markedProcesses(token: string): number[] {
  const needle = `${LAUNCH_TOKEN_VAR}=${token}`
  const out: number[] = []
  for (const pid of pidEntries()) {
    if (pid === process.pid) continue
    try {
      const environ = readFileSync(`/proc/${pid}/environ`, 'latin1')
      if (environ.split('\0').includes(needle)) out.push(pid)
    } catch {
      // Gone, or another user's.
    }
  }
  return out
}

/** The pid's state letter from /proc/<pid>/stat (`R`, `S`, `Z`…), or null when it is gone. */
function state(pid: number): string | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3)
  } catch {
    return null
  }
}

/** True while the pid runs; a zombie (exited, waiting for its parent to reap it) does not. */
export function running(pid: number): boolean {
  const s = state(pid)
  return s !== null && s !== 'Z' && s !== 'X'
}

/** The process group of a pid, or null when it is gone. */
export function processGroup(pid: number): number | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
    return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[2])
  } catch {
    return null
  }
}

/** The command line of a pid for a report: secrets redacted, at most 200 characters. */
export async function commandLine(pid: number): Promise<string> {
  try {
    const argv = (await readFile(`/proc/${pid}/cmdline`, 'utf8')).split('\0').filter(Boolean)
    return argv.length === 0 ? '(unknown)' : sanitizeMessage(redactArgv(argv).join(' '), 200)
  } catch {
    return '(gone)'
  }
}

function accepts(host: string, port: number, timeoutMs: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ host, port })
    const done = (open: boolean): void => {
      socket.destroy()
      resolve(open)
    }
    socket.setTimeout(timeoutMs, () => done(false))
    socket.once('connect', () => done(true))
    socket.once('error', () => done(false))
  })
}

/** True when something accepts TCP connections on the loopback port (127.0.0.1 or ::1). */
export async function portAccepts(port: number, timeoutMs = 1000): Promise<boolean> {
  const [v4, v6] = await Promise.all([accepts('127.0.0.1', port, timeoutMs), accepts('::1', port, timeoutMs)])
  return v4 || v6
}

function readOrEmpty(path: string): string {
  try {
    return readFileSync(path, 'utf8')
  } catch {
    return ''
  }
}

function listOrEmpty(dir: string): string[] {
  try {
    return readdirSync(dir)
  } catch {
    return []
  }
}

/** The socket inodes listening on the port, from /proc/net/tcp and tcp6 (state 0A is LISTEN). */
export function listeningSockets(port: number): Set<string> {
  const inodes = new Set<string>()
  const hexPort = port.toString(16).toUpperCase().padStart(4, '0')
  for (const table of ['/proc/net/tcp', '/proc/net/tcp6']) {
    for (const line of readOrEmpty(table).split('\n').slice(1)) {
      const cols = line.trim().split(/\s+/)
      if (cols.length > 9 && cols[1]?.endsWith(`:${hexPort}`) && cols[3] === '0A') inodes.add(cols[9] as string)
    }
  }
  return inodes
}

/**
 * The pids holding a socket that listens on the port (those of the same user; others are
 * unreadable), or only one of `among` (socket inodes from {@link listeningSockets}) when given.
 */
export function portListeners(port: number, among?: ReadonlySet<string>): number[] {
  const listening = listeningSockets(port)
  const inodes = among === undefined ? listening : new Set([...listening].filter((i) => among.has(i)))
  if (inodes.size === 0) return []
  const out: number[] = []
  for (const pid of pidEntries()) {
    for (const fd of listOrEmpty(`/proc/${pid}/fd`)) {
      try {
        const link = readlinkSync(`/proc/${pid}/fd/${fd}`)
        if (link.startsWith('socket:[') && inodes.has(link.slice(8, -1))) {
          out.push(pid)
          break
        }
      } catch {
        // Closed while we looked.
      }
    }
  }
  return out
}

/** The real user id a process runs as, from /proc/<pid>/status; null when it is gone. */
export function processUid(pid: number): number | null {
  const line = readOrEmpty(`/proc/${pid}/status`)
    .split('\n')
    .find((l) => l.startsWith('Uid:'))
  const uid = line === undefined ? NaN : Number(line.split(/\s+/)[1])
  return Number.isInteger(uid) ? uid : null
}
