import { mkdtemp, readdir, readFile, rm, stat } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { computeCellMetrics } from '../metrics/cell-metrics.ts'
import { runCell } from '../runner/measure-cell.ts'
import { CapacitySearch } from '../schema/capacity-record.ts'
import { quantizeGap } from '../schema/itl-packed.ts'
import type { RequestRecord, RunRecord } from '../schema/run.ts'
import { clearSecrets, registerSecret } from '../secrets.ts'
import { startSimServer } from '../sim/server.ts'
import { parseRunRecord, readRunRecord } from './record-io.ts'
import { requestLine, runRecordText, writeCapacityRecord, writeRunRecord } from './record-writer.ts'

let dir = ''
/** A cell measured on the simulator: a real record's top level and requests to build large records from. */
let measured: RunRecord

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'servegate-writer-'))
  const sim = await startSimServer({ model: 'm', decodeTokPerS: 4000, prefillTokPerS: 1_000_000, batchSlowdown: 0 })
  try {
    measured = await runCell({
      baseUrl: sim.url,
      model: 'm',
      requests: 4,
      concurrency: 2,
      maxTokens: 12,
      calibrate: false,
      workload: { promptTokens: 32 },
    })
  } finally {
    await sim.close()
  }
}, 60_000)

afterAll(async () => {
  await rm(dir, { recursive: true, force: true })
})

/** A seeded uniform draw in [0, 1). */
function uniform(seed: number): () => number {
  let s = seed
  return () => (s = (s * 1103515245 + 12345) % 2 ** 31) / 2 ** 31
}

/** `count` requests of `tokens` tokens each, the measured requests' fields, gaps from `gap`, figures recomputed. */
function largeRecord(count: number, tokens: number, gap: () => number): RunRecord {
  const template = measured.requests[0] as RequestRecord
  const requests: RequestRecord[] = Array.from({ length: count }, (_, index) => {
    const itlMs = Array.from({ length: tokens - 1 }, () => quantizeGap(gap()))
    return { ...template, index, completionTokens: tokens, itlMs, startOffsetMs: index * 1.234567 }
  })
  const metrics = { ...measured.metrics, ...computeCellMetrics(requests, measured.metrics.wallClockMs), openLoop: null }
  return { ...measured, completed: count, requests, metrics, plan: { ...measured.plan, requests: count, maxTokens: tokens } }
}

/** Writes through the real writer, reads back through the real reader; returns the bytes per token. */
async function bytesPerToken(name: string, record: RunRecord, tokens: number): Promise<number> {
  const path = join(dir, `${name}.json`)
  await writeRunRecord(path, record)
  const { size } = await stat(path)
  expect(await readRunRecord(path)).toEqual(record)
  const perToken = size / (record.requests.length * tokens)
  console.log(`${name}: ${size} bytes, ${perToken.toFixed(2)} bytes a token`)
  return perToken
}

/** 10 ms gaps ± tens of µs: a steady stream (the simulator, a lightly loaded engine). */
function steadyGaps(seed: number): () => number {
  const random = uniform(seed)
  return () => 10 + (random() - 0.5) * 0.08
}

/**
 * An engine's decode steps: each request starts at a step time of 15-40 ms that drifts as the batch
 * changes (±0.3 ms a step), ±0.5 ms of jitter, and one step in 50 held up 10-60 ms by another
 * request's prefill. (vLLM's own per-request gaps in fixtures/reference/wild pack into 1.8-2.6
 * base64 characters a gap; these into about 2.6.)
 */
function engineGaps(seed: number): () => number {
  const random = uniform(seed)
  let step = 0
  let left = 0
  return () => {
    if (left-- <= 0) {
      step = 15 + random() * 25
      left = 999
    }
    step = Math.min(40, Math.max(15, step + (random() - 0.5) * 0.6))
    const stall = random() < 0.02 ? 10 + random() * 50 : 0
    return step + (random() - 0.5) + stall
  }
}

describe('a run record of a few bytes a token', () => {
  test('1024 requests × 1000 tokens of steady 10 ms gaps (± tens of µs): at most 8 bytes a token, and it reads back equal', async () => {
    const perToken = await bytesPerToken('steady-1024x1000', largeRecord(1024, 1000, steadyGaps(1)), 1000)
    expect(perToken).toBeLessThanOrEqual(8)
  })

  test('1024 × 1000 tokens of an engine’s 15-40 ms gaps: at most 8 bytes a token, and at most 8 even with no two gaps alike', async () => {
    expect(await bytesPerToken('engine-1024x1000', largeRecord(1024, 1000, engineGaps(2)), 1000)).toBeLessThanOrEqual(8)
    // The worst case for the deltas: every gap drawn afresh, uniform over 15-40 ms.
    const random = uniform(3)
    const independent = largeRecord(1024, 1000, () => 15 + random() * 25)
    expect(await bytesPerToken('independent-1024x1000', independent, 1000)).toBeLessThanOrEqual(8)
  })

  test('1024 × 200 tokens, where each request’s own fields weigh more: at most 8 bytes a token', async () => {
    expect(await bytesPerToken('steady-1024x200', largeRecord(1024, 200, steadyGaps(4)), 200)).toBeLessThanOrEqual(8)
    expect(await bytesPerToken('engine-1024x200', largeRecord(1024, 200, engineGaps(5)), 200)).toBeLessThanOrEqual(8)
  })
})

