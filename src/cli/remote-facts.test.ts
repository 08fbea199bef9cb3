/**
 * GPU and engine facts of a remote deployment, end to end: `servegate run --remote
 * --gpu-metrics-url` against a host the test makes itself (a network namespace, fixtures/netns.ts)
 * where the simulated engine and a DCGM exporter serving a real scrape run.
 */
import { readFile } from 'node:fs/promises'
import { join } from 'node:path'
import { describe, expect } from 'vitest'
import { netnsForTests, netnsUnavailable, type TestNetns } from '../../fixtures/netns.ts'
import { type NsServer, serveInNetns } from '../../fixtures/netns-listen.ts'
import { test } from '../../fixtures/test-context.ts'
import { RunRecord } from '../schema/run.ts'

const SIM_SERVER = new URL('../../fixtures/netns-server.ts', import.meta.url).pathname
const EXPORTER_SERVER = new URL('../../fixtures/dcgm-exporter-server.ts', import.meta.url).pathname
const L4 = new URL('../../fixtures/metrics/dcgm-exporter-l4.txt', import.meta.url).pathname
const unavailable = await netnsUnavailable()
if (unavailable !== null) process.stderr.write(`remote-facts tests SKIPPED: ${unavailable}\n`)

/** A server started inside the namespace from `script`, bound to the namespace's address. */
const serve = (ns: TestNetns, script: string, setup: Record<string, unknown>): Promise<NsServer> =>
  serveInNetns(ns, [process.execPath, script, JSON.stringify({ bind: ns.nsAddress, ...setup })])

const run = ['run', '--model', 'm', '--requests', '4', '--concurrency', '2', '--max-tokens', '8', '--prompt-tokens', '32']

describe.skipIf(unavailable !== null)('facts of a remote deployment in a test network namespace', () => {
  const ns = netnsForTests()

  test('--gpu-metrics-url: the manifest’s GPU facts come from the exporter, the engine’s from its endpoints', async ({ cli, tmpDir }) => {
    const sim = await serve(ns, SIM_SERVER, { mode: 'sim', sim: { model: 'm', decodeTokPerS: 400, version: '0.11.2' } })
    const exporter = await serve(ns, EXPORTER_SERVER, { file: L4 })
    const baseUrl = `http://${ns.nsAddress}:${sim.port}`
    const metricsUrl = `http://${ns.nsAddress}:${exporter.port}/metrics`

    // Without --remote a DCGM exporter on another host is refused before anything is sent to either.
    const refused = await cli([
      ...run,
      '--base-url',
      'http://127.0.0.1:9',
      '--gpu-metrics-url',
      metricsUrl,
      '--out',
      join(tmpDir, 'no.json'),
    ])
    expect(refused.code).toBe(2)
    expect(refused.stderr).toContain(`--gpu-metrics-url: ${ns.nsAddress} is not a loopback address; nothing was sent to it`)
    expect(exporter.connections()).toBe(0)

    const out = join(tmpDir, 'remote.json')
    const r = await cli([...run, '--base-url', baseUrl, '--remote', '--gpu-metrics-url', metricsUrl, '--out', out])
    expect(r.stderr).toBe('')
    expect(r.code).toBe(0)
    const record = RunRecord.parse(JSON.parse(await readFile(out, 'utf8')))
    expect(record.completed).toBe(4)
    expect(record.manifest?.gpus).toEqual({
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
      url: metricsUrl,
      note: expect.stringContaining('DCGM_FI_DEV_FB_USED + DCGM_FI_DEV_FB_FREE + DCGM_FI_DEV_FB_RESERVED'),
    })
    expect(exporter.connections()).toBeGreaterThan(0)
    expect(r.stdout).toContain('NVIDIA L4 (driver 580.105.08) from the dcgm-exporter')
    expect(record.manifest?.engine.version).toEqual({ value: '0.11.2', source: 'GET /version', reason: null })
    // The sim's model card names no engine ("servegate-sim"); its /metrics names are vLLM's.
    expect(record.manifest?.engine.reported?.kind).toEqual({ value: 'vllm', source: 'GET /metrics (vllm: names)', reason: null })
    expect(record.manifest?.engine.reported?.servedModelName.value).toBe('m')
    // Scraped as the engine that answers; no nvidia-smi here samples the remote GPUs.
    expect(record.telemetry?.engine.status).toBe('ok')
    expect(record.telemetry?.gpu).toEqual({
      status: 'absent',
      reason: 'the GPUs are on the remote host: nvidia-smi here samples none (their facts come from the dcgm-exporter)',
    })

    // Without an exporter the remote GPUs are unknown, never this host's.
    const bare = join(tmpDir, 'bare.json')
    const bareRun = await cli([...run, '--base-url', baseUrl, '--remote', '--out', bare])
    expect(bareRun.code).toBe(0)
    expect(bareRun.stdout).toContain('GPUs unknown (the engine is on another host')
    const unknown = RunRecord.parse(JSON.parse(await readFile(bare, 'utf8')))
    expect(unknown.manifest?.gpus).toEqual({
      status: 'unknown',
      reason:
        'the engine is on another host, whose GPUs nvidia-smi here cannot see; ' +
        "set gpuMetricsUrl (--gpu-metrics-url) to its DCGM exporter's metrics URL",
    })
  })
})
