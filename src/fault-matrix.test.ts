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

/**
 * Every failed request carries a stable code of servegate's, nothing of the key in any form, and
 * the record as written reads back through its own schema (what summarize and compare read).
 */
function expectClassifiedAndClean(record: RunRecord): void {
  for (const r of record.requests) if (r.status === 'failed') expect(ERROR_CODES).toContain(r.error.code)
  const text = JSON.stringify(record)
  expect(RunRecord.parse(JSON.parse(text))).toEqual(record)
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

  const lies = { 'usage-negative': -5, 'usage-huge': 1e12, 'usage-inflated': null } as const
  for (const [lie, reported] of Object.entries(lies) as Array<[keyof typeof lies, number | null]>) {
    test(`${lie} at C = 4: the lying replies are USAGE_INVALID, their figures kept, none in a distribution`, async () => {
      const sim = await startSimServer({
        model: 'm',
        prefillTokPerS: 200_000,
        decodeTokPerS: 4_000,
        faults: [{ kind: lie, requests: [1, 5, 9] }],
      })
      servers.push(sim)
      const record = await runCell({
        baseUrl: sim.url,
        model: 'm',
        apiKey: KEY,
        concurrency: 4,
        requests: 12,
        maxTokens: 8,
        workload: { promptTokens: 32 },
      })
      // Written and read back by the record's own schema: nothing servegate's readers reject.
      const read = RunRecord.parse(JSON.parse(JSON.stringify(record)))
      expect(read.completed).toBe(9)
      expect(read.failures).toEqual({ USAGE_INVALID: 3 })
      const lying = read.requests.filter((r) => r.status === 'failed')
      for (const r of lying) {
        expect(r.reportedUsage?.completionTokens).toBe(reported ?? 8 * 50)
        // What the client saw stays: 8 streamed chunks, each timed.
        expect(r).toMatchObject({ completionTokens: 8, completionTokenSource: 'client-count', contentChunks: 8 })
        expect(r.itlMs).toHaveLength(7)
      }
      for (const r of read.requests.filter((q) => q.status === 'ok'))
        expect(r).toMatchObject({ usageRule: 'tokenizer', reportedUsage: null })
      expect(read.metrics.distributions.completionTokens).toMatchObject({ samples: 9, max: 8 })
      expect(read.metrics.totalCompletionTokens).toBe(72)
      expect(read.plan.usageCheck).toMatchObject({
        maxTokensPerChunk: 16,
        retokenize: true,
        tokenizer: expect.stringContaining('/tokenize'),
      })
      expectClassifiedAndClean(read)
    }, 60_000)
  }

  test('within the chunk bound, only the tokenizer sees the lie; without one the stated bound decides', async () => {
    const sim = await startSimServer({ model: 'm', decodeTokPerS: 4_000, faults: [{ kind: 'usage-inflated', requests: [2] }] })
    servers.push(sim)
    const cell = { baseUrl: sim.url, model: 'm', requests: 4, maxTokens: 8, workload: { promptTokens: 32 } }
    const counted = await runCell({ ...cell, usageCheck: { maxTokensPerChunk: 64 } })
    const lying = counted.requests.find((r) => r.status === 'failed')
    expect(lying).toMatchObject({ usageRule: 'tokenizer', retokenizedTokens: 8, reportedUsage: { completionTokens: 400 } })
    expect(lying?.status === 'failed' && lying.error.message).toMatch(/the engine's tokenizer counts 8 tokens in the streamed text/)
    const bounded = await runCell({ ...cell, usageCheck: { maxTokensPerChunk: 64, retokenize: false } })
    // 400 tokens in 8 chunks is within 64 a chunk: the bound the record states let it through.
    expect(bounded.failed).toBe(0)
    expect(bounded.plan.usageCheck).toMatchObject({ maxTokensPerChunk: 64, retokenize: false, tokenizer: null })
    expect(bounded.requests.every((r) => r.usageRule === 'chunk-bound')).toBe(true)
  }, 60_000)

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
