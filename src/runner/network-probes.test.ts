/**
 * The probes against a path with a known delay: the simulated engine in a test network namespace
 * behind fixtures/delay-proxy.ts, once with the delay and once without, probed in turns so the
 * machine's other load falls on both alike (the servers at real-time priority: fixtures/netns-listen.ts).
 */
import { describe, expect, test } from 'vitest'
import { netnsForTests, netnsUnavailable } from '../../fixtures/netns.ts'
import { listening, realtime, wakeupLateness } from '../../fixtures/netns-listen.ts'
import { nearestRank } from '../metrics/distribution.ts'
import { NetworkProbeSession } from './network-probes.ts'

const SERVER = new URL('../../fixtures/netns-server.ts', import.meta.url).pathname
const PROXY = new URL('../../fixtures/delay-proxy.ts', import.meta.url).pathname
const unavailable = await netnsUnavailable()
if (unavailable !== null) process.stderr.write(`network-probes namespace tests SKIPPED: ${unavailable}\n`)

const DELAY_MS = 20
/** Probes of each path: enough that a p50 is not moved by the few this busy machine delays. */
const ROUNDS = 41

const p50 = (values: readonly number[]): number => nearestRank(Float64Array.from(values).sort(), 50)

describe.skipIf(unavailable !== null)('probes through a delaying proxy in a test namespace', () => {
  const ns = netnsForTests()

  test(`${DELAY_MS} ms injected: HTTP RTT p50 within 1 ms of it over the path's own, the handshake near 0`, async () => {
    const sim = { mode: 'sim', bind: '127.0.0.1', sim: { model: 'm' } }
    const simPort = await listening(ns, realtime([process.execPath, SERVER, JSON.stringify(sim)]))
    const upstream = { host: '127.0.0.1', port: simPort }
    const proxy = (delayMs: number) => realtime([process.execPath, PROXY, JSON.stringify({ bind: ns.nsAddress, upstream, delayMs })])
    const [direct, delayed] = await Promise.all([listening(ns, proxy(0)), listening(ns, proxy(DELAY_MS))])
    const paths = await Promise.all(
      [direct, delayed].map((port) => NetworkProbeSession.start(`http://${ns.nsAddress}:${port}`, {}, undefined, 0)),
    )
    const [undelayed, through] = paths as [NetworkProbeSession, NetworkProbeSession]
    const wakeup = wakeupLateness()
    for (let i = 0; i < ROUNDS; i++) {
      await undelayed.probeOnce('during')
      await through.probeOnce('during')
    }
    const lateMs = wakeup.stop()
    const [a, b] = await Promise.all(paths.map((p) => p.stop()))
    if (a === undefined || b === undefined) throw new Error('two sessions were started')
    expect(b.http.endpoint).toBe('/health')
    expect(b.http.before.samples).toBe(0)
    expect(b.http.during.samples).toBe(ROUNDS)
    expect(b.handshake.during.samples).toBe(ROUNDS)
    const ms = (us: readonly number[]) => us.map((u) => u / 1000)
    const pathMs = p50(ms(a.http.during.rttUs))
    const delayedMs = p50(ms(b.http.during.rttUs))
    process.stderr.write(
      `network-probes: HTTP RTT p50 ${delayedMs} ms through ${DELAY_MS} ms, ${pathMs} ms without; ` +
        `handshake p50 ${b.handshake.during.p50Ms} ms through, ${a.handshake.during.p50Ms} ms without; this process wakes ${lateMs} ms late\n`,
    )
    // Within 1 ms, beyond how late this busy machine wakes the client for a reply that finds it asleep.
    expect(Math.abs(delayedMs - pathMs - DELAY_MS)).toBeLessThanOrEqual(1 + lateMs)
    // The proxy accepts at once: a handshake through it takes what one without it takes, near 0 (but for how late the client wakes).
    expect(b.handshake.during.p50Ms).toBeLessThan(2 + lateMs)
  }, 120_000)
})

describe('a target that answers neither HTTP endpoint', () => {
  test('is probed by TCP handshakes alone, saying why', async () => {
    const { createServer } = await import('node:http')
    const server = createServer((_req, res) => {
      res.statusCode = 404
      res.end('no')
    })
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    try {
      const { port } = server.address() as { port: number }
      const session = await NetworkProbeSession.start(`http://127.0.0.1:${port}`, {}, undefined, 3)
      const probes = await session.stop()
      expect(probes.http.endpoint).toBeNull()
      expect(probes.http.reason).toBe('neither endpoint answered 2xx (/health 404, /v1/models 404); only TCP handshakes were probed')
      expect(probes.http.before.samples).toBe(0)
      expect(probes.handshake.before.samples).toBe(3)
    } finally {
      server.close()
      server.closeAllConnections()
    }
  })
})
