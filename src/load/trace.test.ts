import { writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { describe, expect } from 'vitest'
import { test } from '../../fixtures/test-context.ts'
import { planArrivals } from './plan.ts'
import { parseTrace } from './trace.ts'

const MOONCAKE = [
  '{"timestamp": 27482, "input_length": 6955, "output_length": 52, "hash_ids": [46, 47, 48]}',
  '{"timestamp": 30535, "input_length": 6472, "output_length": 26, "hash_ids": [46, 47, 49]}',
  '',
  '{"timestamp": 30535, "input_length": 120, "output_length": 8, "hash_ids": [1]}',
].join('\n')

describe('parseTrace', () => {
  test("reads Mooncake's shape: offsets from the first row, lengths, other fields ignored", () => {
    expect(parseTrace(MOONCAKE, 't.jsonl')).toEqual([
      { line: 1, offsetMs: 0, promptTokens: 6955, outputTokens: 52 },
      { line: 2, offsetMs: 3053, promptTokens: 6472, outputTokens: 26 },
      { line: 4, offsetMs: 3053, promptTokens: 120, outputTokens: 8 },
    ])
  })

  test("and servegate's own spelling", () => {
    expect(parseTrace('{"offsetMs": 5, "promptTokens": 64, "outputTokens": 4}', 't')).toEqual([
      { line: 1, offsetMs: 0, promptTokens: 64, outputTokens: 4 },
    ])
  })

  test.each([
    [
      '{"timestamp": 0, "input_length": 10}',
      /^t\.jsonl:1: missing field `output_length` \(or `outputTokens`\); write one object per line, e\.g\. /,
    ],
    ['{"timestamp": 0, "input_length": 10.5, "output_length": 3}', /^t\.jsonl:1: field `input_length` is 10\.5; set it to an integer ≥ 1$/],
    [
      '{"timestamp": 5, "input_length": 10, "output_length": 3}\n{"timestamp": 4, "input_length": 10, "output_length": 3}',
      /^t\.jsonl:2: time 4 ms is before the previous row's 5 ms; sort the trace by arrival time$/,
    ],
    [
      '{"timestamp": 0, "offsetMs": 0, "input_length": 1, "output_length": 1}',
      /^t\.jsonl:1: both `offsetMs` and `timestamp` are set; keep one$/,
    ],
    ['[1, 2]', /^t\.jsonl:1: not a JSON object/],
    ['{"timestamp": 0,', /^t\.jsonl:1: not valid JSON/],
    ['\n\n', /^t\.jsonl: no requests/],
  ])('%j is refused naming the line, the field and the fix', (text, message) => {
    expect(() => parseTrace(text, 't.jsonl')).toThrow(message)
  })
})

describe('planArrivals for a trace', () => {
  let path = ''
  test.beforeAll(async ({ tmpDir }) => {
    path = join(tmpDir, 'trace.jsonl')
    await writeFile(path, MOONCAKE)
  })

  test('replays the first rows, scaled in time, with their sizes; the plan names the file and its hash', async () => {
    const s = await planArrivals({ kind: 'trace', path, timeScale: 0.5, maxInFlight: null }, 2)
    expect(s.offsetsMs).toEqual([0, 1526.5])
    expect(s.sizes).toEqual([
      { promptTokens: 6955, maxTokens: 52 },
      { promptTokens: 6472, maxTokens: 26 },
    ])
    expect(s.plan).toMatchObject({ kind: 'trace', ratePerS: null, trace: { path, rows: 3, replayed: 2, timeScale: 0.5 } })
    expect(s.plan.trace?.sha256).toMatch(/^[0-9a-f]{64}$/)
  })

  test('more requests than rows is a config error naming the fix', async ({ tmpDir }) => {
    await expect(planArrivals({ kind: 'trace', path, timeScale: 1, maxInFlight: null }, 5)).rejects.toThrow(
      /^requests: 5 but the trace .* has 3 rows; pass requests ≤ 3/,
    )
    await expect(
      planArrivals({ kind: 'trace', path: join(tmpDir, 'missing.jsonl'), timeScale: 1, maxInFlight: null }, 1),
    ).rejects.toMatchObject({ code: 'FILE_INVALID' })
  })
})
