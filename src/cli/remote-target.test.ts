/**
 * Remote targets, end to end, against a host the test makes itself: a network namespace joined
 * by a veth pair (fixtures/netns.ts), the simulated engine inside it. Never this machine's own
 * address, never anything outside.
 */
import { once } from 'node:events'
import { readFile, writeFile } from 'node:fs/promises'
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { join } from 'node:path'
import { execa } from 'execa'
import { describe, expect } from 'vitest'
import { netnsForTests, netnsUnavailable, type TestNetns } from '../../fixtures/netns.ts'
import { type NsServer, serveInNetns } from '../../fixtures/netns-listen.ts'
import { test } from '../../fixtures/test-context.ts'
import { RunRecord } from '../schema/run.ts'

const SERVER = new URL('../../fixtures/netns-server.ts', import.meta.url).pathname
const BIN = new URL('../../bin/servegate.js', import.meta.url).pathname
const unavailable = await netnsUnavailable()
// CI must not pass these silently: the reason is printed.
if (unavailable !== null) process.stderr.write(`remote-target tests SKIPPED: ${unavailable}\n`)

/** The namespace's test server (fixtures/netns-server.ts) in `setup`'s mode, bound to the namespace's address. */
const serve = (ns: TestNetns, setup: Record<string, unknown>): Promise<NsServer> =>
  serveInNetns(ns, [process.execPath, SERVER, JSON.stringify({ bind: ns.nsAddress, ...setup })])

const KEY = 'sk-remote-target-test-3f9a7c21'
const run = ['run', '--model', 'm', '--requests', '4', '--concurrency', '2', '--max-tokens', '8', '--prompt-tokens', '32']

