import { alive, treePids } from '../../fixtures/processes.ts'
import { type ChildProcess, spawn } from 'node:child_process'
import { existsSync, readdirSync, readFileSync, rmdirSync } from 'node:fs'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { afterAll, afterEach, beforeAll, describe, expect, test } from 'vitest'
import { EngineCgroup, ownCgroupDir } from './engine-cgroup.ts'
import { markedProcesses, newLaunchToken } from './launch-token.ts'
import { type EngineProcess, spawnEngine } from './process.ts'
import { signalPid, startTime } from './process-tree.ts'

const PROCESS_MODULE = new URL('./process.ts', import.meta.url).href
const REAPER = fileURLToPath(new URL('./engine-reaper.ts', import.meta.url))

let dir = ''
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'servegate-reaper-'))
})
afterAll(async () => {
  await rm(dir, { recursive: true, force: true })
})

/** What a test started, SIGKILLed by the clean-up even when the test fails. */
const started: ChildProcess[] = []
const pidfiles: string[] = []
const tokens: string[] = []
const engines: EngineProcess[] = []
afterEach(async () => {
  await Promise.all(engines.splice(0).map((e) => e.stop()))
  for (const child of started.splice(0)) if (child.pid !== undefined) signalPid(child.pid, 'SIGKILL')
  for (const pid of (await Promise.all(pidfiles.splice(0).map(treePids))).flat()) signalPid(pid, 'SIGKILL')
  for (const token of tokens.splice(0)) {
    for (const pid of [...reapersOf(token), ...markedProcesses(token)]) signalPid(pid, 'SIGKILL')
    const cgroup = join(ownCgroupDir() ?? '/nonexistent', `servegate-${token}`)
    if (existsSync(cgroup)) await expect.poll(() => rmdirOrGone(cgroup)).toBe(true)
  }
})

/** Removes an (emptied) cgroup directory; true once it is gone. */
function rmdirOrGone(path: string): boolean {
  try {
    rmdirSync(path)
  } catch {
    // Its killed members have not all exited yet.
  }
  return !existsSync(path)
}

/** Whether this machine lets servegate create a cgroup v2 of its own (root, or a delegated cgroup). */
function cgroupsWritable(): boolean {
  return EngineCgroup.create(`probe-${process.pid}`)?.remove() ?? false
}

let n = 0
function pidfile(): string {
  const path = join(dir, `pids-${n++}.txt`)
  pidfiles.push(path)
  return path
}

/** The reaper processes watching the launch `token` (it is in their argv). */
function reapersOf(token: string): number[] {
  const out: number[] = []
  for (const entry of readdirSync('/proc').filter((e) => /^\d+$/.test(e))) {
    try {
      const argv = readFileSync(`/proc/${entry}/cmdline`, 'utf8').split('\0')
      if (argv.includes(token) && argv.some((a) => a.endsWith('engine-reaper.ts')) && alive(Number(entry))) out.push(Number(entry))
    } catch {
      // Gone.
    }
  }
  return out
}

/** A worker's code: it appends its pid to FAKE_ENGINE_PIDFILE, then idles. */
const IDLE_WORKER = `require('node:fs').appendFileSync(process.env.FAKE_ENGINE_PIDFILE, process.pid + '\\n'); setInterval(() => {}, 1000)`

/**
 * An engine (`node -e`) that forks a worker in its process group and one in a session of its
 * own that ignores SIGTERM (found only by the launch token); each process appends its pid to
 * FAKE_ENGINE_PIDFILE once it is set up, then they all idle.
 */
const FORKING_ENGINE = `
const { spawn } = require('node:child_process')
const { appendFileSync } = require('node:fs')
const idle = ${JSON.stringify(IDLE_WORKER)}
spawn(process.execPath, ['-e', idle], { stdio: 'ignore' })
spawn(process.execPath, ['-e', "process.on('SIGTERM', () => {}); " + idle], { stdio: 'ignore', detached: true })
appendFileSync(process.env.FAKE_ENGINE_PIDFILE, process.pid + '\\n')
setInterval(() => {}, 1000)
`

/** The engine tree's three pids, once all of them are set up. */
async function enginePids(path: string): Promise<number[]> {
  await expect.poll(async () => (await treePids(path)).length, { timeout: 10_000 }).toBe(3)
  return treePids(path)
}

