import { readFileSync } from 'node:fs'
import { once } from 'node:events'
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { afterEach, describe, expect, test } from 'vitest'
import { DCGM_FACTS_NOTE, parseDcgmGpuFacts, queryDcgmGpuFacts } from './dcgm-exporter.ts'

// A real dcgm-exporter scrape (NVIDIA L4, default counters), provenance in fixtures/metrics/README.md.
const L4 = readFileSync(new URL('../../fixtures/metrics/dcgm-exporter-l4.txt', import.meta.url), 'utf8')

/** One series as dcgm-exporter's GPU template (render_metrics.go) prints it: gpu, UUID, pci_bus_id, device, modelName, MIG, labels. */
function series(name: string, gpu: number, value: string, extra: { mig?: string; labels?: string; uuidLabel?: string } = {}): string {
  const mig = extra.mig === undefined ? '' : `,GPU_I_PROFILE="1g.10gb",GPU_I_ID="${extra.mig}"`
  return (
    `${name}{gpu="${gpu}",${extra.uuidLabel ?? 'UUID'}="GPU-${gpu}aaaaaaa-0000-0000-0000-000000000000",pci_bus_id="00000000:${18 + gpu}:00.0",` +
    `device="nvidia${gpu}",modelName="NVIDIA H100 80GB HBM3"${mig},Hostname="gpu-node-1"${extra.labels ?? ''}} ${value}`
  )
}

describe('GPU facts from a DCGM exporter’s metrics', () => {
  test('the real L4 scrape: one GPU, its model, UUID, driver label, memory as FB_USED + FB_FREE + FB_RESERVED, power', () => {
    expect(parseDcgmGpuFacts(L4)).toEqual({
      devices: [
        {
          index: 0,
          name: 'NVIDIA L4',
          uuid: 'GPU-c2f76b33-7953-256e-8f33-1343419b1a1c',
          driverVersion: '580.105.08',
          // 0 used + 22563 free + 470 reserved
          memoryTotalMiB: 23033,
          powerW: 16.365,
        },
      ],
      reason: null,
    })
  })

  test('eight GPUs out of index order, with the pod labels of the Kubernetes mapping: one device each, sorted by index', () => {
    const pod = ',DCGM_FI_DRIVER_VERSION="580.105.08",container="main",namespace="dynamo",pod="vllm-0",pod_uid=""'
    const lines = ['# HELP DCGM_FI_DEV_FB_FREE Framebuffer memory free (in MiB).', '# TYPE DCGM_FI_DEV_FB_FREE gauge']
    for (const gpu of [7, 6, 5, 4, 3, 2, 1, 0]) lines.push(series('DCGM_FI_DEV_FB_FREE', gpu, '1000', { labels: pod }))
    for (const gpu of [7, 6, 5, 4, 3, 2, 1, 0]) lines.push(series('DCGM_FI_DEV_FB_USED', gpu, '80000', { labels: pod }))
    for (const gpu of [7, 6, 5, 4, 3, 2, 1, 0]) lines.push(series('DCGM_FI_DEV_FB_RESERVED', gpu, '559', { labels: pod }))
    const { devices } = parseDcgmGpuFacts(lines.join('\n'))
    expect(devices.map((d) => d.index)).toEqual([0, 1, 2, 3, 4, 5, 6, 7])
    expect(devices.every((d) => d.memoryTotalMiB === 81559 && d.driverVersion === '580.105.08' && d.powerW === null)).toBe(true)
  })

  test('what the exporter does not report is null, never guessed', () => {
    // No DCGM_FI_DRIVER_VERSION counter, and an exporter from before DCGM_FI_DEV_FB_RESERVED.
    const text = [series('DCGM_FI_DEV_FB_FREE', 0, '1000'), series('DCGM_FI_DEV_FB_USED', 0, '79000')].join('\n')
    expect(parseDcgmGpuFacts(text).devices).toEqual([
      {
        index: 0,
        name: 'NVIDIA H100 80GB HBM3',
        uuid: 'GPU-0aaaaaaa-0000-0000-0000-000000000000',
        driverVersion: null,
        memoryTotalMiB: null,
        powerW: null,
      },
    ])
  })

  test('a MIG-partitioned GPU is one device whose memory total is unknown (each instance reports its own framebuffer)', () => {
    const text = ['DCGM_FI_DEV_FB_FREE', 'DCGM_FI_DEV_FB_USED', 'DCGM_FI_DEV_FB_RESERVED']
      .flatMap((name) => [series(name, 0, '9000', { mig: '3' }), series(name, 0, '9000', { mig: '5' })])
      .join('\n')
    const { devices } = parseDcgmGpuFacts(text)
    expect(devices).toHaveLength(1)
    expect(devices[0]?.memoryTotalMiB).toBeNull()
  })

  test('the old namespace (--use-old-namespace: uuid) and DCGM’s blank sentinel', () => {
    const text = [
      series('DCGM_FI_DEV_POWER_USAGE', 0, '9223372036854775794', { uuidLabel: 'uuid' }),
      series('DCGM_FI_DEV_GPU_TEMP', 0, '40', { uuidLabel: 'uuid' }),
    ].join('\n')
    const [device] = parseDcgmGpuFacts(text).devices
    expect(device?.uuid).toBe('GPU-0aaaaaaa-0000-0000-0000-000000000000')
    expect(device?.powerW).toBeNull()
  })

  test('text that is not a DCGM exporter’s gives no device and says why', () => {
    const vllm = readFileSync(new URL('../../fixtures/metrics/vllm.txt', import.meta.url), 'utf8')
    expect(parseDcgmGpuFacts(vllm)).toEqual({
      devices: [],
      reason: 'no DCGM_FI_* series with a gpu label: the URL does not serve a DCGM exporter’s metrics',
    })
  })
})

