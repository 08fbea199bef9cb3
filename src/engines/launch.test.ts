import { alive, treePids } from '../../fixtures/processes.ts'
import { createHash } from 'node:crypto'
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { createEnvironment, type Environment } from '../runner/environment.ts'
import { runEngineCell } from '../runner/runner.ts'
import type { Manifest } from '../schema/manifest.ts'
import type { CellPhase } from '../schema/progress.ts'
import { RunRecord } from '../schema/run.ts'
import { type SimServer, startSimServer } from '../sim/server.ts'
import type { EngineConfig } from './config.ts'
import { launchEngine } from './launch.ts'

const FAKES = fileURLToPath(new URL('../../fixtures/fakes/', import.meta.url))
const noGpu = async (): Promise<Manifest['gpus']> => ({ status: 'absent', reason: 'test: no GPU probe' })
const testEnv: Environment = { ...createEnvironment(), gpuFacts: noGpu }
const cell = { requests: 6, concurrency: 2, maxTokens: 8, workload: { promptTokens: 64 } }

let dir = ''
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'servegate-engines-'))
})
afterAll(async () => {
  await rm(dir, { recursive: true, force: true })
})

let n = 0
async function pidfile(): Promise<string> {
  return join(dir, `pids-${n++}.txt`)
}

async function expectNoOrphans(path: string): Promise<void> {
  const pids = await treePids(path)
  expect(pids.length).toBe(3)
  await expect.poll(() => pids.filter(alive), { timeout: 5000 }).toEqual([])
}

function fake(kind: 'vllm' | 'sglang' | 'llama-server' | 'trtllm', env: Record<string, string>): EngineConfig {
  const common = {
    model: { id: 'fake/model-7b', revision: 'abc123' },
    env,
    logDir: join(dir, 'logs'),
    startupTimeoutMs: 20_000,
    shutdownGraceMs: 3000,
  }
  switch (kind) {
    case 'vllm':
      return { kind, executable: join(FAKES, 'vllm'), ...common }
    case 'sglang':
      return { kind, python: join(FAKES, 'python'), ...common }
    case 'llama-server':
      // llama-server's -hf takes no revision.
      return { kind, executable: join(FAKES, 'llama-server'), slots: 2, ...common, model: { id: 'fake/model-7b' } }
    case 'trtllm':
      return { kind, executable: join(FAKES, 'trtllm-serve'), ...common }
  }
}

describe('each launched adapter against its fake executable', () => {
  test.each([
    [
      'vllm',
      { value: '0.11.0', source: 'GET /version' },
      ['serve', 'fake/model-7b', '--host', '127.0.0.1', '--revision', 'abc123', '--tensor-parallel-size', '1'],
    ],
    [
      'sglang',
      { value: '0.5.3', source: 'GET /server_info' },
      ['-m', 'sglang.launch_server', '--model-path', 'fake/model-7b', '--tp-size', '1', '--enable-metrics'],
    ],
    [
      'llama-server',
      { value: 'b6543-d8cfd8d1', source: 'GET /props' },
      ['-hf', 'fake/model-7b', '--alias', 'fake/model-7b', '-np', '2', '-t', '1', '--metrics'],
    ],
    [
      'trtllm',
      { value: '1.3.0', source: 'GET /version' },
      ['fake/model-7b', '--host', '127.0.0.1', '--revision', 'abc123', '--tp_size', '1', '--extra_llm_api_options'],
    ],
  ] as const)('%s: launches, measures a cell, reports its manifest, and leaves no process behind', async (kind, version, argvPart) => {
    const pids = await pidfile()
    const record = await runEngineCell(testEnv, fake(kind, { FAKE_ENGINE_PIDFILE: pids }), cell)
    expect(RunRecord.parse(record)).toBeTruthy()
    expect(record.cellFailure).toBeNull()
    expect(record.completed).toBe(6)
    const m = record.manifest as Manifest
    expect(m.engine.kind).toBe(kind)
    expect(m.engine.shape).toBe('http')
    expect(m.engine.version).toMatchObject(version)
    for (const part of argvPart) expect(m.engine.argv).toContain(part)
    expect(m.model).toMatchObject({
      id: 'fake/model-7b',
      revision: kind === 'llama-server' ? null : 'abc123',
      fingerprint: { value: null, reason: expect.stringMatching(/no local path/) },
    })
    expect(m.gpus).toEqual({ status: 'absent', reason: 'test: no GPU probe' })
    expect(m.harness.hash).toMatch(/^[0-9a-f]{64}$/)
    expect(m.engine.envNames).toContain('FAKE_ENGINE_PIDFILE')
    await expectNoOrphans(pids)
  })

  test('a command engine without a version source: the manifest says why instead of guessing', async () => {
    const sim = join(FAKES, '..', '..', 'bin', 'servegate.js')
    const config: EngineConfig = {
      kind: 'command',
      argv: [process.execPath, sim, 'sim', '--port', '{port}', '--model', '{modelId}', '--dialect', 'sglang'],
      model: { id: 'cmd-model' },
      logDir: join(dir, 'logs'),
    }
    const record = await runEngineCell(testEnv, config, { ...cell, requests: 2 })
    expect(record.completed).toBe(2)
    expect(record.manifest?.engine.argv).toEqual([
      process.execPath,
      sim,
      'sim',
      '--port',
      expect.stringMatching(/^\d+$/),
      '--model',
      'cmd-model',
      '--dialect',
      'sglang',
    ])
    expect(record.manifest?.engine.version).toEqual({ value: null, source: null, reason: 'no version from GET /version' })
  })
})

