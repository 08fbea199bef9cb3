import { writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { describe, expect } from 'vitest'
import { test } from '../../fixtures/test-context.ts'
import { fileURLToPath } from 'node:url'
import { describeArrival } from './arrival.ts'
import { ArrivalSpec, type ResolvedArrivalSpec } from './arrival-spec.ts'
import { planArrivals } from './plan.ts'
import { parseTrace, traceReuseShare } from './trace.ts'

const MOONCAKE = [
  '{"timestamp": 27482, "input_length": 6955, "output_length": 52, "hash_ids": [46, 47, 48]}',
  '{"timestamp": 30535, "input_length": 6472, "output_length": 26, "hash_ids": [46, 47, 49]}',
  '',
  '{"timestamp": 30535, "input_length": 120, "output_length": 8, "hash_ids": [1]}',
].join('\n')

describe('parseTrace', () => {
  test("reads Mooncake's shape: offsets from the first row, lengths, other fields ignored", () => {
    const none = { sessionId: null, delayMs: null, after: null, turn: null }
    expect(parseTrace(MOONCAKE, 't.jsonl')).toEqual([
      { line: 1, offsetMs: 0, promptTokens: 6955, outputTokens: 52, hashIds: [46, 47, 48], ...none },
      { line: 2, offsetMs: 3053, promptTokens: 6472, outputTokens: 26, hashIds: [46, 47, 49], ...none },
      { line: 4, offsetMs: 3053, promptTokens: 120, outputTokens: 8, hashIds: [1], ...none },
    ])
  })

  test("and servegate's own spelling", () => {
    expect(parseTrace('{"offsetMs": 5, "promptTokens": 64, "outputTokens": 4}', 't')).toEqual([
      { line: 1, offsetMs: 0, promptTokens: 64, outputTokens: 4, hashIds: null, sessionId: null, delayMs: null, after: null, turn: null },
    ])
  })

  test("keeps AIPerf's session_id and delay (ms) for session chaining", () => {
    const rows = parseTrace(
      [
        '{"session_id": "conv_0", "timestamp": 0, "input_length": 90, "output_length": 4, "hash_ids": [1]}',
        '{"session_id": "conv_0", "timestamp": 0, "delay": 2500.5, "input_length": 120, "output_length": 4, "hash_ids": [1]}',
      ].join('\n'),
      't',
    )
    expect(rows.map((r) => [r.sessionId, r.delayMs])).toEqual([
      ['conv_0', null],
      ['conv_0', 2500.5],
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
    [
      '{"timestamp": 0, "input_length": 10, "output_length": 3, "hash_ids": [1, 2.5]}',
      /^t\.jsonl:1: field `hash_ids` item 1 is 2\.5; hash ids are integers, e\.g\. \[46, 47\]$/,
    ],
    [
      '{"timestamp": 0, "input_length": 10, "output_length": 3, "hash_ids": "46,47"}',
      /^t\.jsonl:1: field `hash_ids` is "46,47"; set it to a list of integers, e\.g\. \[46, 47\]$/,
    ],
    [
      '{"timestamp": 0, "input_length": 10, "output_length": 3}\n{"timestamp": 1, "input_length": 10, "output_length": 3, "session_id": 7}',
      /^t\.jsonl:2: field `session_id` is 7; set it to a non-empty string$/,
    ],
    ['{"timestamp": 0, "input_length": 10, "output_length": 3, "delay": -1}', /^t\.jsonl:1: field `delay` is -1; set it to a number ≥ 0$/],
    ['[1, 2]', /^t\.jsonl:1: not a JSON object/],
    ['{"timestamp": 0,', /^t\.jsonl:1: not valid JSON/],
    ['\n\n', /^t\.jsonl: no requests/],
  ])('%j is refused naming the line, the field and the fix', (text, message) => {
    expect(() => parseTrace(text, 't.jsonl')).toThrow(message)
  })
})

describe('traceReuseShare', () => {
  const row = (promptTokens: number, hashIds: number[] | null) => ({ promptTokens, hashIds })

  test("is blockTokens × each row's leading run of ids seen before, capped at its length, over all prompt tokens", () => {
    const rows = [
      row(1100, [1, 2, 3]), // nothing seen yet
      row(1300, [1, 2, 4]), // 1, 2 seen: 1024
      row(600, [9, 1, 2]), // 9 is new: the run ends at once, whatever follows
      row(700, [1, 2, 3]), // all seen: 1536, capped at 700
      row(400, null), // no ids: shares nothing, counts in the total
    ]
    expect(traceReuseShare(rows, 512)).toBeCloseTo((1024 + 700) / (1100 + 1300 + 600 + 700 + 400), 12)
    // A smaller block makes the same run shorter in tokens.
    expect(traceReuseShare(rows, 100)).toBeCloseTo((200 + 300) / 4100, 12)
  })

  test('ids repeated within one row are not reuse; a trace without hash_ids has none (null)', () => {
    expect(traceReuseShare([row(1024, [5, 5])], 512)).toBe(0)
    expect(traceReuseShare([row(64, null), row(64, null)], 512)).toBeNull()
  })
})

describe('planArrivals for a trace', () => {
  let path = ''
  test.beforeAll(async ({ tmpDir }) => {
    path = join(tmpDir, 'trace.jsonl')
    await writeFile(path, MOONCAKE)
  })

  test('replays the first rows, scaled in time, with their sizes; the plan names the file and its hash', async () => {
    const s = await planArrivals({ kind: 'trace', path, timeScale: 0.5, blockTokens: 512, maxInFlight: null }, 2)
    expect(s.offsetsMs).toEqual([0, 1526.5])
    expect(s.sizes).toEqual([
      { promptTokens: 6955, maxTokens: 52, hashIds: [46, 47, 48] },
      { promptTokens: 6472, maxTokens: 26, hashIds: [46, 47, 49] },
    ])
    expect(s.blockTokens).toBe(512)
    // Row 2 reuses blocks 46 and 47 of row 1: 1024 of 6955 + 6472 tokens; rows past `requests` do not count.
    expect(s.plan).toMatchObject({
      kind: 'trace',
      ratePerS: null,
      trace: { path, rows: 3, replayed: 2, timeScale: 0.5, blockTokens: 512 },
      reuseShare: 1024 / (6955 + 6472),
    })
    expect(s.plan.trace?.sha256).toMatch(/^[0-9a-f]{64}$/)
    expect(describeArrival(s.plan)).toBe('trace replay (time ×0.5), reuse share 7.6% (512-token blocks)')
  })

  test('a trace without hash_ids plans no blocks and no reuse share', async ({ tmpDir }) => {
    const plain = join(tmpDir, 'plain.jsonl')
    await writeFile(
      plain,
      '{"timestamp": 0, "input_length": 64, "output_length": 4}\n{"timestamp": 9, "input_length": 64, "output_length": 4}',
    )
    const s = await planArrivals({ kind: 'trace', path: plain, timeScale: 1, blockTokens: 512, maxInFlight: null }, 2)
    expect(s.blockTokens).toBeNull()
    expect(s.plan.reuseShare).toBeNull()
    expect(describeArrival(s.plan)).toBe('trace replay')
  })

  test('the Mooncake-shaped fixture reuses 65.2% of its prompt tokens in 512-token blocks', async () => {
    const fixture = fileURLToPath(new URL('../../fixtures/traces/mooncake-blocks.jsonl', import.meta.url))
    const s = await planArrivals(ArrivalSpec.parse({ kind: 'trace', path: fixture }) as ResolvedArrivalSpec, 24)
    expect(s.plan.reuseShare).toBeCloseTo(0.6523, 4)
    expect(s.sizes?.every((r) => r.hashIds?.length === Math.ceil(r.promptTokens / 512))).toBe(true)
  })

  test('more requests than rows is a config error naming the fix', async ({ tmpDir }) => {
    await expect(planArrivals({ kind: 'trace', path, timeScale: 1, blockTokens: 512, maxInFlight: null }, 5)).rejects.toThrow(
      /^requests: 5 but the trace .* has 3 rows; pass requests ≤ 3/,
    )
    await expect(
      planArrivals({ kind: 'trace', path: join(tmpDir, 'missing.jsonl'), timeScale: 1, blockTokens: 512, maxInFlight: null }, 1),
    ).rejects.toMatchObject({ code: 'FILE_INVALID' })
  })
})