/** An engine that leaves an idle worker in a session of its own behind and exits once the worker wrote its pid to FAKE_ENGINE_PIDFILE. */
const LEAVING_ENGINE = `
const idle = ${JSON.stringify(IDLE_WORKER)}
require('node:child_process').spawn(process.execPath, ['-e', idle], { stdio: 'ignore', detached: true })
const { existsSync } = require('node:fs')
setInterval(() => existsSync(process.env.FAKE_ENGINE_PIDFILE) && process.exit(0), 50)
`

/**
 * A servegate stand-in: a Node process that launches `engine` with spawnEngine, prints
 * `{ pid, token, confinement }`, then holds it (`hold`, or in a cgroup of its own with
 * `hold-in-cgroup`), or waits for it to exit, prints the exit and ends by itself without a
 * stop (`end`).
 */
function startLauncher(
  mode: 'hold' | 'hold-in-cgroup' | 'end',
  engine: string,
  pids: string,
): { child: ChildProcess; lines: string[]; exit: Promise<number | null> } {
  const script = `
const { spawnEngine } = await import(process.env.PROCESS_MODULE)
const engine = await spawnEngine({
  argv: [process.execPath, '-e', process.env.ENGINE],
  env: { FAKE_ENGINE_PIDFILE: process.env.PIDS },
  logPath: process.env.LOG,
  graceMs: 1000,
  ownCgroup: process.env.MODE === 'hold-in-cgroup',
})
console.log(JSON.stringify({ pid: engine.pid, token: engine.launchToken, confinement: engine.confinement }))
if (process.env.MODE === 'end') console.log(JSON.stringify(await engine.exited))
else setInterval(() => {}, 1000)
`
  const env = { PROCESS_MODULE, ENGINE: engine, PIDS: pids, LOG: join(dir, `launcher-${n++}.log`), MODE: mode }
  const child = spawn(process.execPath, ['--input-type=module', '--disable-warning=ExperimentalWarning', '-e', script], {
    env,
    stdio: ['ignore', 'pipe', 'inherit'],
  })
  started.push(child)
  const lines: string[] = []
  let buffered = ''
  child.stdout?.setEncoding('utf8').on('data', (chunk: string) => {
    buffered += chunk
    const parts = buffered.split('\n')
    buffered = parts.pop() as string
    lines.push(...parts)
  })
  const exit = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)))
  return { child, lines, exit }
}

/** The launcher's first line: the engine's pid, launch token (kept for the clean-up) and confinement. */
async function launched(lines: string[]): Promise<{ pid: number; token: string; confinement: string }> {
  await expect.poll(() => lines.length, { timeout: 15_000 }).toBeGreaterThan(0)
  const first = JSON.parse(lines[0] as string) as { pid: number; token: string; confinement: string }
  tokens.push(first.token)
  return first
}

