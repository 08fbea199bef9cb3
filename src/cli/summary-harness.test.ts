/** The summary's harness line: batched reads are named when the reading thread paused, and only then. */
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, test } from 'vitest'
import { parseRunText } from '../record/record-io.ts'
import type { ReadBatching, RunRecord } from '../schema/run.ts'
import { renderSummary } from './summary.ts'

const IMPORTED: RunRecord = parseRunText(
  readFileSync(join(import.meta.dirname, '../../fixtures/import/aiperf-run/profile_export_aiperf.json'), 'utf8'),
  'profile_export_aiperf.json',
  { from: 'aiperf' },
)

function measured(readBatching?: ReadBatching): RunRecord {
  const harness = { ...IMPORTED.harness, clientCpuShare: 0.61, sendLagP99Ms: 2.5, eventLoopDelayP99Ms: 1.2, hostStealShare: null }
  return { ...IMPORTED, harness: readBatching === undefined ? harness : { ...harness, readBatching } }
}

const harnessLine = (record: RunRecord): string =>
  renderSummary(record)
    .split('\n')
    .find((l) => l.startsWith('harness ok')) ?? ''

describe('the harness line', () => {
  test('names the pauses, their time and the longest when the reading thread batched its reads', () => {
    const line = harnessLine(measured({ pauses: 3893, pausedMs: 776.51, longestPauseMs: 0.2412 }))
    expect(line).toMatch(/ · reads batched: 3893 pauses, 776\.5 ms, longest 0\.241 ms$/)
  })

  test('says nothing of batching when no pause was taken, or the record predates it', () => {
    expect(harnessLine(measured({ pauses: 0, pausedMs: 0, longestPauseMs: 0 }))).not.toContain('batched')
    expect(harnessLine(measured())).toMatch(/^harness ok · client CPU 0\.61 core · send lag p99 2\.50 ms · event-loop delay p99 1\.20 ms$/)
  })
})
