import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, beforeEach, describe, expect, test } from 'vitest'
import { sampleEvidence } from '../../fixtures/evidence-fixture.ts'
import { okRequest } from '../../fixtures/gate-fixture.ts'
import { EvidenceIndex, type GateEntry } from '../schema/evidence.ts'
import { HISTORY_SCHEMA_ID, type HistoryRun, type Testbed } from '../schema/noise.ts'
import type { RunRecord } from '../schema/run.ts'
import { boardFiles, renderBoard } from './board.ts'
import type { SpecFileInput } from './build.ts'
import { currentBranch, currentCommit, historyRunOf, historyTrends, notAppendedReason, recordHistory } from './history-of-main.ts'

const TESTBED: Testbed = {
  runner: null,
  gpu: { model: null, count: 0 },
  driver: null,
  engine: { kind: 'unknown', version: null },
  model: 'm',
  cell: { concurrency: 2, requests: 4, maxTokens: 16 },
}

/** A record of four requests around `decode` tok/s and 20 ms to first token: enough for testbedOf and historyFigure. */
function record(runId: string, decode: number): RunRecord {
  return {
    requests: [0.9, 1, 1.1, 1].map((k, i) => okRequest(i, { decodeTokPerS: decode * k, ttftMs: 20 * k })),
    runId,
    manifest: null,
    plan: { model: 'm', concurrency: 2, requests: 4, maxTokens: 16 },
  } as unknown as RunRecord
}

function gate(cell: string, metric: string, judged: GateEntry['judged']): GateEntry {
  return { cell, decision: { metric }, judged } as unknown as GateEntry
}

/** Two cells: an accepted pair (its baseline stored on one gate) and a failed single cell. */
function inputs(): { files: SpecFileInput[]; index: EvidenceIndex } {
  const records = { b: record('b', 100), c: record('c', 150), s: record('s', 10), f: record('f', 80) }
  const files = [
    {
      file: 'a.bench.ts',
      meta: {
        cells: [
          { id: 'pair', records: { baseline: [records.b], candidate: [records.c] } },
          { id: 'single', records: { cell: [records.f] } },
        ],
      },
    },
  ] as unknown as SpecFileInput[]
  const index = {
    ...sampleEvidence(),
    cells: [
      { id: 'pair', disposition: 'accepted' },
      { id: 'single', disposition: 'failed' },
    ],
    gates: [
      gate('pair', 'decodeTokPerS', { kind: 'pair', baseline: ['b'], candidate: ['c'], storedBaseline: null }),
      gate('pair', 'accuracy', { kind: 'pair', baseline: ['b'], candidate: ['c'], storedBaseline: null }),
      gate('pair', 'ttftMs p50', { kind: 'pair', baseline: ['s'], candidate: ['c'], storedBaseline: { file: 'main.json' } }),
      gate('single', 'decodeTokPerS', { kind: 'cell', records: ['f'] }),
    ],
  } as unknown as EvidenceIndex
  return { files, index }
}

function mainRun(commit: string, decode: number, testbed = TESTBED): HistoryRun {
  return {
    schema: HISTORY_SCHEMA_ID,
    commit,
    branch: 'main',
    at: '2026-12-01T10:00:00.000Z',
    cells: [{ cell: 'pair/candidate', testbed, metrics: { decodeTokPerS: { value: decode, relativeSe: 0.01 } } }],
  }
}

const CONTEXT = { runner: null, commit: 'abc', branch: 'main', at: '2026-12-02T10:00:00.000Z' }

