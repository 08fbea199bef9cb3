import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { createEnvironment, type Environment } from '../runner/environment.ts'
import { runEngineCell } from '../runner/runner.ts'
import type { Manifest } from '../schema/manifest.ts'
import type { RunRecord } from '../schema/run.ts'
import { ADAPTERS, runningRefreshSteps, trtllmOptionsYaml } from './adapters.ts'
import { type EngineConfig, type LaunchedConfig, resolveEngineConfig } from './config.ts'

// The GPU path against fakes rebuilt from the engines' real behaviour (fixtures/fakes/engine.ts).
const FAKES = fileURLToPath(new URL('../../fixtures/fakes/', import.meta.url))
const noGpu = async (): Promise<Manifest['gpus']> => ({ status: 'absent', reason: 'test: no GPU probe' })
const testEnv: Environment = { ...createEnvironment({ telemetry: { metricsIntervalMs: 20 } }), gpuFacts: noGpu }

let dir = ''
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'servegate-fidelity-'))
})
afterAll(async () => {
  await rm(dir, { recursive: true, force: true })
})

const launched = (input: EngineConfig): LaunchedConfig => resolveEngineConfig(input) as LaunchedConfig

function engineTelemetry(record: RunRecord) {
  const engine = record.telemetry?.engine
  if (engine?.status !== 'ok') throw new Error(`no engine telemetry: ${JSON.stringify(record.telemetry?.engine)}`)
  return engine
}