describe.skipIf(unavailable !== null)('remote targets in a test network namespace', () => {
  const ns = netnsForTests()

  test('--remote measures a cell; without it the host is refused before anything is sent', async ({ cli, tmpDir }) => {
    const sim = await serve(ns, { mode: 'sim', sim: { model: 'm', decodeTokPerS: 400 } })
    const baseUrl = `http://${ns.nsAddress}:${sim.port}`
    const refused = await cli([...run, '--base-url', baseUrl, '--out', join(tmpDir, 'refused.json')])
    expect(refused.code).toBe(2)
    expect(refused.stderr).toMatch(
      new RegExp(`${ns.nsAddress.replace(/\./g, '\\.')} is not a loopback address.*nothing was sent.*--remote`),
    )
    const capacity = await cli([
      'capacity',
      '--base-url',
      baseUrl,
      '--model',
      'm',
      '--slo',
      'ttft=1000',
      '--start',
      '1',
      '--out',
      join(tmpDir, 'c.json'),
    ])
    expect(capacity.code).not.toBe(0)
    expect(capacity.stderr).toMatch(/is not a loopback address.*--remote/)
    expect(sim.connections()).toBe(0)

    process.env.SG_REMOTE_TEST_KEY = KEY
    const out = join(tmpDir, 'remote.json')
    const r = await cli([...run, '--base-url', baseUrl, '--remote', '--api-key-env', 'SG_REMOTE_TEST_KEY', '--out', out])
    delete process.env.SG_REMOTE_TEST_KEY
    expect(r.stderr).toBe('')
    expect(r.code).toBe(0)
    const text = await readFile(out, 'utf8')
    const record = RunRecord.parse(JSON.parse(text))
    expect(record.completed).toBe(4)
    expect(record.target.baseUrl).toBe(baseUrl)
    expect(record.manifest?.target).toEqual({ host: `${ns.nsAddress}:${sim.port}`, remote: true, tls: false })
    expect(sim.connections()).toBeGreaterThan(0)
    for (const written of [text, r.stdout, r.stderr]) expect(written).not.toContain(KEY)
  })

  test('a redirect to another host is refused, naming it, and nothing is sent there', async ({ cli, tmpDir }) => {
    // The other host: this side of the veth pair, a server that counts what reaches it.
    let hits = 0
    const other: Server = createServer((_req, res) => {
      hits++
      res.end('{}')
    })
    other.on('connection', () => hits++)
    other.listen(0, ns.hostAddress)
    await once(other, 'listening')
    try {
      const otherHost = `${ns.hostAddress}:${(other.address() as AddressInfo).port}`
      const redirect = await serve(ns, { mode: 'redirect', location: `http://${otherHost}/v1/models` })
      const r = await cli([...run, '--base-url', `http://${ns.nsAddress}:${redirect.port}`, '--remote', '--out', join(tmpDir, 'r.json')])
      expect(r.code).not.toBe(0)
      expect(r.stderr).toContain(`redirected GET /v1/models (302) to ${otherHost}; servegate never follows redirects`)
      expect(redirect.connections()).toBeGreaterThan(0)
      expect(hits).toBe(0)
    } finally {
      other.close()
      other.closeAllConnections()
    }
  })

  test('HTTPS with a self-signed CA: measured with --ca-file, refused clearly without it', async ({ cli, tmpDir }) => {
    const file = (name: string) => join(tmpDir, name)
    const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes']
    await execa('openssl', [
      'req',
      '-x509',
      ...ec,
      '-keyout',
      file('ca.key'),
      '-out',
      file('ca.pem'),
      '-days',
      '1',
      '-subj',
      '/CN=servegate test CA',
    ])
    await execa('openssl', ['req', ...ec, '-keyout', file('srv.key'), '-out', file('srv.csr'), '-subj', `/CN=${ns.nsAddress}`])
    await writeFile(file('srv.ext'), `subjectAltName=IP:${ns.nsAddress}\n`)
    await execa('openssl', [
      'x509',
      '-req',
      '-in',
      file('srv.csr'),
      '-CA',
      file('ca.pem'),
      '-CAkey',
      file('ca.key'),
      '-CAcreateserial',
      '-out',
      file('srv.pem'),
      '-days',
      '1',
      '-extfile',
      file('srv.ext'),
    ])
    const sim = await serve(ns, {
      mode: 'sim',
      sim: { model: 'm', decodeTokPerS: 400 },
      tls: { keyFile: file('srv.key'), certFile: file('srv.pem') },
    })
    const baseUrl = `https://${ns.nsAddress}:${sim.port}`

    const untrusted = await cli([...run, '--base-url', baseUrl, '--remote', '--out', file('untrusted.json')])
    expect(untrusted.code).not.toBe(0)
    expect(untrusted.stderr).toMatch(
      /cannot verify https:\/\/\S+ TLS certificate \((SELF_SIGNED_CERT_IN_CHAIN|UNABLE_TO_VERIFY_LEAF_SIGNATURE):/,
    )
    expect(untrusted.stderr).toContain('--ca-file')

    const out = file('tls.json')
    const r = await cli([...run, '--base-url', baseUrl, '--remote', '--ca-file', file('ca.pem'), '--client-workers', '1', '--out', out])
    expect(r.stderr).toBe('')
    expect(r.code).toBe(0)
    const record = RunRecord.parse(JSON.parse(await readFile(out, 'utf8')))
    expect(record.completed).toBe(4)
    expect(record.manifest?.target).toEqual({ host: `${ns.nsAddress}:${sim.port}`, remote: true, tls: true })
    // The HTTP probes cross TLS on a connection of their own, verified against the same CA file.
    expect(record.network?.http.endpoint).toBe('/health')
    expect(record.network?.http.before.samples).toBe(10)

    // Without --ca-file, a CA in the system's store is trusted (OpenSSL's SSL_CERT_FILE here, read at start-up: a process of its own).
    const system = await execa(process.execPath, [BIN, ...run, '--base-url', baseUrl, '--remote', '--out', file('system.json')], {
      env: { SSL_CERT_FILE: file('ca.pem') },
      reject: false,
    })
    expect(system.stderr).toBe('')
    expect(system.exitCode).toBe(0)
  })
})