describe('queryDcgmGpuFacts over HTTP', () => {
  let server: Server | null = null
  afterEach(async () => {
    server?.closeAllConnections()
    server?.close()
    server = null
  })

  async function exporter(status: number, body: string): Promise<string> {
    server = createServer((req, res) => {
      res.writeHead(req.url === '/metrics' ? status : 404, { 'content-type': 'text/plain; version=0.0.4' })
      res.end(body)
    })
    server.listen(0, '127.0.0.1')
    await once(server, 'listening')
    return `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  }

  test('ok: the facts with their source, the URL without credentials, and how memory was derived', async () => {
    const origin = await exporter(200, L4)
    const url = `${origin.replace('http://', 'http://scraper:s3cret-pass@')}/metrics`
    const gpus = await queryDcgmGpuFacts(url)
    expect(gpus).toMatchObject({ status: 'ok', source: 'dcgm-exporter', url: `${origin}/metrics`, note: DCGM_FACTS_NOTE })
    expect(JSON.stringify(gpus)).not.toContain('s3cret')
    expect(DCGM_FACTS_NOTE).toContain('DCGM_FI_DEV_FB_USED + DCGM_FI_DEV_FB_FREE + DCGM_FI_DEV_FB_RESERVED')
  })

  test('an exporter that answers otherwise, or not at all, leaves the GPUs unknown with the reason', async () => {
    const origin = await exporter(503, 'busy')
    expect(await queryDcgmGpuFacts(`${origin}/metrics`)).toEqual({
      status: 'unknown',
      reason: `the DCGM exporter at ${origin}/metrics answered HTTP 503`,
    })
    expect(await queryDcgmGpuFacts(`${origin}/nothing`)).toMatchObject({ status: 'unknown', reason: expect.stringContaining('HTTP 404') })
    server?.close()
    await once(server as Server, 'close')
    expect(await queryDcgmGpuFacts(`${origin}/metrics`)).toEqual({
      status: 'unknown',
      reason: `the DCGM exporter at ${origin}/metrics did not answer (ECONNREFUSED)`,
    })
    const credentialed = await queryDcgmGpuFacts(`${origin.replace('http://', 'http://scraper:s3cret-pass@')}/metrics`)
    expect(credentialed).toEqual({ status: 'unknown', reason: `the DCGM exporter at ${origin}/metrics did not answer (ECONNREFUSED)` })
  })
})
