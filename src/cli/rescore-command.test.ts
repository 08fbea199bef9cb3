import { readFile, rename, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { describe, expect } from 'vitest'
import { okRequest } from '../../fixtures/gate-fixture.ts'
import { computeCellMetrics } from '../metrics/cell-metrics.ts'
import { failedCellRecord } from '../runner/run-record.ts'
import { RunRecord } from '../schema/run.ts'
import { parseDataset } from '../workload/dataset.ts'
import { rescoredPath, rescoreRecord } from './rescore-command.ts'
import { test as withFixtures } from '../../fixtures/test-context.ts'

/** Two rows judged `exact` against a reply that says more than the number, one `numeric`. */
const QA =
  '{"id":"a","prompt":"What is 16 + 28? Reply with the number only.","answer":"44","scorer":"exact"}\n' +
  '{"id":"b","prompt":"What is 45 + 67? Reply with the number only.","answer":"112","scorer":"exact"}\n' +
  '{"id":"c","prompt":"What is 2 + 2? Reply with the number only.","answer":4,"scorer":"numeric"}\n'

const test = withFixtures.extend('measured', ({ cli, simEngine, tmpDir }) => {
  /** A dataset run of the sim on `QA`, its record written to `name`. */
  return async (name: string): Promise<{ dataset: string; out: string; record: RunRecord }> => {
    const dataset = join(tmpDir, `${name}.jsonl`)
    await writeFile(dataset, QA)
    const out = join(tmpDir, `${name}.json`)
    const r = await cli([
      'run',
      '--base-url',
      simEngine.url,
      '--model',
      'm',
      '--dataset',
      dataset,
      '--requests',
      '3',
      '--max-tokens',
      '8',
      '--out',
      out,
    ])
    expect(r.stderr).toBe('')
    return { dataset, out, record: RunRecord.parse(JSON.parse(await readFile(out, 'utf8'))) }
  }
})
test.override('simOptions', { model: 'm', decodeTokPerS: 2000, prefillTokPerS: 200_000 })

describe('servegate rescore', () => {
  test('judges the kept replies again with another scorer: old vs new accuracy, a new file beside, the original untouched', async ({
    cli,
    measured,
  }) => {
    const { out, record } = await measured('exact')
    // The sim answers "44" and goes on talking: the exact scorer compares the whole reply.
    expect(record.requests.map((r) => r.score?.correct)).toEqual([false, false, true])
    expect(record.requests.map((r) => r.outputText)).toEqual([
      expect.stringMatching(/^ 44 /),
      expect.stringMatching(/^ 112 /),
      expect.stringMatching(/^ 4 /),
    ])
    const original = await readFile(out, 'utf8')

    const r = await cli(['rescore', out, '--scorer', 'numeric'])
    expect(r.stderr).toBe('')
    expect(r.code).toBe(0)
    const written = rescoredPath(out)
    expect(r.stdout).toMatch(
      new RegExp(
        `^${out.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')}: accuracy 1/3 = 33\\.3% \\[[^\\]]+\\] → 3/3 = 100\\.0% \\[[^\\]]+\\] \\(Wilson 95%\\); ` +
          `2 verdict\\(s\\) changed \\(2 now right, 0 now wrong\\); wrote ${written.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')}\n` +
          '  request 0: wrong → right \\(extracted 44, expected 44 ± 0\\)\n  request 1: wrong → right \\(extracted 112, expected 112 ± 0\\)\n$',
      ),
    )
    expect(await readFile(out, 'utf8')).toBe(original)
    const rescored = RunRecord.parse(JSON.parse(await readFile(written, 'utf8')))
    expect(rescored.requests.map((q) => q.score?.correct)).toEqual([true, true, true])
    expect(rescored.metrics.accuracy).toEqual(computeCellMetrics(rescored.requests, rescored.metrics.wallClockMs).accuracy)
    expect(rescored.metrics.accuracy).toMatchObject({ samples: 3, correct: 3, rate: 1 })
    expect(rescored.methodology.rescore).toMatch(
      /^scores recomputed from the kept replies by servegate rescore .*, the dataset measured\); accuracy was 1\/3 = 33\.3% \[/,
    )
    // Everything else is as measured.
    expect({ ...rescored, requests: null, metrics: null, methodology: null }).toEqual({
      ...record,
      requests: null,
      metrics: null,
      methodology: null,
    })
  })

  test('--write replaces the record in place; --json lists every change', async ({ cli, measured }) => {
    const { out } = await measured('in-place')
    const r = await cli(['rescore', out, '--scorer', 'numeric', '--write', '--json'])
    expect(r.code).toBe(0)
    const [row] = JSON.parse(r.stdout) as Array<Record<string, unknown>>
    expect(row).toMatchObject({
      file: out,
      out,
      datasetMatches: true,
      before: { samples: 3, correct: 1 },
      after: { samples: 3, correct: 3 },
      changed: [
        { index: 0, before: false, after: true, reason: 'extracted 44, expected 44 ± 0' },
        { index: 1, before: false, after: true, reason: 'extracted 112, expected 112 ± 0' },
      ],
      kept: 0,
    })
    expect(RunRecord.parse(JSON.parse(await readFile(out, 'utf8'))).metrics.accuracy?.correct).toBe(3)
  })

  test('a corrected reference answer, passed with --dataset: the change is judged and the other file is named', async ({
    cli,
    measured,
    tmpDir,
  }) => {
    const { out } = await measured('answers')
    const fixed = join(tmpDir, 'answers-fixed.jsonl')
    await writeFile(fixed, QA.replace('"answer":4,', '"answer":5,'))
    const r = await cli(['rescore', out, '--dataset', fixed])
    expect(r.code).toBe(0)
    expect(r.stdout).toContain('1 verdict(s) changed (0 now right, 1 now wrong)')
    expect(r.stdout).toContain('  request 2: right → wrong (extracted 4, expected 5 ± 0)')
    expect(r.stdout).toMatch(
      /\n {2}note: .*answers-fixed\.jsonl is not the file measured \(sha256 [0-9a-f]{12}…, measured [0-9a-f]{12}…\): rows are matched by position/,
    )
  })

  test('refusals name the file and the fix, and write nothing', async ({ cli, measured, tmpDir }) => {
    const { out, dataset, record } = await measured('refused')
    const short = join(tmpDir, 'short.jsonl')
    await writeFile(short, QA.split('\n').slice(0, 2).join('\n'))
    const rows = await cli(['rescore', out, '--dataset', short])
    expect(rows.code).toBe(1)
    expect(rows.stderr).toMatch(
      /short\.jsonl has 2 rows but .*refused\.json was measured on 3 .*; pass the dataset it was measured on with --dataset FILE\n$/,
    )

    // A record written before servegate kept the replies: it still parses, with nothing to rescore.
    const old = join(tmpDir, 'old.json')
    await writeFile(old, JSON.stringify({ ...record, requests: record.requests.map(({ outputText: _, ...rest }) => rest) }))
    expect(RunRecord.parse(JSON.parse(await readFile(old, 'utf8'))).requests.every((q) => q.outputText === null)).toBe(true)
    const none = await cli(['rescore', old])
    expect(none.code).toBe(1)
    expect(none.stderr).toMatch(
      /old\.json: none of its 3 scored replies kept its text \(outputText\), so there is nothing to judge again .*; rerun the cell\n$/,
    )

    expect((await cli(['rescore', out, '--scorer', 'fuzzy'])).stderr).toBe(
      'servegate: --scorer: "fuzzy" is not a scorer; pass one of exact, numeric, choice, regex\n',
    )
    expect((await cli(['rescore', out, '--scorer', 'regex'])).stderr).toMatch(/refused\.jsonl:1: --scorer regex needs field `pattern`/)
    expect((await cli(['rescore'])).code).toBe(2)

    await rename(dataset, `${dataset}.moved`)
    const moved = await cli(['rescore', out])
    expect(moved.stderr).toMatch(
      /refused\.json was measured on the dataset .*refused\.jsonl, which cannot be read from here .*; pass it with --dataset FILE\n$/,
    )
    await expect(readFile(rescoredPath(out))).rejects.toThrow(/ENOENT/)
  })
})

describe('rescoreRecord', () => {
  const rows = parseDataset(
    '{"id":"n","prompt":"How much?","answer":1024,"scorer":"numeric"}\n{"id":"x","prompt":"Which?","answer":"B","scorer":"choice"}\n',
    'qa.jsonl',
  )
  const record = (requests: RunRecord['requests']): RunRecord => {
    const base = failedCellRecord(
      { baseUrl: 'http://127.0.0.1:1', model: 'm', requests: requests.length },
      { code: 'INTERNAL', message: 'x', httpStatus: null, retryAfterS: null },
    )
    const workload = { ...base.plan.workload, kind: 'dataset' as const, dataset: { path: 'qa.jsonl', sha256: 'abc', rows: 2 } }
    return { ...base, cellFailure: null, requests, plan: { ...base.plan, workload }, metrics: computeCellMetrics(requests, 1000) }
  }
  const wrong = { correct: false, extracted: null, reason: 'an older scorer missed it' }

  test('a scorer fix: replies an older scorer judged wrong are judged by the current one, per row i mod rows', () => {
    const before = record([
      okRequest(0, { score: wrong, outputText: '**Final Answer:** 1,024' }),
      okRequest(1, { score: wrong, outputText: 'The correct option is (B).' }),
      okRequest(2, { score: { correct: true, extracted: '7', reason: 'old' }, outputText: 'It is 7.' }),
      // Cut at the capture bound: no text kept, the verdict stays.
      okRequest(3, { score: { correct: false, extracted: null, reason: 'the reply exceeded the capture bound' }, outputText: null }),
    ])
    const r = rescoreRecord(before, { path: 'qa.jsonl', sha256: 'abc', rows }, 'run.json')
    expect(r.changed).toEqual([
      { index: 0, before: false, after: true, reason: 'extracted 1024, expected 1024 ± 0' },
      { index: 1, before: false, after: true, reason: 'extracted B, expected B' },
      { index: 2, before: true, after: false, reason: 'extracted 7, expected 1024 ± 0' },
    ])
    expect(r.kept).toBe(1)
    expect(r.before).toMatchObject({ samples: 4, correct: 1 })
    expect(r.after).toMatchObject({ samples: 4, correct: 2, rate: 0.5 })
    expect(r.record.requests[3]).toBe(before.requests[3])
    expect(before.requests[0]?.score).toBe(wrong)
  })

  test('a record that is not a dataset run is refused', () => {
    const synthetic = failedCellRecord(
      { baseUrl: 'http://127.0.0.1:1', model: 'm', requests: 1 },
      { code: 'INTERNAL', message: 'x', httpStatus: null, retryAfterS: null },
    )
    expect(() => rescoreRecord(synthetic, { path: 'qa.jsonl', sha256: 'abc', rows }, 'run.json')).toThrow(
      /^run\.json: its workload is synthetic-summary, not a dataset, so it has no reference answers to judge against/,
    )
  })

  test('the rescored name sits beside the record', () => {
    expect(rescoredPath('runs/a.json')).toBe('runs/a.rescored.json')
    expect(rescoredPath('runs/a')).toBe('runs/a.rescored.json')
  })
})
