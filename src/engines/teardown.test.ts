import { alive, treePids } from '../../fixtures/processes.ts'
import { existsSync, readFileSync } from 'node:fs'
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises'
import { createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { execa } from 'execa'
import { afterAll, afterEach, beforeAll, describe, expect, test, vi } from 'vitest'
import { createEnvironment, type Environment } from '../runner/environment.ts'
import { runEngineCell } from '../runner/runner.ts'
import type { Manifest } from '../schema/manifest.ts'
import { RunRecord, type TeardownSurvivor } from '../schema/run.ts'
import type { EngineConfig } from './config.ts'
import { EngineCgroup, ownCgroupDir } from './engine-cgroup.ts'
import { launchEngine, type RunningEngine } from './launch.ts'
import { markedProcesses, portAccepts } from './launch-token.ts'
import { signalPid } from './process-tree.ts'

const FAKES = fileURLToPath(new URL('../../fixtures/fakes/', import.meta.url))
const SIM = fileURLToPath(new URL('../../bin/servegate.js', import.meta.url))
const noGpu = async (): Promise<Manifest['gpus']> => ({ status: 'absent', reason: 'test: no GPU probe' })
const testEnv: Environment = { ...createEnvironment(), gpuFacts: noGpu, telemetry: false }

let dir = ''
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'servegate-teardown-'))
})
afterAll(async () => {
  await rm(dir, { recursive: true, force: true })
})
/** What a test launched: engines to stop and server pid files to read, cleaned up even when it fails. */
const toStop: RunningEngine[] = []
const pidfiles: string[] = []
afterEach(async () => {
  vi.restoreAllMocks()
  await Promise.all(toStop.splice(0).map((e) => e.stop()))
  for (const pid of (await Promise.all(pidfiles.splice(0).map(treePids))).flat()) signalPid(pid, 'SIGKILL')
})

/** Launches an engine that the test's clean-up stops if the test does not. */
async function launch(config: EngineConfig, env: Environment = testEnv): Promise<RunningEngine> {
  const engine = await launchEngine(config, env)
  toStop.push(engine)
  return engine
}

/** A new pid file for a fake server, whose pids the test's clean-up SIGKILLs. */
function pidfile(): string {
  const path = join(dir, `server-${pidfiles.length}-${Math.random().toString(36).slice(2)}.pid`)
  pidfiles.push(path)
  return path
}

/** The one pid a fake server wrote to its pid file (it writes it before it listens, so after readiness it is there). */
async function serverPid(path: string): Promise<number> {
  const pids = await treePids(path)
  expect(pids).toHaveLength(1)
  return pids[0] as number
}

/** Whether this machine lets servegate create a cgroup v2 of its own (root, or a delegated cgroup). */
function cgroupsWritable(): boolean {
  const probe = EngineCgroup.create(`probe-${process.pid}`)
  return probe?.remove() ?? false
}

/** The cgroup v2 path of a process (its `0::` line), or null when it is gone. */
function cgroupOf(pid: number): string | null {
  try {
    const line = readFileSync(`/proc/${pid}/cgroup`, 'utf8')
      .split('\n')
      .find((l) => l.startsWith('0::'))
    return line?.slice(3) ?? null
  } catch {
    return null
  }
}

/**
 * A command engine: the fixture, then the argv it runs (or its own port and model). The grace
 * period is generous for servers that do stop on SIGTERM, so a busy machine does not turn them
 * into SIGKILLs; the stubborn one gets a short one.
 */
function engine(fixture: string, ...argv: string[]): Extract<EngineConfig, { kind: 'command' }> {
  return {
    kind: 'command',
    argv: [join(FAKES, fixture), ...argv],
    model: { id: 'escape-model' },
    logDir: join(dir, 'logs'),
    startupTimeoutMs: 20_000,
    shutdownGraceMs: fixture === 'stubborn-engine' ? 1000 : 5000,
  }
}