describe('engine failures become failed cells with their reason', () => {
  test('an engine that exits during start-up: ENGINE_EXITED with the code and the log tail, no orphans', async () => {
    const pids = await pidfile()
    const record = await runEngineCell(testEnv, fake('vllm', { FAKE_ENGINE_PIDFILE: pids, FAKE_ENGINE_EXIT_ON_START: '3' }), cell)
    expect(record.cellFailure?.code).toBe('ENGINE_EXITED')
    expect(record.cellFailure?.message).toMatch(/^engine vllm exited during start-up with code 3; log .*; log tail: .*CUDA out of memory/s)
    expect(record.requests).toEqual([])
    expect(RunRecord.parse(record).plan.requests).toBe(6)
    await expectNoOrphans(pids)
  })

  test('an engine killed mid-cell: the measured requests stay, the rest fail, the cell failed, no orphans', async () => {
    const pids = await pidfile()
    const env = { FAKE_ENGINE_PIDFILE: pids, FAKE_ENGINE_CRASH_AFTER_MS: '1500', FAKE_ENGINE_DECODE_TOK_PER_S: '40' }
    const record = await runEngineCell(testEnv, fake('vllm', env), { ...cell, requests: 40, maxTokens: 12 })
    expect(record.cellFailure?.code).toBe('ENGINE_EXITED')
    expect(record.cellFailure?.message).toMatch(/exited mid-cell with code 1; log tail: .*illegal memory access/s)
    expect(record.completed).toBeGreaterThan(0)
    // Those in flight at the crash failed; those never sent are counted, not recorded.
    expect((record.failed as number) + record.unsent).toBeGreaterThan(0)
    expect(record.requests).toHaveLength(record.completed + (record.failed as number))
    expect(record.completed + (record.failed as number) + record.unsent).toBe(40)
    await expectNoOrphans(pids)
  })

  test('an engine that never becomes ready: ENGINE_START_TIMEOUT naming the deadline, no orphans', async () => {
    const pids = await pidfile()
    const config = { ...fake('sglang', { FAKE_ENGINE_PIDFILE: pids, FAKE_ENGINE_NEVER_READY: '1' }), startupTimeoutMs: 1200 }
    const record = await runEngineCell(testEnv, config, cell)
    expect(record.cellFailure?.code).toBe('ENGINE_START_TIMEOUT')
    expect(record.cellFailure?.message).toMatch(
      /^engine sglang was not ready \(GET \/health → 200\) within 1200 ms; raise startupTimeoutMs/,
    )
    await expectNoOrphans(pids)
  })

  test('a missing executable: ENGINE_NOT_FOUND naming the field to fix', async () => {
    const record = await runEngineCell(testEnv, { kind: 'vllm', executable: join(dir, 'no-such-vllm'), model: { id: 'm' } }, cell)
    expect(record.cellFailure?.code).toBe('ENGINE_NOT_FOUND')
    expect(record.cellFailure?.message).toMatch(
      /no-such-vllm is not an executable on the engine's PATH; install it or set engine\.executable/,
    )
  })
})

/** The phases in the order they came, each run of one phase as one entry. */
function phaseRuns(phases: readonly CellPhase[]): string[] {
  return phases.map((p) => p.phase).filter((name, i, all) => name !== all[i - 1])
}

