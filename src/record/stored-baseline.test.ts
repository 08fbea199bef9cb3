import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { failedCellRecord } from '../runner/run-record.ts'
import { driftCoverText, isStoredBaseline, startGap, storedBaseline, storedBaselineWarning } from './stored-baseline.ts'

let dir: string
const record = {
  ...failedCellRecord(
    { baseUrl: 'http://127.0.0.1:1', model: 'm', requests: 4 },
    { code: 'INTERNAL', message: 'x', httpStatus: null, retryAfterS: null },
  ),
  runId: 'run-main',
  startedAt: '2026-11-30T10:00:00.000Z',
}

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'servegate-stored-'))
  await writeFile(join(dir, 'main.json'), JSON.stringify(record))
})
afterAll(() => rm(dir, { recursive: true, force: true }))

describe('storedBaseline', () => {
  test('reads a run record as a baseline arm, keeping the file it came from', async () => {
    const stored = await storedBaseline(join(dir, 'main.json'))
    expect(stored).toMatchObject({ kind: 'stored-baseline', file: join(dir, 'main.json'), record: { runId: 'run-main' } })
    expect(isStoredBaseline(stored)).toBe(true)
    expect(isStoredBaseline({ kind: 'stored-baseline', file: 'x' })).toBe(false)
  })

  test('a missing file or a wrong path is an error naming it', async () => {
    await expect(storedBaseline(join(dir, 'nope.json'))).rejects.toThrow(
      /cannot read .*nope\.json \(no such file\); pass the path of a run record/,
    )
    await expect(storedBaseline('' as string)).rejects.toThrow(/^storedBaseline: pass the path of a run record JSON file/)
  })
})

test('startGap says how long before (or after) the candidate the baseline started', () => {
  expect(startGap('2026-11-30T10:00:00Z', '2026-12-01T13:00:00Z')).toBe('1.1 days before the candidate')
  expect(startGap('2026-12-01T10:00:00Z', '2026-12-01T13:30:00Z')).toBe('3.5 h before the candidate')
  expect(startGap('2026-12-01T10:00:00Z', '2026-12-01T10:07:00Z')).toBe('7 min before the candidate')
  expect(startGap('2026-12-01T10:00:00Z', '2026-12-01T10:00:12Z')).toBe('12 s before the candidate')
  expect(startGap('2026-12-01T12:00:00Z', '2026-12-01T10:00:00Z')).toBe('2.0 h after the candidate')
  expect(startGap(null, '2026-12-01T10:00:00Z')).toBeNull()
})

test('the warning names the file, run and start, and the floor that covers the drift (none for a gate without one)', async () => {
  const stored = await storedBaseline(join(dir, 'main.json'))
  const candidate = { ...record, runId: 'run-pr', startedAt: '2026-12-01T10:00:00.000Z' }
  expect(storedBaselineWarning(stored, candidate, 0.02)).toBe(
    `the baseline was not measured in this run: it is the stored record ${join(dir, 'main.json')} ` +
      '(run-main, started 2026-11-30T10:00:00.000Z, 1.0 days before the candidate). A stored baseline cannot be ' +
      'interleaved A B B A with the candidate, so only the launch-noise floor (2% per launch) covers drift between the two launches',
  )
  expect(storedBaselineWarning(stored, candidate, null)).toMatch(/before the candidate\)$/)
  expect(driftCoverText(0)).toBe('nothing covers drift between the two launches (the launch-noise floor is 0)')
})