describe('writeRunRecord', () => {
  test('lays the record out as indented JSON with one compact line a request, and reads back as written', async () => {
    const path = join(dir, 'layout.json')
    await writeRunRecord(path, measured)
    const text = await readFile(path, 'utf8')
    const lines = text.split('\n')
    expect(lines.slice(0, 2)).toEqual(['{', '  "schema": "servegate.run/v1",'])
    const open = lines.indexOf('  "requests": [')
    expect(open).toBeGreaterThan(0)
    const requests = lines.slice(open + 1, open + 1 + measured.requests.length)
    expect(requests.map((l) => l.replace(/,$/, ''))).toEqual(measured.requests.map((r) => requestLine(r)))
    expect(lines[open + 1 + measured.requests.length]).toBe('],')
    expect(text.endsWith('}\n')).toBe(true)
    expect(text).toBe(runRecordText(measured))
    expect(parseRunRecord(JSON.parse(text), path)).toEqual(measured)
    await writeRunRecord(join(dir, 'empty.json'), { ...measured, requests: [] })
    expect(await readFile(join(dir, 'empty.json'), 'utf8')).toMatch(/\n {2}"requests": \[\],\n/)
  })

  test('streams: the file grows while requests are still coming, and a failure leaves neither the file nor its temp file', async () => {
    const path = join(dir, 'streamed.json')
    const record = largeRecord(2, 1000, () => 10)
    const template = record.requests[0] as RequestRecord
    let sizeMidway = 0
    async function* requests(): AsyncGenerator<RequestRecord> {
      for (let index = 0; index < 4000; index++) {
        if (index === 3000) {
          const temp = (await readdir(dir)).find((f) => f.startsWith('streamed.json.') && f.endsWith('.tmp'))
          sizeMidway = temp === undefined ? 0 : (await stat(join(dir, temp))).size
        }
        yield { ...template, index }
      }
    }
    await writeRunRecord(path, record, requests())
    // 3000 requests of about 1.5 KB each: more than 1 MiB was already on disk before the last 1000 were made.
    expect(sizeMidway).toBeGreaterThan(1024 * 1024)
    expect((await readRunRecord(path)).requests).toHaveLength(4000)

    async function* failing(): AsyncGenerator<RequestRecord> {
      yield template
      throw new Error('the spill could not be read')
    }
    await expect(writeRunRecord(join(dir, 'failed.json'), record, failing())).rejects.toThrow('the spill could not be read')
    expect((await readdir(dir)).filter((f) => f.startsWith('failed.json'))).toEqual([])
  })

  test('scrubs secrets from every request, but never from the packed gaps, which a short secret’s base64 could match by chance', async () => {
    // Gaps of -49, 0 and -50 µs: deltas -49, 49, -50, zigzag 97, 98, 99, the bytes of "abc", base64 "YWJj",
    // which is also a base64 form of the secret "abcd" that scrubbing removes.
    const gaps = [-0.049, 0, -0.05]
    const request = { ...(measured.requests[0] as RequestRecord), itlMs: gaps, finishReason: 'stop abcd' }
    const path = join(dir, 'secret.json')
    registerSecret('abcd')
    try {
      await writeRunRecord(path, { ...measured, requests: [request] })
    } finally {
      clearSecrets()
    }
    const text = await readFile(path, 'utf8')
    expect(text).toContain('"base64":"YWJj"')
    expect(text).toContain('"finishReason":"stop [redacted]"')
    expect(text).not.toContain('abcd')
    expect((await readRunRecord(path)).requests[0]?.itlMs).toEqual(gaps)
    // The evidence's redaction (URLs, the host name) passes the packed gaps by too.
    const redacted = runRecordText({ ...measured, requests: [request] }, (t) => t.replaceAll('YWJj', '[redacted-host]'))
    expect(redacted).toContain('"base64":"YWJj"')
  })

  test('gaps that are not whole µs (a record an older servegate wrote) stay in itlMs: rewriting a record changes no figure', async () => {
    const old = { ...(measured.requests[0] as RequestRecord), itlMs: [10.0021999, 9.9] }
    const line = requestLine(old)
    expect(line).toContain('"itlMs":[10.0021999,9.9]')
    expect(line.endsWith(',"itlPacked":null}')).toBe(true)
    const path = join(dir, 'old.json')
    await writeRunRecord(path, { ...measured, requests: [old] })
    expect((await readRunRecord(path)).requests[0]?.itlMs).toEqual([10.0021999, 9.9])
  })
})

describe('writeCapacityRecord', () => {
  test("packs every probe's requests as a run record file does, and reads back equal", async () => {
    const search = CapacitySearch.parse({
      schema: 'servegate.capacity/v1',
      id: 'm-capacity-concurrency',
      axis: 'concurrency',
      slo: { ttftMs: 50 },
      requiredFraction: 0.9,
      confidence: 0.98,
      search: { start: 2, min: 1, max: 4, maxProbes: 4, resolution: 1.1, requestsPerProbe: 4, probeSeconds: null },
      probes: [],
      bracket: { low: null, high: null },
      status: 'unbracketed',
      summary: 'a test search',
      overloadTolerance: null,
      warnings: [],
      records: [measured, { ...measured, runId: 'second' }],
    })
    const path = join(dir, 'capacity.json')
    await writeCapacityRecord(path, search)
    const text = await readFile(path, 'utf8')
    expect(text.split('\n').filter((l) => l.startsWith('{"status":'))).toHaveLength(2 * measured.requests.length)
    expect(text).not.toMatch(/"itlMs":\s*\[/)
    expect(CapacitySearch.parse(JSON.parse(text))).toEqual(search)
    await writeCapacityRecord(join(dir, 'capacity-empty.json'), { ...search, records: [] })
    expect(CapacitySearch.parse(JSON.parse(await readFile(join(dir, 'capacity-empty.json'), 'utf8'))).records).toEqual([])
  })
})
