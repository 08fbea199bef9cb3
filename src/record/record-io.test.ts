import { readFile } from 'node:fs/promises'
import { join } from 'node:path'
import { describe, expect, test } from 'vitest'
import { RunRecord } from '../schema/run.ts'
import { parseRunRecord, readRunRecord } from './record-io.ts'

/** A summary-only SGLang import as servegate 0.1.0 wrote it: `failed: 0` and a methodology note saying that 0 meant unknown. */
const V010 = join(import.meta.dirname, '../../fixtures/records/sglang-summary-only-0.1.0.json')
/**
 * A summary-only AIPerf import as servegate 0.1.0 wrote it (its `servegate import`, commit
 * 18032c6) from fixtures/import/aiperf-run/profile_export_aiperf.json without `total_isl`,
 * `total_osl` and `benchmark_duration`: both token totals and the wall clock written as 0.
 */
const V010_NO_TOTALS = join(import.meta.dirname, '../../fixtures/records/aiperf-summary-only-0.1.0.json')

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- a stored record is read as loose JSON, as an older version wrote it
const readRaw = async (path: string): Promise<Record<string, any>> => JSON.parse(await readFile(path, 'utf8'))

describe('reading a record an older servegate wrote', () => {
  test('0.1.0\'s unknown failed count (0 beside a note starting "unknown") reads as null, the note corrected', async () => {
    const raw = JSON.parse(await readFile(V010, 'utf8')) as Record<string, unknown>
    expect([raw.servegateVersion, raw.failed]).toEqual(['0.1.0', 0])
    const record = await readRunRecord(V010)
    expect(record.failed).toBeNull()
    expect(record.completed).toBe(raw.completed)
    expect(record.methodology.failedCount).toBe(
      'unknown: SGLang lines without --output-details record no failed count (completed counts only the successes); ' +
        'failed is null (a 0.1.0 record wrote 0)',
    )
    // Only the failed count and its note change; the record is otherwise read as written.
    const { failed: _f, methodology: _m, ...rest } = raw
    const { failed: _g, methodology: _n, ...read } = record
    expect(read).toEqual(RunRecord.omit({ failed: true, methodology: true }).parse(rest))
  })

  test('a failed count of 0 without that note stays 0: a run that had no failures', async () => {
    const raw = JSON.parse(await readFile(V010, 'utf8')) as { methodology: Record<string, string> }
    const { failedCount: _flag, ...methodology } = raw.methodology
    expect(parseRunRecord({ ...raw, methodology }, 'x.json').failed).toBe(0)
    expect(parseRunRecord({ ...raw, methodology: { ...methodology, failedCount: "vLLM's failed count (0)" } }, 'x.json').failed).toBe(0)
  })

  test("0.1.0's 0 for totals and a duration its source never recorded reads as null, and the methodology says so", async () => {
    const raw = await readRaw(V010_NO_TOTALS)
    expect(raw.servegateVersion).toBe('0.1.0')
    expect([raw.metrics.totalPromptTokens, raw.metrics.totalCompletionTokens, raw.metrics.wallClockMs]).toEqual([0, 0, 0])
    const record = await readRunRecord(V010_NO_TOTALS)
    expect([record.metrics.totalPromptTokens, record.metrics.totalCompletionTokens, record.metrics.wallClockMs]).toEqual([null, null, null])
    expect(record.methodology.unrecorded).toBe(
      'not recorded by the source, so null: totalPromptTokens, totalCompletionTokens, wallClockMs (a 0.1.0 record wrote 0)',
    )
    // AIPerf's own throughput over its duration is kept: only the figures written as 0 change.
    expect(record.metrics.outputThroughputTokPerS).toBe(raw.metrics.outputThroughputTokPerS)
    const { metrics: m, methodology: _m, ...rest } = raw
    const { metrics: n, methodology: _n, ...read } = record
    expect(read).toEqual(RunRecord.omit({ metrics: true, methodology: true }).parse(rest))
    expect({ ...n, totalPromptTokens: 0, totalCompletionTokens: 0, wallClockMs: 0 }).toEqual(RunRecord.shape.metrics.parse(m))
  })

  test('a 0 the record itself does not contradict stays 0: a known zero total, a record servegate measured', async () => {
    const raw = await readRaw(V010_NO_TOTALS)
    const d = raw.metrics.distributions
    // A summary whose mean completion tokens is 0 agrees with a total of 0; the prompt tokens' mean of 511.5 does not.
    const zeroOutput = {
      ...raw,
      metrics: { ...raw.metrics, distributions: { ...d, completionTokens: { ...d.completionTokens, mean: 0 } } },
    }
    expect(parseRunRecord(zeroOutput, 'x.json').metrics).toMatchObject({ totalPromptTokens: null, totalCompletionTokens: 0 })
    // Per request, 0.1.0 summed the requests' own counts: its totals are never the unknown.
    const perRequest = { ...raw, importedFrom: { ...raw.importedFrom, perRequest: true } }
    expect(parseRunRecord(perRequest, 'x.json').metrics).toMatchObject({
      totalPromptTokens: 0,
      totalCompletionTokens: 0,
      wallClockMs: null,
    })
    // A record servegate measured, and an import of no completed request, keep every 0.
    for (const kept of [
      { ...raw, importedFrom: null },
      { ...raw, completed: 0 },
    ]) {
      expect(parseRunRecord(kept, 'x.json').metrics).toMatchObject({ totalPromptTokens: 0, totalCompletionTokens: 0, wallClockMs: 0 })
      expect(parseRunRecord(kept, 'x.json').methodology.unrecorded).toBeUndefined()
    }
  })
})
