import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { afterAll, afterEach, beforeAll, describe, expect, test, vi } from 'vitest'
import { createEnvironment, type Environment } from '../runner/environment.ts'
import { runEngineCell } from '../runner/runner.ts'
import type { Manifest } from '../schema/manifest.ts'
import { RunRecord, type TeardownSurvivor } from '../schema/run.ts'
import type { EngineConfig } from './config.ts'
import { launchEngine } from './launch.ts'
import { markedProcesses, portAccepts } from './launch-token.ts'

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
afterEach(() => {
  vi.restoreAllMocks()
})

/**
 * A command engine: the fixture, then the argv it runs (or its own port and model). The grace
 * period is generous for servers that do stop on SIGTERM, so a busy machine does not turn them
 * into SIGKILLs; the stubborn one gets a short one.
 */
function engine(fixture: string, ...argv: string[]): EngineConfig {
  return {
    kind: 'command',
    argv: [join(FAKES, fixture), ...argv],
    model: { id: 'escape-model' },
    logDir: join(dir, 'logs'),
    startupTimeoutMs: 20_000,
    shutdownGraceMs: fixture === 'stubborn-engine' ? 1000 : 5000,
  }
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
    expect(record.teardown).toEqual({ survivors: [], portClosed: true, findings: [] })
    expect(stderr()).not.toContain('servegate: teardown')
    // Records written before teardown was recorded still parse.
    const { teardown: _, ...old } = record
    expect(RunRecord.parse(old).teardown).toBeUndefined()
  })
})