/**
 * A server that leaves the tree and clears its environment (`setsid -f env -i node …`, as a
 * supervisor or container runtime can), serving `served` (the config's model by default); its
 * pid goes to `pids`.
 */
function envClearing(pids: string, served = '{modelId}', port?: number): EngineConfig {
  const config = engine('env-clearing-engine', '{port}', served)
  return { ...config, env: { FAKE_ENGINE_PIDFILE: pids }, ...(port === undefined ? {} : { port }) }
}

/** A loopback port free now. */
async function freePort(): Promise<number> {
  const server = createServer()
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
  const { port } = server.address() as { port: number }
  await new Promise((r) => server.close(r))
  return port
}

/** The simulated engine's server as a fixture's "$@". */
const sim = [process.execPath, SIM, 'sim', '--port', '{port}', '--model', '{modelId}']

function captureStderr(): () => string {
  const lines: string[] = []
  vi.spyOn(process.stderr, 'write').mockImplementation((chunk: string | Uint8Array) => {
    lines.push(String(chunk))
    return true
  })
  return () => lines.join('')
}

describe('teardown finds every process of a launch, even one that left the tree', () => {
  test.each([
    ['a double fork leaves a grandchild serving the port', engine('daemonizing-engine', ...sim), 'launch-token', 'SIGTERM'],
    ['a wrapper script starts its server with setsid -f', engine('setsid-wrapper-engine', ...sim), 'launch-token', 'SIGTERM'],
    ['a stubborn child ignores SIGTERM and keeps serving', engine('stubborn-engine', '{port}', '{modelId}'), 'process-tree', 'SIGKILL'],
  ] as const)('%s: killed, reported, nothing carries the token, the port is closed', async (_, config, foundBy, endedBy) => {
    const launched = await launchEngine(config, testEnv)
    const port = Number(new URL(launched.baseUrl).port)
    const token = launched.process?.launchToken as string
    expect(await portAccepts(port)).toBe(true)
    const stderr = captureStderr()
    const teardown = await launched.stop()

    expect(await portAccepts(port)).toBe(false)
    expect(markedProcesses(token)).toEqual([])
    expect(teardown?.portClosed).toBe(true)
    const server = expect.objectContaining<Partial<TeardownSurvivor>>({ foundBy, endedBy, command: expect.stringMatching(/sim|--child/) })
    expect(teardown?.survivors).toEqual([server])
    expect(teardown?.findings).toHaveLength(1)
    expect(stderr()).toContain(`servegate: teardown: ${teardown?.findings[0]}\n`)
    expect(teardown?.findings[0]).toMatch(
      foundBy === 'launch-token'
        ? /^engine command: pid \d+ \(.*sim --port \d+.*\) had left the process tree \(found by its launch token\); ended by SIGTERM$/
        : /^engine command: pid \d+ \(.*--child.*\) was in the process tree; outlived SIGTERM, ended by SIGKILL$/,
    )
  })
})

describe('the run record says how its engine went down', () => {
  test('servegate run on a daemonizing engine: the escaped server is a finding in the record, and the port is closed', async () => {
    const stderr = captureStderr()
    const record = await runEngineCell(testEnv, engine('daemonizing-engine', ...sim), { requests: 2, concurrency: 1, maxTokens: 4 })
    expect(record.completed).toBe(2)
    expect(RunRecord.parse(record).teardown).toEqual(record.teardown)
    expect(record.teardown).toMatchObject({
      portClosed: true,
      survivors: [{ foundBy: 'launch-token', endedBy: 'SIGTERM' }],
      findings: [expect.stringMatching(/had left the process tree/)],
    })
    expect(stderr()).toMatch(/servegate: teardown: engine command: pid \d+ .* had left the process tree/)
    expect(await portAccepts(Number(new URL(record.target.baseUrl as string).port))).toBe(false)
  })

  test('an engine whose tree goes down on SIGTERM: a clean teardown, nothing on stderr', async () => {
    const stderr = captureStderr()
    const config: EngineConfig = { kind: 'vllm', executable: join(FAKES, 'vllm'), model: { id: 'm' }, logDir: join(dir, 'logs') }
    const record = await runEngineCell(testEnv, config, { requests: 1, concurrency: 1, maxTokens: 4 })
    expect(record.teardown).toEqual({
      survivors: [],
      portClosed: true,
      findings: [],
      confinement: expect.stringMatching(/^(cgroup|process-group)$/),
    })
    expect(stderr()).not.toContain('servegate: teardown')
    // Records written before teardown was recorded still parse.
    const { teardown: _, ...old } = record
    expect(RunRecord.parse(old).teardown).toBeUndefined()
  })
})

