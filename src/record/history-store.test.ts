import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, beforeEach, describe, expect, test } from 'vitest'
import { HISTORY_SCHEMA_ID, type HistoryRun } from '../schema/noise.ts'
import { appendHistory, historyCellKey, historyFor, readHistory } from './history-store.ts'

const TESTBED = {
  runner: 'ci',
  gpu: { model: null, count: 0 },
  driver: null,
  engine: { kind: 'sim', version: null },
  model: 'm',
  cell: { concurrency: 1, requests: 24, maxTokens: 24 },
}

function run(commit: string, decode: number): HistoryRun {
  return {
    schema: HISTORY_SCHEMA_ID,
    commit,
    branch: 'main',
    at: '2026-12-01T10:00:00.000Z',
    cells: [{ cell: 'c', testbed: TESTBED, metrics: { decodeTokPerS: { value: decode, relativeSe: 0.01 } } }],
  }
}

let dir = ''
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'servegate-history-store-'))
})
afterEach(async () => {
  await rm(dir, { recursive: true, force: true })
})

describe('the history store', () => {
  test('a missing file is an empty history; appends create it, its folder, and one line a run', async () => {
    const path = join(dir, 'cache', 'main.jsonl')
    expect(await readHistory(path)).toEqual([])
    await appendHistory(path, run('a', 100))
    await appendHistory(path, run('b', 104))
    expect((await readHistory(path)).map((r) => [r.commit, r.cells[0]?.metrics.decodeTokPerS?.value])).toEqual([
      ['a', 100],
      ['b', 104],
    ])
    const lines = (await readFile(path, 'utf8')).split('\n')
    expect(lines).toHaveLength(3)
    expect(lines[2]).toBe('')
  })

  test('a line that is not a history run is an error naming the file, the line and the field', async () => {
    const path = join(dir, 'main.jsonl')
    await writeFile(path, `${JSON.stringify(run('a', 100))}\n\n{"schema":"servegate.history/v1","commit":null}\n`)
    await expect(readHistory(path)).rejects.toMatchObject({
      code: 'FILE_INVALID',
      message: expect.stringMatching(/main\.jsonl:3 is not a servegate\.history\/v1 run: .*branch/),
    })
    await writeFile(path, 'not json\n')
    await expect(readHistory(path)).rejects.toMatchObject({
      code: 'FILE_INVALID',
      message: expect.stringContaining('main.jsonl:1 is not a JSON line'),
    })
  })

  test('a run that breaks the schema never reaches the file', async () => {
    const path = join(dir, 'main.jsonl')
    await expect(appendHistory(path, { ...run('a', 100), at: 'yesterday' })).rejects.toThrow()
    expect(await readHistory(path)).toEqual([])
  })

  test('historyFor reads once per process, and again after this process appends', async () => {
    const path = join(dir, 'main.jsonl')
    await appendHistory(path, run('a', 100))
    const first = historyFor(path)
    expect(historyFor(path)).toBe(first)
    expect(await first).toHaveLength(1)
    // Written by another process: the cached read does not see it.
    await writeFile(path, `${JSON.stringify(run('a', 100))}\n${JSON.stringify(run('b', 100))}\n`)
    expect(await historyFor(path)).toHaveLength(1)
    await appendHistory(path, run('c', 100))
    expect((await historyFor(path)).map((r) => r.commit)).toEqual(['a', 'b', 'c'])
  })

  test('a pair’s arms are named apart; a single-arm cell by its id', () => {
    expect(historyCellKey('decode-c8', 'cell')).toBe('decode-c8')
    expect(historyCellKey('decode-c8', 'baseline')).toBe('decode-c8/baseline')
    expect(historyCellKey('decode-c8', 'candidate')).toBe('decode-c8/candidate')
  })
})