describe('a cell reports its phases as it goes', () => {
  test('launching, waiting for readiness with the log file, calibrating, warm-up, n/N requests, tearing down', async () => {
    const phases: CellPhase[] = []
    const config = fake('vllm', {})
    const record = await runEngineCell(testEnv, config, { ...cell, warmupRequests: 2 }, { onPhase: (p) => phases.push(p) })
    expect(record.completed).toBe(6)
    expect(phaseRuns(phases)).toEqual(['launching', 'waiting', 'inspecting', 'calibrating', 'warmup', 'requests', 'tearing-down'])
    const waiting = phases.find((p) => p.phase === 'waiting')
    expect(waiting).toMatchObject({
      timeoutMs: 20_000,
      logPath: expect.stringMatching(new RegExp(`^${join(dir, 'logs')}/vllm-\\w+-\\d+\\.log$`)),
    })
    expect(await readFile((waiting as { logPath: string }).logPath, 'utf8')).toMatch(/INFO fake vllm starting/)
    expect(phases.filter((p) => p.phase === 'warmup').map((p) => p.done)).toEqual([0, 1, 2])
    const requests = phases.flatMap((p) => (p.phase === 'requests' ? [p] : []))
    expect(requests.map((p) => p.done)).toEqual([0, 1, 2, 3, 4, 5, 6])
    expect(requests.at(-1)).toMatchObject({ done: 6, total: 6, ok: 6, failed: 0, stage: null })
  })

  test('an engine that never becomes ready says it waits, for how long of its deadline and with its log, before it times out', async () => {
    const phases: Array<{ at: number; phase: CellPhase }> = []
    const start = performance.now()
    const config = { ...fake('vllm', { FAKE_ENGINE_NEVER_READY: '1' }), startupTimeoutMs: 1500 }
    const record = await runEngineCell(testEnv, config, cell, { onPhase: (phase) => phases.push({ at: performance.now() - start, phase }) })
    const timedOutAt = performance.now() - start
    expect(record.cellFailure?.code).toBe('ENGINE_START_TIMEOUT')
    expect(phaseRuns(phases.map((p) => p.phase))).toEqual(['launching', 'waiting'])
    const waits = phases.flatMap(({ at, phase }) => (phase.phase === 'waiting' ? [{ at, ...phase }] : []))
    // Polled every 200 ms or so, each saying how long so far, of what deadline, and where the log is.
    expect(waits.length).toBeGreaterThanOrEqual(4)
    expect(waits.every((w) => w.timeoutMs === 1500 && record.cellFailure?.message.includes(w.logPath) === true)).toBe(true)
    expect(waits.map((w) => w.elapsedMs)).toEqual([...waits.map((w) => w.elapsedMs)].sort((a, b) => a - b))
    expect(waits.some((w) => w.elapsedMs > 500 && w.elapsedMs < 1500 && w.at < timedOutAt)).toBe(true)
  })
})

describe('manifests', () => {
  test('secrets in the argv are redacted and never reach the record', async () => {
    const config = { ...fake('vllm', {}), extraArgs: ['--api-key', 'sk-live-0123456789abcdef', '--hf-token=hf_abcdefghijklmnop'] }
    const record = await runEngineCell(testEnv, config, { ...cell, requests: 1 })
    expect(record.manifest?.engine.argv).toEqual(expect.arrayContaining(['--api-key', '[redacted]', '--hf-token=[redacted]']))
    const json = JSON.stringify(record)
    expect(json).not.toContain('0123456789abcdef')
    expect(json).not.toContain('hf_abcdefghijklmnop')
  })

  test('a GGUF model path is fingerprinted by its sha256', async () => {
    const model = join(dir, 'tiny.gguf')
    await writeFile(model, 'GGUF fake bytes')
    const config: EngineConfig = {
      kind: 'llama-server',
      executable: join(FAKES, 'llama-server'),
      model: { id: 'tiny', path: model },
      logDir: join(dir, 'logs'),
    }
    const record = await runEngineCell(testEnv, config, { ...cell, requests: 1 })
    expect(record.manifest?.model.fingerprint).toEqual({
      value: createHash('sha256').update('GGUF fake bytes').digest('hex'),
      source: `sha256 of the model file ${model}`,
      reason: null,
    })
  })

  test('only the configured environment reaches the engine', async () => {
    process.env.SERVEGATE_TEST_SECRET = 'do-not-pass'
    try {
      const engine = await launchEngine(
        {
          kind: 'vllm',
          executable: join(FAKES, 'vllm'),
          model: { id: 'm' },
          env: { EXTRA: '1' },
          inheritEnv: ['PATH'],
          logDir: join(dir, 'logs'),
        },
        testEnv,
      )
      try {
        // VLLM_SERVER_DEV_MODE is the vLLM adapter's own: it mounts /reset_prefix_cache.
        expect(engine.manifest.engine.envNames).toEqual(['EXTRA', 'PATH', 'VLLM_SERVER_DEV_MODE'])
      } finally {
        await engine.stop()
      }
    } finally {
      delete process.env.SERVEGATE_TEST_SECRET
    }
  })

  test('an external endpoint: nothing launched, version read from it, nothing torn down', async () => {
    const sim: SimServer = await startSimServer({ model: 'ext', version: '9.9.9' })
    try {
      const engine = await launchEngine({ kind: 'external', baseUrl: `${sim.url}/v1`, model: { id: 'ext' } }, testEnv)
      expect(engine.process).toBeNull()
      expect(engine.manifest.engine).toMatchObject({ kind: 'external', version: { value: '9.9.9', source: 'GET /version' }, argv: null })
      await engine.stop()
      expect((await fetch(`${sim.url}/health`)).status).toBe(200)
    } finally {
      await sim.close()
    }
  })

  test('bad configs name the field', async () => {
    await expect(launchEngine({ kind: 'tgi' } as unknown as EngineConfig, testEnv)).rejects.toThrow(
      /engine\.kind: must be one of vllm, sglang, llama-server, trtllm, command, external, node-llama-cpp/,
    )
    await expect(launchEngine({ kind: 'llama-server', model: { id: 'm' }, slots: 0 }, testEnv)).rejects.toThrow(/engine\.slots: /)
    await expect(launchEngine({ kind: 'external', baseUrl: 'http://10.1.2.3:8000', model: { id: 'm' } }, testEnv)).rejects.toThrow(
      /not a loopback address/,
    )
  })
})
