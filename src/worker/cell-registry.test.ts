import { expect, test } from 'vitest'
import { failedCellRecord } from '../runner/run-record.ts'
import { cellMeasured, cellThrew, declareCell, joinLadder, searchMeasured, takeFileMeta } from './cell-registry.ts'

const record = (requests: number) =>
  failedCellRecord(
    { baseUrl: 'http://127.0.0.1:1', model: 'm', requests },
    { code: 'INTERNAL', message: 'x', httpStatus: null, retryAfterS: null },
  )
const base = { kind: 'cell' as const, required: true, ladder: null, engines: { cell: 'e' } }

test('the file meta keeps declaration order: sweep rungs on their ladder, a capacity search replaced by its probes in place', () => {
  declareCell({ ...base, id: 'first' })
  declareCell({ ...base, id: 'sweep-r1.0' })
  joinLadder('sweep-r1.0', 'sweep')
  declareCell({ ...base, id: 'search', ladder: 'search' })
  declareCell({ ...base, id: 'last' })
  cellMeasured('first', { cell: [record(1)] })
  cellThrew('last', new Error('boom'))
  searchMeasured('search', [
    { suffix: 'probe1', record: record(2) },
    { suffix: 'probe2', record: record(3) },
  ])
  const meta = takeFileMeta()
  expect(meta.cells.map((c) => [c.id, c.ladder, c.status])).toEqual([
    ['first', null, 'measured'],
    ['sweep-r1.0', 'sweep', 'pending'],
    ['search-probe1', 'search', 'measured'],
    ['search-probe2', 'search', 'measured'],
    ['last', null, 'threw'],
  ])
  expect(meta.cells[3]?.records.cell?.[0]?.plan.requests).toBe(3)
  expect(meta.cells[4]?.error).toBe('boom')
  expect(takeFileMeta().cells).toEqual([])
  declareCell({ ...base, id: 'again' })
  expect(() => declareCell({ ...base, id: 'again' })).toThrow(/the cell id "again" is declared twice in this file/)
  takeFileMeta()
})