describe('TensorRT-LLM', () => {
  const trtllm = (extra: Partial<Extract<EngineConfig, { kind: 'trtllm' }>> = {}, env: Record<string, string> = {}): EngineConfig => ({
    kind: 'trtllm',
    executable: join(FAKES, 'trtllm-serve'),
    model: { id: 'Qwen/Qwen3-8B' },
    env,
    logDir: join(dir, 'logs'),
    startupTimeoutMs: 20_000,
    ...extra,
  })

  test('1.3 from a local directory: served under its basename, metrics on from the options file servegate writes', async () => {
    const weights = join(dir, 'Qwen3-8B-local')
    await mkdir(weights, { recursive: true })
    const record = await runEngineCell(testEnv, trtllm({ model: { id: 'Qwen/Qwen3-8B', path: `${weights}/` } }), {
      requests: 8,
      concurrency: 2,
      maxTokens: 8,
      workload: { promptTokens: 32 },
    })
    expect(record.cellFailure).toBeNull()
    expect(record.completed).toBe(8)
    const argv = record.manifest?.engine.argv ?? []
    const options = argv[argv.indexOf('--extra_llm_api_options') + 1] as string
    expect(await readFile(options, 'utf8')).toMatch(/^return_perf_metrics: true\nenable_iter_perf_stats: true\n$/m)
    const engine = engineTelemetry(record)
    expect(engine.occupancy.url).toMatch(/\/prometheus\/metrics$/)
    expect(engine.occupancy.scrapeErrors).toBe(0)
    expect(engine.occupancy.runningMax).toBeGreaterThan(0)
    expect(engine.occupancy.timings.ttft?.count).toBeGreaterThan(0)
    expect(engine.occupancy.timings.decode?.count).toBeGreaterThan(0)
  })

  test('up to 1.2: the running gauge is absent with the release line named, TTFT read from the unprefixed name', async () => {
    const record = await runEngineCell(testEnv, trtllm({}, { FAKE_TRTLLM_VERSION: '1.2.0' }), {
      requests: 6,
      concurrency: 2,
      maxTokens: 8,
      workload: { promptTokens: 32 },
    })
    expect(record.cellFailure).toBeNull()
    const engine = engineTelemetry(record)
    expect(engine.occupancy.runningMax).toBeNull()
    expect(engine.occupancy.reasons.runningMax).toMatch(
      /releases up to 1\.2 export no running gauge\); the scrape shows a trtllm-serve up to 1\.2/,
    )
    expect(engine.concurrency?.reached).toBeNull()
    expect(engine.occupancy.timings.ttft?.count).toBeGreaterThan(0)
    expect(engine.occupancy.timings.prefill).toBeNull()
  })

  test("the user's own options file is merged, never replaced; a key the user set stays as set", async () => {
    const own = join(dir, 'own.yaml')
    await writeFile(own, 'max_batch_size: 8\nreturn_perf_metrics: false\n')
    const record = await runEngineCell(testEnv, trtllm({ extraArgs: ['--config', own] }), {
      requests: 4,
      concurrency: 1,
      maxTokens: 4,
      workload: { promptTokens: 16 },
    })
    expect(record.cellFailure).toBeNull()
    const argv = record.manifest?.engine.argv ?? []
    expect(argv).not.toContain(own)
    const written = await readFile(argv[argv.indexOf('--extra_llm_api_options') + 1] as string, 'utf8')
    expect(written).toBe(
      'max_batch_size: 8\nreturn_perf_metrics: false\n# added by servegate: /prometheus/metrics and its iteration gauges\n' +
        'enable_iter_perf_stats: true\n',
    )
    // return_perf_metrics: false, as the user set it: trtllm-serve mounts no /prometheus/metrics.
    const engine = engineTelemetry(record)
    expect(engine.occupancy.scrapes).toBe(0)
    expect(engine.occupancy.lastScrapeError).toMatch(/answered HTTP 404/)
  })

  test('--revision is passed for a hub model, not for local weights', () => {
    const argv = (model: EngineConfig['model']) => ADAPTERS.trtllm.argv(launched(trtllm({ model })), 8000)
    expect(argv({ id: 'Qwen/Qwen3-8B', revision: 'abc123' })).toEqual(expect.arrayContaining(['--revision', 'abc123']))
    expect(argv({ id: 'Qwen/Qwen3-8B', revision: 'abc123', path: '/w/Qwen3-8B' })).not.toContain('--revision')
    expect(ADAPTERS.trtllm.servedModel(launched(trtllm({ model: { id: 'Qwen/Qwen3-8B', path: '/w/Qwen3-8B//' } })))).toBe('Qwen3-8B')
  })

  test('trtllmOptionsYaml appends only what the file does not set at its top level', () => {
    expect(trtllmOptionsYaml('')).toBe(
      '# added by servegate: /prometheus/metrics and its iteration gauges\nreturn_perf_metrics: true\nenable_iter_perf_stats: true\n',
    )
    expect(trtllmOptionsYaml('kv_cache_config:\n  enable_iter_perf_stats: false\nreturn_perf_metrics: true')).toBe(
      'kv_cache_config:\n  enable_iter_perf_stats: false\nreturn_perf_metrics: true\n' +
        '# added by servegate: /prometheus/metrics and its iteration gauges\nenable_iter_perf_stats: true\n',
    )
  })
})