describe('this run as a history run', () => {
  test('each accepted cell’s arm with its gated rate and latency figures; a stored baseline and a failed cell are left out', () => {
    const { files, index } = inputs()
    const run = historyRunOf(files, index, CONTEXT)
    expect(run.cells.map((c) => [c.cell, Object.keys(c.metrics)])).toEqual([
      ['pair/baseline', ['decodeTokPerS']],
      ['pair/candidate', ['decodeTokPerS', 'ttftMs p50']],
    ])
    expect(run.cells[1]?.metrics.decodeTokPerS?.value).toBeCloseTo(150 * 0.99 ** 0.25, 9)
    expect(run.cells[1]?.testbed).toEqual(TESTBED)
    expect(run).toMatchObject({ schema: 'servegate.history/v1', commit: 'abc', branch: 'main' })
  })

  test('appended only when complete, on the history’s branch, with a figure to keep', () => {
    const { files, index } = inputs()
    const run = historyRunOf(files, index, CONTEXT)
    expect(notAppendedReason(run, { partial: null }, 'main')).toBeNull()
    expect(notAppendedReason({ ...run, branch: 'feature' }, { partial: null }, 'main')).toBe('a run on feature, not main')
    expect(notAppendedReason({ ...run, branch: null }, { partial: null }, 'main')).toMatch(/^the branch is unknown \(no GITHUB_REF_NAME/)
    expect(notAppendedReason(run, { partial: { reasons: ['-t'], filesNotRun: [], cellsNotRun: [] } }, 'main')).toMatch(/^a partial run/)
    expect(notAppendedReason({ ...run, cells: [] }, { partial: null }, 'main')).toMatch(/^no accepted cell/)
  })
})

describe('the trend of main', () => {
  test('the last runs on the same testbed, oldest first, with 95% intervals, and this run’s point', () => {
    const { files, index } = inputs()
    const current = historyRunOf(files, index, CONTEXT)
    const other = { ...TESTBED, runner: 'another' }
    const runs = [mainRun('r0', 140), mainRun('x', 999, other), mainRun('r1', 145), mainRun('r2', 148)]
    const trends = historyTrends(runs, current, 2)
    expect(trends.map((t) => [t.cell, t.metric])).toEqual([['pair/candidate', 'decodeTokPerS']])
    const [t] = trends
    expect(t?.main.map((p) => p.commit)).toEqual(['r1', 'r2'])
    expect(t?.main[0]?.low).toBeCloseTo(145 * Math.exp(-1.96 * 0.01), 9)
    expect(t?.main[0]?.high).toBeCloseTo(145 * Math.exp(1.96 * 0.01), 9)
    const se = (historyRunOf(files, index, CONTEXT).cells[1]?.metrics.decodeTokPerS?.relativeSe ?? 0) * 1.96
    expect(se).toBeGreaterThan(0)
    expect(t?.current?.commit).toBe('abc')
    expect(t?.current?.low).toBeCloseTo((t?.current?.value ?? 0) * Math.exp(-se), 9)
  })
})

describe('branch and commit', () => {
  test('from the CI’s variables first, in order; else git, which names no branch outside a work tree', async () => {
    expect(await currentBranch({ GITHUB_REF_NAME: 'main', CI_COMMIT_BRANCH: 'x' }, '.')).toBe('main')
    expect(await currentBranch({ GITHUB_REF_NAME: '', CI_COMMIT_BRANCH: 'dev' }, '.')).toBe('dev')
    expect(await currentBranch({ BUILDKITE_BRANCH: 'bk' }, '.')).toBe('bk')
    const outside = await mkdtemp(join(tmpdir(), 'servegate-no-git-'))
    try {
      expect(await currentBranch({ GIT_CEILING_DIRECTORIES: tmpdir() }, outside)).toBeNull()
    } finally {
      await rm(outside, { recursive: true, force: true })
    }
    expect(currentCommit({ GITHUB_SHA: 'deadbeef' }, 'suite')).toBe('deadbeef')
    expect(currentCommit({}, 'suite')).toBe('suite')
  })
})

describe('recording the history', () => {
  let dir = ''
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'servegate-history-'))
  })
  afterEach(async () => {
    await rm(dir, { recursive: true, force: true })
  })

  test('a run on main is appended and the index says so; the field is the schema’s', async () => {
    const path = join(dir, 'main.jsonl')
    const { files, index } = inputs()
    const noise = { history: path, historyBranch: 'main', runner: 'ci' }
    const history = await recordHistory({ noise, files, index, branch: 'main', commit: 'abc' })
    expect(Object.keys(history)).toEqual(['path', 'branch', 'appended', 'reason', 'trend'])
    expect(history).toMatchObject({ path, branch: 'main', appended: true, reason: null })
    // Appended first, so the trend holds this run as main's latest.
    expect(history.trend.map((t) => [t.cell, t.metric, t.main.length])).toEqual([
      ['pair/baseline', 'decodeTokPerS', 1],
      ['pair/candidate', 'decodeTokPerS', 1],
      ['pair/candidate', 'ttftMs p50', 1],
    ])
    const line = JSON.parse(await readFile(path, 'utf8')) as HistoryRun
    expect(line.cells[0]?.testbed.runner).toBe('ci')
    expect(EvidenceIndex.parse({ ...sampleEvidence(), history }).history).toEqual(history)
    expect(EvidenceIndex.parse(sampleEvidence()).history).toBeNull()
  })

  test('a history that cannot be read is neither appended to nor drawn; the reason names the file and line', async () => {
    const path = join(dir, 'main.jsonl')
    await writeFile(path, '{"schema":"servegate.history/v1"}\n')
    const { files, index } = inputs()
    const history = await recordHistory({ noise: { history: path, historyBranch: 'main' }, files, index, branch: 'main', commit: null })
    expect(history.appended).toBe(false)
    expect(history.reason).toContain(`${path}:1 is not a servegate.history/v1 run`)
    expect(await readFile(path, 'utf8')).toBe('{"schema":"servegate.history/v1"}\n')
  })

  test('a history that cannot be written costs the run nothing but the line; the reason says why', async () => {
    // A file where its folder should be: there is no history to read, and none can be written.
    await writeFile(join(dir, 'cache'), '')
    const path = join(dir, 'cache', 'main.jsonl')
    const { files, index } = inputs()
    const history = await recordHistory({ noise: { history: path, historyBranch: 'main' }, files, index, branch: 'main', commit: null })
    expect(history).toMatchObject({ appended: false, reason: expect.stringMatching(/^cannot append to .*main\.jsonl: /) })
  })

  test('the board says whether the run was appended, and has no trend section without a history', async () => {
    const index = sampleEvidence()
    expect(renderBoard(index, boardFiles(index))).not.toContain('Trend of main')
    const history = { path: 'h.jsonl', branch: 'pr', appended: false, reason: 'a run on pr, not main', trend: [] }
    const board = renderBoard({ ...index, history }, boardFiles(index))
    expect(board).toContain('## Trend of main')
    expect(board).toContain('This run was not appended to the history of main (h.jsonl): a run on pr, not main.')
    expect(board).toContain('No run of main measured these cells on this testbed yet.')
  })
})
