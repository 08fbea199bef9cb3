/**
 * An external endpoint's manifest when its GPUs are elsewhere: GPU facts from the deployment's DCGM
 * exporter, engine facts from its own endpoints; a loopback endpoint without the new options keeps
 * the manifest it always had.
 */
import { once } from 'node:events'
import { readFileSync } from 'node:fs'
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { createEnvironment, type Environment } from '../runner/environment.ts'
import type { Manifest } from '../schema/manifest.ts'
import { launchEngine } from './launch.ts'

const fixture = (path: string) => readFileSync(new URL(`../../fixtures/${path}`, import.meta.url), 'utf8')
const L4 = fixture('metrics/dcgm-exporter-l4.txt')
const VLLM_METRICS = fixture('metrics/vllm.txt')

const noGpu = async (): Promise<Manifest['gpus']> => ({ status: 'absent', reason: 'no GPU on this test host' })
const env: Environment = { ...createEnvironment(), gpuFacts: noGpu }

/** vLLM's answers (`/version`, its `/v1/models` ModelCard, `/metrics`) and, under `/dcgm`, a DCGM exporter's. */
const ROUTES: Record<string, { type: string; body: string }> = {
  '/version': { type: 'application/json', body: JSON.stringify({ version: '0.11.2' }) },
  '/v1/models': {
    type: 'application/json',
    body: JSON.stringify({
      object: 'list',
      data: [
        {
          id: 'qwen3-8b',
          object: 'model',
          created: 1764000000,
          owned_by: 'vllm',
          root: '/models/Qwen3-8B',
          parent: null,
          max_model_len: 32768,
        },
      ],
    }),
  },
  '/metrics': { type: 'text/plain; version=0.0.4', body: VLLM_METRICS },
  '/dcgm/metrics': { type: 'text/plain; version=0.0.4', body: L4 },
}

describe('an external endpoint’s facts', () => {
  let server: Server
  let origin: string
  const asked: string[] = []
  beforeAll(async () => {
    server = createServer((req, res) => {
      asked.push(req.url ?? '')
      const route = ROUTES[req.url ?? '']
      res.writeHead(route === undefined ? 404 : 200, { 'content-type': route?.type ?? 'text/plain' })
      res.end(route?.body ?? 'not found')
    })
    server.listen(0, '127.0.0.1')
    await once(server, 'listening')
    origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  })
  afterAll(() => {
    server.closeAllConnections()
    server.close()
  })

  test('with gpuMetricsUrl: GPU facts from the exporter with their source, engine facts from the endpoint', async () => {
    const config = {
      kind: 'external' as const,
      baseUrl: origin,
      model: { id: 'qwen3-8b' },
      remote: true,
      gpuMetricsUrl: `${origin}/dcgm/metrics`,
    }
    const engine = await launchEngine(config, env)
    expect(engine.manifest.gpus).toEqual({
      status: 'ok',
      devices: [
        {
          index: 0,
          name: 'NVIDIA L4',
          uuid: 'GPU-c2f76b33-7953-256e-8f33-1343419b1a1c',
          driverVersion: '580.105.08',
          memoryTotalMiB: 23033,
          powerW: 16.365,
        },
      ],
      source: 'dcgm-exporter',
      url: `${origin}/dcgm/metrics`,
      note: expect.stringContaining('memoryTotalMiB = DCGM_FI_DEV_FB_USED + DCGM_FI_DEV_FB_FREE + DCGM_FI_DEV_FB_RESERVED'),
    })
    expect(engine.manifest.engine.version).toEqual({ value: '0.11.2', source: 'GET /version', reason: null })
    expect(engine.manifest.engine.reported).toEqual({
      kind: { value: 'vllm', source: 'GET /v1/models (owned_by "vllm")', reason: null },
      tensorParallel: {
        value: null,
        source: null,
        reason: 'only SGLang reports its tensor-parallel size (GET /get_server_info tp_size); this endpoint does not',
      },
      modelPath: { value: '/models/Qwen3-8B', source: 'GET /v1/models (root)', reason: null },
      servedModelName: { value: 'qwen3-8b', source: 'GET /v1/models (id)', reason: null },
      maxContext: { value: 32768, source: 'GET /v1/models (max_model_len)', reason: null },
    })
    expect(await engine.stop()).toBeNull()
  })

  test('without the remote options the manifest is what it always was: no reported facts, GPU facts from this host', async () => {
    asked.length = 0
    const engine = await launchEngine({ kind: 'external', baseUrl: origin, model: { id: 'qwen3-8b' } }, env)
    expect(Object.keys(engine.manifest)).toEqual(['engine', 'model', 'gpus', 'host', 'harness'])
    expect(Object.keys(engine.manifest.engine)).toEqual([
      'kind',
      'shape',
      'version',
      'commit',
      'argv',
      'envNames',
      'visibleDevices',
      'tensorParallel',
    ])
    expect(engine.manifest.gpus).toEqual({ status: 'absent', reason: 'no GPU on this test host' })
    // Only the version endpoint was asked, as before: no server info, models or metrics read for facts.
    expect(asked).toEqual(['/version'])
  })

  test('a DCGM exporter on another host needs a remote engine, and a URL that is one; refused before anything is sent', async () => {
    const remoteExporter = { kind: 'external' as const, baseUrl: origin, model: { id: 'm' }, gpuMetricsUrl: 'http://10.1.2.3:9400/metrics' }
    await expect(launchEngine(remoteExporter, env)).rejects.toThrow(
      'invalid engine config: engine.gpuMetricsUrl: 10.1.2.3 is not a loopback address; nothing was sent to it. ' +
        'A DCGM exporter on another host goes with a remote engine: set remote: true (or pass --remote)',
    )
    await expect(launchEngine({ ...remoteExporter, gpuMetricsUrl: 'dcgm:9400' }, env)).rejects.toThrow(
      'invalid engine config: engine.gpuMetricsUrl: protocol dcgm: is not supported; use http:// or https://',
    )
    await expect(launchEngine({ ...remoteExporter, gpuMetricsUrl: '10.1.2.3:9400/metrics' }, env)).rejects.toThrow(
      /engine\.gpuMetricsUrl: .* is not a URL; pass the DCGM exporter's metrics URL, e.g\. http:\/\/10\.0\.0\.5:9400\/metrics|protocol 10\.1\.2\.3: is not supported/,
    )
  })
})
