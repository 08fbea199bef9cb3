/**
 * Network time kept apart, end to end (issue 37 item 2): the simulated engine in a test network
 * namespace (fixtures/netns.ts) behind a proxy that delays every byte (fixtures/delay-proxy.ts,
 * the delay in user space: the kernel here has no netem). The probes must see the injected delay
 * over HTTP and none in the TCP handshake the proxy answers itself, and the network-adjusted TTFT
 * must be the sim's own.
 */
import { readFile } from 'node:fs/promises'
import { join } from 'node:path'
import { describe, expect } from 'vitest'
import { netnsForTests, netnsUnavailable } from '../../fixtures/netns.ts'
import { listening, realtime, wakeupLateness } from '../../fixtures/netns-listen.ts'
import { test } from '../../fixtures/test-context.ts'
import { NETWORK_PROBES_BEFORE } from '../runner/network-probes.ts'
import { RunRecord } from '../schema/run.ts'

const SERVER = new URL('../../fixtures/netns-server.ts', import.meta.url).pathname
const PROXY = new URL('../../fixtures/delay-proxy.ts', import.meta.url).pathname
const unavailable = await netnsUnavailable()
if (unavailable !== null) process.stderr.write(`network-time tests SKIPPED: ${unavailable}\n`)

/** The injected round trip, ms: half each way. */
const DELAY_MS = 20
/** The sim's prefill speed, tokens/s: with the prompts' tokens it sets the configured TTFT (prompt / speed). */
const PREFILL_TOK_PER_S = 1000

const run = (baseUrl: string, out: string) => [
  'run',
  '--base-url',
  baseUrl,
  '--remote',
  '--model',
  'm',
  '--requests',
  '24',
  '--concurrency',
  '1',
  '--max-tokens',
  '4',
  '--prompt-tokens',
  '48',
  '--out',
  out,
]

describe.skipIf(unavailable !== null)('network time through a delaying proxy in a test namespace', () => {
  const ns = netnsForTests()

  test(`${DELAY_MS} ms injected: HTTP RTT p50 within 1 ms of it, handshake near 0, adjusted TTFT the sim's`, async ({ cli, tmpDir }) => {
    const sim = { model: 'm', prefillTokPerS: PREFILL_TOK_PER_S, decodeTokPerS: 400 }
    // The sim on the namespace's loopback; the proxy on its veth address, in front of it.
    const simPort = await listening(ns, realtime([process.execPath, SERVER, JSON.stringify({ mode: 'sim', bind: '127.0.0.1', sim })]))
    const upstream = { host: '127.0.0.1', port: simPort }
    const proxy = (delayMs: number) => realtime([process.execPath, PROXY, JSON.stringify({ bind: ns.nsAddress, upstream, delayMs })])
    const direct = await listening(ns, proxy(0))
    const delayed = await listening(ns, proxy(DELAY_MS))

    // The same path without the delay: what the probe and the sim take on their own (≈0.1 ms on an idle machine).
    const base = await cli(run(`http://${ns.nsAddress}:${direct}`, join(tmpDir, 'direct.json')))
    expect(base.code, base.stderr).toBe(0)
    const baseRecord = RunRecord.parse(JSON.parse(await readFile(join(tmpDir, 'direct.json'), 'utf8')))
    const baseRttMs = baseRecord.network?.http.before.p50Ms as number

    const out = join(tmpDir, 'delayed.json')
    const wakeup = wakeupLateness()
    const r = await cli(run(`http://${ns.nsAddress}:${delayed}`, out))
    const lateMs = wakeup.stop()
    expect(r.stderr).toBe('')
    expect(r.code).toBe(0)
    const record = RunRecord.parse(JSON.parse(await readFile(out, 'utf8')))
    const network = record.network
    if (network === undefined) throw new Error('a --remote run must record network')
    expect(network.host).toBe(`${ns.nsAddress}:${delayed}`)
    expect(network.http.endpoint).toBe('/health')
    expect(network.http.before.samples).toBe(NETWORK_PROBES_BEFORE)
    expect(network.handshake.before.samples).toBe(NETWORK_PROBES_BEFORE)
    expect(network.http.during.samples + network.http.during.failed).toBeGreaterThan(0)
    const httpP50 = network.http.before.p50Ms as number
    process.stderr.write(
      `network-time: HTTP RTT p50 ${httpP50} ms (path alone ${baseRttMs} ms), during p50 ${network.http.during.p50Ms} ms; ` +
        `handshake p50 ${network.handshake.before.p50Ms} ms; this process wakes ${lateMs} ms late\n`,
    )
    // The injected delay, over the path's own round trip, within 1 ms at p50 beyond how late this busy machine wakes the client.
    expect(Math.abs(httpP50 - baseRttMs - DELAY_MS)).toBeLessThanOrEqual(1 + lateMs)
    // The proxy accepts at once: the handshake does not see the delay (near 0, but for how late the client wakes).
    expect(network.handshake.before.p50Ms).toBeLessThan(2 + lateMs)

    const adjusted = network.adjusted
    expect(adjusted?.estimator).toBe('http-p50-before')
    expect(adjusted?.rttMs).toBe(httpP50)
    const ttft = record.metrics.distributions.ttftMs
    expect(adjusted?.ttftMs.p50).toBeCloseTo((ttft.p50 as number) - httpP50, 9)
    expect(adjusted?.e2eMs.p50).toBeCloseTo((record.metrics.distributions.e2eMs.p50 as number) - httpP50, 9)
    // The sim's TTFT is its prefill: prompt tokens (as it counted them) over its prefill speed.
    const promptTokens = record.metrics.distributions.promptTokens.p50 as number
    const configuredTtftMs = (promptTokens / PREFILL_TOK_PER_S) * 1000
    const baseTtftError = (baseRecord.metrics.distributions.ttftMs.p50 as number) - baseRttMs - configuredTtftMs
    process.stderr.write(
      `network-time: TTFT p50 raw ${ttft.p50} ms, network-adjusted ${adjusted?.ttftMs.p50} ms, configured ${configuredTtftMs} ms; ` +
        `undelayed path: raw ${baseRecord.metrics.distributions.ttftMs.p50} ms\n`,
    )
    // Within the client's error: what the same cell over the undelayed path is off by, and 1 ms more.
    expect(Math.abs((adjusted?.ttftMs.p50 as number) - configuredTtftMs)).toBeLessThanOrEqual(Math.abs(baseTtftError) + 1)

    expect(r.stdout).toMatch(/ttft ms \(network-adjusted\)/)
    expect(r.stdout).toMatch(/e2e ms \(network-adjusted\)/)
    expect(r.stdout).toContain(`network to ${ns.nsAddress}:${delayed}: HTTP RTT (GET /health) before p50`)

    // The two paths as a pair: about 0 ms against 20 ms of RTT is refused, naming both figures.
    const compared = await cli(['compare', join(tmpDir, 'direct.json'), out])
    expect(compared.code).toBe(1)
    expect(compared.stdout).toContain(
      `network RTT: the arms' paths differ by more than max(2 ms, 25% of the larger) ` +
        `(baseline HTTP RTT p50 ${baseRttMs.toFixed(2)} ms, candidate HTTP RTT p50 ${httpP50.toFixed(2)} ms)`,
    )
    expect(compared.stderr).toContain('the pair is not matched')
  }, 120_000)
})