describe('a server that left the tree and cleared its environment (setsid env -i) holds the port no longer', () => {
  test('without a cgroup: it is found as the listener on the port servegate picked, through /proc, and stopped', async () => {
    const pids = pidfile()
    const started = await launch(envClearing(pids), { ...testEnv, engineCgroups: false })
    const port = Number(new URL(started.baseUrl).port)
    const server = await serverPid(pids)
    expect(markedProcesses(started.process?.launchToken as string)).not.toContain(server)
    const stderr = captureStderr()
    const teardown = await started.stop()

    expect(alive(server)).toBe(false)
    expect(await portAccepts(port)).toBe(false)
    expect(teardown).toEqual({
      confinement: 'process-group',
      portClosed: true,
      survivors: [{ pid: server, command: expect.stringMatching(/env-clearing-engine --serve/), foundBy: 'port', endedBy: 'SIGTERM' }],
      findings: [
        expect.stringMatching(
          /^engine command: pid \d+ \(.*--serve.*\) still listened on the engine's port after teardown: ended by SIGTERM$/,
        ),
      ],
    })
    expect(stderr()).toContain(`servegate: teardown: ${teardown?.findings[0]}\n`)
  })

  test('on a port the config set, a listener without the launch token is not servegate’s: reported and left running', async () => {
    const pids = pidfile()
    const started = await launch(envClearing(pids, '{modelId}', await freePort()), { ...testEnv, engineCgroups: false })
    const port = Number(new URL(started.baseUrl).port)
    const server = await serverPid(pids)
    captureStderr()
    const teardown = await started.stop()

    expect(alive(server)).toBe(true)
    expect(teardown).toMatchObject({ portClosed: false, survivors: [{ pid: server, foundBy: 'port', endedBy: null }] })
    expect(teardown?.findings).toEqual([
      expect.stringMatching(new RegExp(`listens on the engine's port and was left running: the engine's config set port ${port} and`)),
      `engine command: 127.0.0.1:${port} still accepts connections after teardown`,
    ])
  })

  test('in a cgroup of its own: every process of the launch starts in it, the server is found there, the cgroup is removed', async (ctx) => {
    if (!cgroupsWritable()) ctx.skip('cgroup v2 is not writable here: launches fall back to the tree, token and port hunt')
    const pids = pidfile()
    const started = await launch(envClearing(pids))
    const token = started.process?.launchToken as string
    const cgroup = join(ownCgroupDir() as string, `servegate-${token}`)
    const server = await serverPid(pids)
    expect(started.process?.confinement).toBe('cgroup')
    expect(cgroupOf(server)).toMatch(new RegExp(`/servegate-${token}$`))
    expect(existsSync(cgroup)).toBe(true)
    captureStderr()
    const teardown = await started.stop()

    expect(alive(server)).toBe(false)
    expect(teardown).toEqual({
      confinement: 'cgroup',
      portClosed: true,
      survivors: [{ pid: server, command: expect.stringMatching(/--serve/), foundBy: 'cgroup', endedBy: 'SIGTERM' }],
      findings: [
        expect.stringMatching(
          /^engine command: pid \d+ \(.*\) had left the process tree and carried no launch token \(found in the launch's cgroup\); ended by SIGTERM$/,
        ),
      ],
    })
    expect(existsSync(cgroup)).toBe(false)
  })

  test('in a cgroup of its own: what a shell script forks at once is inside it too (the engine is exec’d in it)', async (ctx) => {
    if (!cgroupsWritable()) ctx.skip('cgroup v2 is not writable here')
    const started = await launch(engine('daemonizing-engine', ...sim))
    const token = started.process?.launchToken as string
    const marked = markedProcesses(token)
    expect(marked.length).toBeGreaterThanOrEqual(2)
    for (const pid of marked) expect(cgroupOf(pid)).toMatch(new RegExp(`/servegate-${token}$`))
    captureStderr()
    expect((await started.stop())?.confinement).toBe('cgroup')
    expect(markedProcesses(token)).toEqual([])
  })
})

describe('servegate run --engine on a server that left the tree and cleared its environment', () => {
  /** Runs the real CLI (bin/servegate.js) on the env-clearing engine; its result, record and the server's pid. */
  async function runCli(served: string): Promise<{ exitCode: number; stderr: string; record: RunRecord; server: number }> {
    const pids = pidfile()
    const config = join(dir, `env-clearing-${Math.random().toString(36).slice(2)}.json`)
    await writeFile(config, JSON.stringify(envClearing(pids, served)))
    const out = `${config}.record.json`
    const argv = ['run', '--engine', config, '--requests', '2', '--max-tokens', '4', '--prompt-tokens', '32', '--out', out]
    const result = await execa(process.execPath, [SIM, ...argv], { reject: false, timeout: 60_000 })
    const record = RunRecord.parse(JSON.parse(await readFile(out, 'utf8')))
    return { exitCode: result.exitCode ?? -1, stderr: String(result.stderr), record, server: await serverPid(pids) }
  }

  /** The server is gone, its port refuses connections, and the record's teardown names it. */
  async function expectHunted({ record, server, stderr }: Awaited<ReturnType<typeof runCli>>): Promise<void> {
    expect(alive(server)).toBe(false)
    // The port servegate picked is the engine's first argument ({port}); a failed cell's record has no target.
    expect(await portAccepts(Number(record.manifest?.engine.argv?.[1]))).toBe(false)
    // Where cgroup v2 is writable the launch's cgroup holds the server; elsewhere the port hunt finds it.
    const foundBy = record.teardown?.confinement === 'cgroup' ? 'cgroup' : 'port'
    expect(record.teardown).toMatchObject({ portClosed: true, survivors: [{ pid: server, foundBy, endedBy: 'SIGTERM' }] })
    expect(record.teardown?.findings).toHaveLength(1)
    expect(stderr.split('\n')).toContain(`servegate: teardown: ${record.teardown?.findings[0]}`)
  }

  test('the cell runs, exit 0; the server is gone and named in the record', { timeout: 90_000 }, async () => {
    const run = await runCli('{modelId}')
    expect(run.stderr).not.toMatch(/left running/)
    expect(run.exitCode).toBe(0)
    expect(run.record.completed).toBe(2)
    await expectHunted(run)
  })

  test(
    'its served model is not the one asked for: exit 1, the record holds the cellFailure and the teardown',
    { timeout: 90_000 },
    async () => {
      const run = await runCli('another-model')
      expect(run.stderr).toMatch(
        /^servegate: the cell failed: CONFIG_INVALID: model "escape-model" is not served at http:\/\/127\.0\.0\.1:\d+ \(it serves: another-model\)/m,
      )
      expect(run.exitCode).toBe(1)
      expect(run.record.cellFailure).toMatchObject({ code: 'CONFIG_INVALID', message: expect.stringContaining('it serves: another-model') })
      expect(run.record.completed).toBe(0)
      expect(run.record.manifest?.engine.kind).toBe('command')
      await expectHunted(run)
    },
  )
})
