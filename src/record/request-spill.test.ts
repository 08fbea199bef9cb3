import { mkdtemp, readFile, rm, stat } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { execa } from 'execa'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { computeCellMetrics } from '../metrics/cell-metrics.ts'
import { runCell } from '../runner/measure-cell.ts'
import { RequestRecord, RunRecord } from '../schema/run.ts'
import { registerSecret, clearSecrets } from '../secrets.ts'
import { type SimServer, startSimServer } from '../sim/server.ts'
import { writeRunRecord } from './record-writer.ts'
import { RequestSpill, writeSpilledRecord } from './request-spill.ts'

const BIN = fileURLToPath(new URL('../../bin/servegate.js', import.meta.url))

let dir = ''
let sim: SimServer
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'servegate-spill-'))
  sim = await startSimServer({ model: 'm', decodeTokPerS: 4000, prefillTokPerS: 1_000_000, batchSlowdown: 0 })
})
afterAll(async () => {
  await sim.close()
  await rm(dir, { recursive: true, force: true })
})

const CELL = { model: 'm', requests: 40, concurrency: 8, maxTokens: 12, calibrate: false, workload: { promptTokens: 32 } } as const

describe('a spilled cell', () => {
  test('keeps no request in memory, and its record file is byte for byte the in-memory one', async () => {
    const spill = await RequestSpill.create(join(dir, 'cell.requests.jsonl'))
    const spilled = await runCell({ ...CELL, baseUrl: sim.url }, { spill })
    expect(spilled.requests).toEqual([])
    expect(spill.count).toBe(40)
    // Requests end out of order at C = 8; the spill reads them back in plan order.
    const back: RequestRecord[] = []
    for await (const r of spill.inOrder()) back.push(r)
    expect(back.map((r) => r.index)).toEqual([...Array(40).keys()])
    // Spilled at once on the chunk bound, then made again once the tokenizer counted them: the later line wins.
    expect(back.every((r) => r.usageRule === 'tokenizer' && r.retokenizedTokens === 12)).toBe(true)
    const lines = (await readFile(spill.path, 'utf8'))
      .split('\n')
      .filter(Boolean)
      .map((l) => RequestRecord.parse(JSON.parse(l)))
    expect(lines).toHaveLength(80)
    expect(lines.slice(0, 40).every((r) => r.usageRule === 'chunk-bound')).toBe(true)
    expect(spilled.completed + (spilled.failed as number)).toBe(40)
    // The counts and the figures are those of the requests themselves.
    expect(spilled.metrics).toEqual({ ...computeCellMetrics(back, spilled.metrics.wallClockMs), openLoop: null })
    const full = { ...spilled, requests: back }
    await writeRunRecord(join(dir, 'memory.json'), full)
    await writeSpilledRecord(join(dir, 'spilled.json'), spilled, spill)
    const [memory, written] = await Promise.all([readFile(join(dir, 'memory.json'), 'utf8'), readFile(join(dir, 'spilled.json'), 'utf8')])
    expect(written).toBe(memory)
    // One line a request, gaps packed; read back, it is the record that was measured.
    expect(written.split('\n').filter((l) => l.startsWith('{"status":')).length).toBe(40)
    expect(written).not.toMatch(/"itlMs":\[/)
    expect(RunRecord.parse(JSON.parse(written))).toEqual(full)
    await spill.remove()
    await expect(stat(spill.path)).rejects.toThrow(/ENOENT/)
  })

  test('a record with no requests is written as [] and the lines are scrubbed as they are spilled', async () => {
    const spill = await RequestSpill.create(join(dir, 'empty.requests.jsonl'))
    const record = await runCell({ ...CELL, requests: 2, concurrency: 1, baseUrl: sim.url })
    await writeSpilledRecord(join(dir, 'empty.json'), { ...record, requests: [] }, spill)
    expect(JSON.parse(await readFile(join(dir, 'empty.json'), 'utf8')).requests).toEqual([])
    const secret = 'spill-secret-value-123'
    registerSecret(secret)
    try {
      const [first] = record.requests
      spill.add({ ...(first as RequestRecord), finishReason: `echo ${secret}` })
      await spill.flush()
      const text = await readFile(spill.path, 'utf8')
      expect(text).not.toContain(secret)
      expect(text).toContain('[redacted]')
    } finally {
      clearSecrets()
      await spill.remove()
    }
  })

  test('the same request spilled twice is a bug, refused', async () => {
    const spill = await RequestSpill.create(join(dir, 'twice.requests.jsonl'))
    const record = await runCell({ ...CELL, requests: 1, concurrency: 1, baseUrl: sim.url })
    const [one] = record.requests as [RequestRecord]
    spill.add(one)
    expect(() => spill.add(one)).toThrow(/request 0 was already spilled/)
    await spill.remove()
  })
})

describe('servegate run spills beside --out', () => {
  test(
    'killed outright (SIGKILL) mid-cell: the spill holds every request it finished, each a valid record',
    { timeout: 60_000 },
    async () => {
      const slow = await startSimServer({ model: 'm', decodeTokPerS: 200, prefillTokPerS: 1_000_000, batchSlowdown: 0 })
      try {
        const out = join(dir, 'killed.json')
        const argv = ['run', '--base-url', slow.url, '--model', 'm', '--requests', '400', '--concurrency', '4', '--max-tokens', '20']
        const child = execa(process.execPath, [BIN, ...argv, '--prompt-tokens', '16', '--no-calibrate', '--out', out], { reject: false })
        const spillFile = `${out}.requests.jsonl`
        const lines = async (): Promise<string[]> => (await readFile(spillFile, 'utf8').catch(() => '')).split('\n').filter(Boolean)
        // 4 streams of 20 tokens at 200 tok/s: about 40 requests a second; wait for a few seconds' worth on disk.
        await expect.poll(async () => (await lines()).length, { timeout: 30_000, interval: 200 }).toBeGreaterThanOrEqual(40)
        child.kill('SIGKILL')
        await child
        await expect(stat(out)).rejects.toThrow(/ENOENT/)
        const kept = (await lines()).map((line) => RequestRecord.parse(JSON.parse(line)))
        expect(kept.length).toBeGreaterThanOrEqual(40)
        expect(new Set(kept.map((r) => r.index)).size).toBe(kept.length)
        expect(kept.every((r) => r.status === 'ok')).toBe(true)
      } finally {
        await slow.close()
      }
    },
  )

  test('a cell that ends writes the whole record and removes its spill', { timeout: 60_000 }, async () => {
    const out = join(dir, 'whole.json')
    const argv = ['run', '--base-url', sim.url, '--model', 'm', '--requests', '30', '--concurrency', '6', '--max-tokens', '8']
    const result = await execa(process.execPath, [BIN, ...argv, '--no-calibrate', '--out', out], { reject: false })
    expect(result.stderr).toBe('')
    expect(result.exitCode).toBe(0)
    const record = RunRecord.parse(JSON.parse(await readFile(out, 'utf8')))
    expect(record.requests.map((r) => r.index)).toEqual([...Array(30).keys()])
    expect(record.completed).toBe(30)
    await expect(stat(`${out}.requests.jsonl`)).rejects.toThrow(/ENOENT/)
  })
})