describe('a loopback target without --remote', () => {
  test('records no network field and prints none; with --remote the same target is probed', async ({ cli, simEngine, tmpDir }) => {
    const cell = (out: string) => [
      'run',
      '--base-url',
      simEngine.url,
      '--model',
      'm',
      '--requests',
      '4',
      '--concurrency',
      '1',
      '--max-tokens',
      '4',
      '--out',
      out,
    ]
    const r = await cli(cell(join(tmpDir, 'loopback.json')))
    expect(r.code).toBe(0)
    expect(JSON.parse(await readFile(join(tmpDir, 'loopback.json'), 'utf8'))).not.toHaveProperty('network')
    expect(r.stdout).not.toMatch(/network/)

    const remote = await cli([...cell(join(tmpDir, 'remote.json')), '--remote'])
    expect(remote.code).toBe(0)
    const record = RunRecord.parse(JSON.parse(await readFile(join(tmpDir, 'remote.json'), 'utf8')))
    expect(record.network?.http.endpoint).toBe('/health')
    expect(record.network?.handshake.before.samples).toBe(NETWORK_PROBES_BEFORE)
    expect(record.network?.http.before.samples).toBe(NETWORK_PROBES_BEFORE)
    expect(record.network?.adjusted?.estimator).toBe('http-p50-before')

    // summarize recomputes the record's figures, the network-adjusted ones with them; a loopback record has none.
    const text = await cli(['summarize', join(tmpDir, 'remote.json')])
    expect(text.stdout).toMatch(/^ttft ms \(network-adjusted\) +4 /m)
    expect(text.stdout).toMatch(/^network to 127\.0\.0\.1:\d+: HTTP RTT \(GET \/health\) before p50 [\d.]+ ms \(10\)/m)
    const json = JSON.parse((await cli(['summarize', join(tmpDir, 'remote.json'), '--json'])).stdout) as Record<string, unknown>
    expect(json.networkAdjusted).toEqual(record.network?.adjusted)
    const plain = JSON.parse((await cli(['summarize', join(tmpDir, 'loopback.json'), '--json'])).stdout) as Record<string, unknown>
    expect(Object.keys(plain)).toEqual(['metrics'])
  })
})
