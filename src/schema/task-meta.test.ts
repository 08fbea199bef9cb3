import { fileURLToPath } from 'node:url'
import { beforeAll, expect, test } from 'vitest'
import { importRunFile } from '../record/record-io.ts'
import { SERVEGATE_VERSION } from '../version.ts'
import type { RunRecord } from './run.ts'
import { META_SCHEMA_ID, META_TAG, readFileMeta, readTestMeta } from './task-meta.ts'

let record: RunRecord

beforeAll(async () => {
  record = await importRunFile(fileURLToPath(new URL('../../fixtures/import/vllm-save-result.json', import.meta.url)), 'vllm')
})

/** A file meta as a blob carries it: through JSON, with one measured cell. */
function fileMeta(over: Record<string, unknown> = {}): Record<string, unknown> {
  const cell = { id: 'c', kind: 'cell', required: true, ladder: null, engines: { cell: 'e' }, status: 'measured', error: null }
  return JSON.parse(JSON.stringify({ ...META_TAG, cells: [{ ...cell, records: { cell: [record] } }], ...over })) as Record<string, unknown>
}

test('a meta this servegate wrote reads back through JSON, with the run records’ defaults filled in', () => {
  const raw = fileMeta() as { cells: Array<{ records: { cell: Array<Record<string, unknown>> } }> }
  delete raw.cells[0]?.records.cell[0]?.cellFailure
  const read = readFileMeta(raw)
  if (!read.ok) throw new Error(read.problem)
  expect(read.meta.schema).toBe(META_SCHEMA_ID)
  expect(read.meta.servegateVersion).toBe(SERVEGATE_VERSION)
  expect(read.meta.cells[0]?.records.cell?.[0]?.cellFailure).toBeNull()
  // A meta written before stored baselines reads with none.
  expect(readTestMeta({ ...META_TAG, decisions: [], checks: [] })).toEqual({
    ok: true,
    meta: { ...META_TAG, decisions: [], checks: [], storedBaselines: [] },
  })
})

test('a meta from another servegate is refused by the versions found and expected, with the fix', () => {
  const read = readFileMeta(fileMeta({ schema: 'servegate.meta/v9', servegateVersion: '9.9.9' }))
  expect(read).toMatchObject({ ok: false, reason: 'version' })
  if (read.ok) return
  expect(read.problem).toBe(
    `written by servegate 9.9.9 (servegate.meta/v9), but this reporter is servegate ${SERVEGATE_VERSION} (servegate.meta/v2): ` +
      `re-run every shard with servegate ${SERVEGATE_VERSION}, the version that merges them, then merge again`,
  )
  // The same format from another release is refused too: the evidence names one servegate version.
  expect(readTestMeta({ ...META_TAG, servegateVersion: '0.0.1', decisions: [], checks: [] })).toMatchObject({
    ok: false,
    problem: expect.stringMatching(/^written by servegate 0\.0\.1 \(servegate\.meta\/v2\), but this reporter/),
  })
  // Meta from before versioned meta has no tag at all.
  expect(readTestMeta({ decisions: [], checks: [] })).toMatchObject({
    ok: false,
    reason: 'version',
    problem: expect.stringMatching(/^written by a servegate that did not tag it with its version, but this reporter is servegate /),
  })
})

test('a malformed meta names the fields that are wrong', () => {
  const cells = (fileMeta().cells as Array<Record<string, unknown>>).map((c) => ({ ...c, status: 'ran', engines: { cell: 7 } }))
  expect(readFileMeta(fileMeta({ cells }))).toEqual({
    ok: false,
    reason: 'malformed',
    problem:
      'malformed at cells[0].engines.cell: Invalid input: expected string, received number; ' +
      'cells[0].status: Invalid option: expected one of "pending"|"measured"|"threw"',
  })
  expect(readTestMeta({ ...META_TAG, decisions: [{ cell: 'c' }] })).toMatchObject({
    ok: false,
    reason: 'malformed',
    problem: expect.stringMatching(/^malformed at decisions\[0\]\.decision: .*; decisions\[0\]\.judged: .*; and 4 more$/),
  })
})
