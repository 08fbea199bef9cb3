/**
 * The fault matrix: hostile servers at concurrency, each asserting what servegate guarantees —
 * no ok request lost (against what the server says it sent to the end), every failure
 * classified, no request sent twice that the server answered, no secret written. Teardown (no
 * process left) is pinned by src/engines/teardown.test.ts and the key-quoting server by
 * src/cli/secrets-leak.test.ts; this file runs the per-request faults together.
 */
import { afterEach, describe, expect, test } from 'vitest'
import { ERROR_CODES } from './errors.ts'
import { runCell } from './runner/measure-cell.ts'
import { RunRecord } from './schema/run.ts'
import { FAULT_KINDS } from './sim/sim-options.ts'
import { type SimServer, startSimServer } from './sim/server.ts'
import { startWireFaultServer, type WireFault, type WireFaultServer } from './sim/wire-faults.ts'

const KEY = 'sg-matrix-Zq9+pL/x=T&w7'
const forms = [KEY, encodeURIComponent(KEY), Buffer.from(KEY).toString('base64')]

let servers: Array<SimServer | WireFaultServer> = []
afterEach(async () => {
  await Promise.all(servers.map((s) => s.close()))
  servers = []
})

/** Every failed request carries a stable code of servegate's, and nothing of the key in any form. */
function expectClassifiedAndClean(record: RunRecord): void {
  for (const r of record.requests) if (r.status === 'failed') expect(ERROR_CODES).toContain(r.error.code)
  const text = JSON.stringify(record)
  for (const form of forms) expect(text).not.toContain(form)
}

/** A small cell against a wire-fault server, its prompts sized without a tokenizer. */
const wireCell = (server: WireFaultServer) => ({
  baseUrl: server.url,
  model: 'm',
  apiKey: KEY,
  concurrency: 4,
  requests: 12,
  maxTokens: 8,
  requestTimeoutMs: 10_000,
  calibrate: false,
  workload: { promptTokens: 32 },
})

describe('the fault matrix', () => {
  test('every per-request fault of the simulated engine at C = 16: 0 ok lost, 100% classified, 0 secrets', async () => {
    const sim = await startSimServer({
      model: 'm',
      prefillTokPerS: 200_000,
      decodeTokPerS: 2_000,
      faultRate: 0.3,
      faultKinds: [...FAULT_KINDS],
      seed: 7,
      // Stalled streams end at the client's idle timeout below.
    })
    servers.push(sim)
    const record = await runCell({
      baseUrl: sim.url,
      model: 'm',
      apiKey: KEY,
      concurrency: 16,
      requests: 200,
      maxTokens: 16,
      requestTimeoutMs: 3_000,
      workload: { promptTokens: 32, canaries: true },
    })
    expect(RunRecord.parse(record)).toBeTruthy()
    const stats = sim.stats()
    expect(Object.values(stats.faultsInjected).every((n) => n > 0)).toBe(true)
    // Every stream the server wrote to its end without a fault is an ok request, and no other is.
    expect(record.completed).toBe(stats.cleanCompletions)
    expect(record.completed + (record.failed as number)).toBe(200)
    expectClassifiedAndClean(record)
  }, 60_000)

  for (const fault of ['html-page', 'json-reply', 'endless-line'] as const satisfies readonly WireFault[]) {
    test(`${fault} at C = 4: every request failed with its code, none sent twice`, async () => {
      const server = await startWireFaultServer(fault, { longLineBytes: 8 * 1024 * 1024 })
      servers.push(server)
      const record = await runCell(wireCell(server))
      expect(record.failed).toBe(12)
      const codes = new Set(record.requests.map((r) => (r.status === 'failed' ? r.error.code : 'ok')))
      expect([...codes]).toEqual([fault === 'endless-line' ? 'STREAM_PROTOCOL' : 'RESPONSE_NOT_STREAM'])
      // The server answered each completion request it read, so none may be sent again.
      expect(server.completions()).toBe(12)
      expectClassifiedAndClean(record)
    }, 60_000)
  }

  test('a malformed status line: refused before any measured request, naming the protocol error', async () => {
    const server = await startWireFaultServer('malformed-status-line')
    servers.push(server)
    await expect(runCell(wireCell(server))).rejects.toMatchObject({
      code: 'CONNECT_FAILED',
      message: expect.stringMatching(/HTTP\/1\.1 protocol/),
    })
    expect(server.completions()).toBe(0)
  })
})