describe('llama-server', () => {
  const llama = (extra: Partial<Extract<EngineConfig, { kind: 'llama-server' }>> = {}): EngineConfig => ({
    kind: 'llama-server',
    executable: join(FAKES, 'llama-server'),
    model: { id: 'ggml-org/gemma-3-1b-it-GGUF' },
    logDir: join(dir, 'logs'),
    ...extra,
  })
  const argv = (config: EngineConfig) => ADAPTERS['llama-server'].argv(launched(config), 8000)

  test('a hub id goes by -hf, local weights by -m; every layer offloaded where there is a GPU', () => {
    expect(argv(llama({ gpus: '0' }))).toEqual(expect.arrayContaining(['-hf', 'ggml-org/gemma-3-1b-it-GGUF', '-ngl', '999']))
    expect(ADAPTERS['llama-server'].argv(launched(llama()), 8000, { gpuHost: true })).toEqual(expect.arrayContaining(['-ngl', '999']))
    // No GPU requested and none on the host: llama.cpp's CPU path, no -ngl.
    expect(argv(llama())).not.toContain('-ngl')
    expect(argv(llama())).not.toContain('-m')
    expect(argv(llama())).toEqual(expect.arrayContaining(['-t', '1']))
    expect(argv(llama({ model: { id: 'tiny', path: '/w/tiny.gguf' }, gpuLayers: 0, threads: 4 }))).toEqual(
      expect.arrayContaining(['-m', '/w/tiny.gguf', '-ngl', '0', '-t', '4']),
    )
    // null: the build's own defaults (layers, and llama.cpp's own thread count).
    const plain = argv(llama({ gpuLayers: null, threads: null }))
    expect(plain).not.toContain('-ngl')
    expect(plain).not.toContain('-t')
  })

  test('on a host where nvidia-smi shows a GPU, the launch offloads every layer', async () => {
    const gpuHost: Environment = {
      ...testEnv,
      gpuFacts: async () => ({
        status: 'ok',
        devices: [{ index: 0, name: 'NVIDIA H100 80GB HBM3', uuid: null, driverVersion: '550.54.15', memoryTotalMiB: 81559 }],
      }),
    }
    const record = await runEngineCell(gpuHost, llama(), { requests: 2, concurrency: 1, maxTokens: 4, workload: { promptTokens: 16 } })
    expect(record.cellFailure).toBeNull()
    expect(record.manifest?.engine.argv).toEqual(expect.arrayContaining(['-ngl', '999']))
  })

  test('a revision with -hf is refused, naming the field and the fix', () => {
    expect(() => resolveEngineConfig(llama({ model: { id: 'ggml-org/gemma-3-1b-it-GGUF', revision: 'abc' } }))).toThrow(
      /engine\.model\.revision: llama-server loads a Hugging Face id with -hf .* set model\.path, or drop model\.revision/,
    )
  })

  test('the fake serves a -hf model and reads current metric names', async () => {
    const record = await runEngineCell(testEnv, llama({ slots: 2 }), {
      requests: 4,
      concurrency: 2,
      maxTokens: 4,
      workload: { promptTokens: 16 },
    })
    expect(record.cellFailure).toBeNull()
    const engine = engineTelemetry(record)
    expect(engine.occupancy.kvUsageMax).toBeNull()
    expect(engine.occupancy.reasons.kvUsageMax).toMatch(/removed .* PR #13660.*the scrape shows a llama\.cpp build after PR #13660/)
  })
})

describe('SGLang', () => {
  const sglang = (extraArgs: string[] = []): EngineConfig => ({
    kind: 'sglang',
    python: join(FAKES, 'python'),
    model: { id: 'Qwen/Qwen3-8B' },
    logDir: join(dir, 'logs'),
    extraArgs,
    env: { FAKE_ENGINE_DECODE_TOK_PER_S: '200' },
  })

  test('outputs shorter than its gauge refresh: concurrency is not observable, with the reason', async () => {
    const record = await runEngineCell(testEnv, sglang(), { requests: 8, concurrency: 4, maxTokens: 8, workload: { promptTokens: 16 } })
    expect(record.cellFailure).toBeNull()
    const engine = engineTelemetry(record)
    expect(engine.concurrency).toMatchObject({ requested: 4, reached: null })
    expect(engine.concurrency?.reason).toMatch(
      /^not observable for outputs under 40 tokens: SGLang refreshes sglang:num_running_reqs only at a prefill .* the median request generated 8 tokens/,
    )
    expect(record.manifest?.engine.version).toMatchObject({ value: '0.5.3', source: 'GET /server_info' })
  })

  test('with --decode-log-interval 2 the gauge refreshes often enough to see the concurrency', async () => {
    const record = await runEngineCell(testEnv, sglang(['--decode-log-interval', '2']), {
      requests: 8,
      concurrency: 2,
      maxTokens: 24,
      workload: { promptTokens: 16 },
    })
    expect(record.cellFailure).toBeNull()
    expect(engineTelemetry(record).concurrency).toMatchObject({ requested: 2, reached: true })
    expect(runningRefreshSteps(record.manifest?.engine.argv ?? null)).toBe(2)
  })
})

test('the options file lands beside the engine log', async () => {
  const logs = join(dir, 'logs')
  expect((await readdir(logs)).some((f) => f.endsWith('-extra-llm-api-options.yaml'))).toBe(true)
})