describe.skipIf(process.platform !== 'linux')('the engine reaper', () => {
  test.for([false, true])(
    'when servegate is SIGKILLed, its reaper stops the engine and both workers (own cgroup: %s)',
    async (ownCgroup, ctx) => {
      if (ownCgroup && !cgroupsWritable()) ctx.skip()
      const pids = pidfile()
      const launcher = startLauncher(ownCgroup ? 'hold-in-cgroup' : 'hold', FORKING_ENGINE, pids)
      const { token, confinement } = await launched(launcher.lines)
      expect(confinement).toBe(ownCgroup ? 'cgroup' : 'process-group')
      const tree = await enginePids(pids)
      expect(reapersOf(token)).toHaveLength(1)
      expect(tree.filter(alive)).toEqual(tree)

      launcher.child.kill('SIGKILL')
      await launcher.exit
      // The grace period is 1 s; the worker that ignores SIGTERM needs the SIGKILL after it.
      await expect.poll(() => tree.filter(alive), { timeout: 8000, interval: 100 }).toEqual([])
      await expect.poll(() => reapersOf(token), { timeout: 5000 }).toEqual([])
      if (ownCgroup) expect(existsSync(join(ownCgroupDir() as string, `servegate-${token}`))).toBe(false)
    },
  )

  test('stop() tears the launch down itself and the reaper stands down, while servegate runs on', async () => {
    const pids = pidfile()
    const engine = await spawnEngine({
      argv: [process.execPath, '-e', FORKING_ENGINE],
      env: { FAKE_ENGINE_PIDFILE: pids },
      logPath: join(dir, 'stop.log'),
      graceMs: 1000,
    })
    engines.push(engine)
    tokens.push(engine.launchToken)
    const tree = await enginePids(pids)
    expect(reapersOf(engine.launchToken)).toHaveLength(1)

    const teardown = await engine.stop()
    expect(teardown.exit.requested).toBe(true)
    // The worker that ignores SIGTERM was ended by the teardown's SIGKILL, not by the reaper.
    expect(teardown.survivors).toEqual([
      expect.objectContaining({ command: expect.stringContaining("process.on('SIGTERM'"), endedBy: 'SIGKILL' }),
    ])
    expect(tree.filter(alive)).toEqual([])
    await expect.poll(() => reapersOf(engine.launchToken), { timeout: 5000 }).toEqual([])
  })

  test('an engine that exits by itself, leaving nothing behind, dismisses its reaper', async () => {
    const engine = await spawnEngine({
      argv: [process.execPath, '-e', 'setTimeout(() => process.exit(3), 300)'],
      env: {},
      logPath: join(dir, 'exits.log'),
      graceMs: 1000,
    })
    engines.push(engine)
    tokens.push(engine.launchToken)
    expect(reapersOf(engine.launchToken)).toHaveLength(1)
    expect(await engine.exited).toMatchObject({ code: 3, requested: false })
    await expect.poll(() => reapersOf(engine.launchToken), { timeout: 5000 }).toEqual([])
  })

  test('the reaper does not keep servegate running, and sweeps what an engine left when servegate ends without a stop', async () => {
    const pids = pidfile()
    const launcher = startLauncher('end', LEAVING_ENGINE, pids)
    const { token } = await launched(launcher.lines)
    expect(await launcher.exit).toBe(0)
    expect(JSON.parse(launcher.lines[1] as string)).toMatchObject({ code: 0, requested: false })
    const [worker] = await treePids(pids)
    expect(worker).toBeDefined()
    await expect.poll(() => alive(worker as number), { timeout: 5000 }).toBe(false)
    await expect.poll(() => reapersOf(token), { timeout: 5000 }).toEqual([])
  })
})

/** A process group leader that idles, with the launch token in its environment when given. */
function victim(token: string | null): ChildProcess {
  const child = spawn(process.execPath, ['-e', 'setInterval(() => {}, 1000)'], {
    detached: true,
    stdio: 'ignore',
    env: token === null ? {} : { SERVEGATE_LAUNCH: token },
  })
  started.push(child)
  return child
}

/** Runs the reaper on `pid` with the start ticks given; `said` goes to its stdin, which then closes. */
async function runReaper(pid: number, ticks: string, token: string, said: string): Promise<number | null> {
  const reaper = spawn(process.execPath, ['--disable-warning=ExperimentalWarning', REAPER, String(pid), ticks, token, '500'], {
    stdio: ['pipe', 'ignore', 'inherit'],
  })
  started.push(reaper)
  const exit = new Promise<number | null>((resolve) => reaper.once('exit', (code) => resolve(code)))
  reaper.stdin?.end(said)
  return exit
}

describe.skipIf(process.platform !== 'linux')('the reaper script', () => {
  test('told to stand down, it leaves the launch alone', async () => {
    const token = newLaunchToken()
    tokens.push(token)
    const engine = victim(token)
    const ticks = await startTime(engine.pid as number)
    expect(await runReaper(engine.pid as number, ticks as string, token, 'done\n')).toBe(0)
    expect(alive(engine.pid as number)).toBe(true)
  })

  test('when its pipe closes unannounced, it stops the group and the marked processes', async () => {
    const token = newLaunchToken()
    tokens.push(token)
    const leader = victim(null)
    const marked = victim(token)
    const ticks = await startTime(leader.pid as number)
    expect(await runReaper(leader.pid as number, ticks as string, token, '')).toBe(0)
    await expect.poll(() => [leader.pid, marked.pid].filter((p) => alive(p as number))).toEqual([])
  })

  test('it leaves a group alone whose leader’s pid now belongs to another process', async () => {
    const token = newLaunchToken()
    tokens.push(token)
    const stranger = victim(null)
    const ticks = Number(await startTime(stranger.pid as number))
    expect(await runReaper(stranger.pid as number, String(ticks - 1), token, '')).toBe(0)
    expect(alive(stranger.pid as number)).toBe(true)
  })
})
