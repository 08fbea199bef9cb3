import { readFile } from 'node:fs/promises'
import { join } from 'node:path'
import { describe, expect, test } from 'vitest'
import { RunRecord } from '../schema/run.ts'
import { parseRunRecord, readRunRecord } from './record-io.ts'

/** A summary-only SGLang import as servegate 0.1.0 wrote it: `failed: 0` and a methodology note saying that 0 meant unknown. */
const V010 = join(import.meta.dirname, '../../fixtures/records/sglang-summary-only-0.1.0.json')

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
})
