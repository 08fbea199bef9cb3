/**
 * Declarations check their options when they are declared: a typo or a bad value fails at once,
 * naming the field and the fix, and no engine is launched for it.
 */
import { existsSync, mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { fileURLToPath } from 'node:url'
import { describe, expect, test } from 'vitest'
import type { CellSpec } from './cell-declarations.ts'
import { capacity } from './capacity-declaration.ts'
import { cell, pair } from './cell-declarations.ts'
import { engine } from './engine-handles.ts'
import { ServegateError } from '../errors.ts'
import { declaredCell } from '../worker/cell-registry.ts'
import { sweep } from './sweep-declaration.ts'

const FAKES = fileURLToPath(new URL('../../fixtures/fakes/', import.meta.url))
const dir = mkdtempSync(join(tmpdir(), 'servegate-declare-'))
const pids = join(dir, 'pids.txt')
// Writes its pid to `pids` the moment it is launched.
const fake = engine.vllm({ executable: join(FAKES, 'vllm'), model: { id: 'fake/m' }, env: { FAKE_ENGINE_PIDFILE: pids }, logDir: dir })

/** The spec as a user might mistype it, past the type checker (a JavaScript spec, or a cast). */
const untyped = (spec: object): CellSpec => spec as CellSpec

describe('options are resolved when a cell is declared', () => {
  test('a mistyped option is refused at once, with the option it most likely meant; nothing launches', async () => {
    expect(() => cell(untyped({ engine: fake, id: 'typo', concurency: 4, requests: 8 }))).toThrow(
      /invalid cell "typo" options: cell "typo"\.concurency: not an option of a cell; did you mean `concurrency`\?/,
    )
    expect(declaredCell('typo')).toBeUndefined()
    await sleep(300)
    expect(existsSync(pids)).toBe(false)
  })

  test('a bad value names its field, on cells, pairs, sweeps and capacity searches', () => {
    expect(() => cell({ engine: fake, requests: 0 })).toThrow(/invalid cell options: cell\.requests: .*>=1/)
    expect(() => pair({ baseline: fake, candidate: fake, id: 'p', workload: { promptTokens: -5 } })).toThrow(
      /pair "p"\.workload\.promptTokens/,
    )
    expect(() => pair({ baseline: fake, candidate: fake, repeats: 0 })).toThrow(/pair\.repeats: an integer of at least 1/)
    expect(() => cell({ engine: fake, maxFailedShare: 5 })).toThrow(/cell\.maxFailedShare: a share from 0 to 1/)
    expect(() => cell(untyped({ engine: { name: 'vllm' }, requests: 4 }))).toThrow(/cell\.engine: an engine from engine\.vllm/)
    expect(() => sweep({ engine: fake, ladder: { concurrencies: [1, 2] }, maxTokens: 0 })).toThrow(/sweep.*maxTokens/)
    expect(() => capacity({ engine: fake, slo: { ttftMs: 100 }, bracket: { start: 4 }, percentile: 140 })).toThrow(
      /percentile: 140 must lie in \(0, 100\)/,
    )
    expect(() => capacity({ engine: fake, slo: { ttftMs: 100 }, bracket: { start: 4 }, requests: -1 })).toThrow(/capacity cell\.requests/)
  })

  test('defaults are filled once, at the declaration: the id is built from the resolved plan', () => {
    cell({ engine: fake, concurrency: 3 })
    expect(declaredCell('vllm:fake/m-synthetic-summary-ctx256-c3')).toMatchObject({ kind: 'cell', required: true, status: 'pending' })
  })
})

const ROOT = fileURLToPath(new URL('../../', import.meta.url))
const FIXTURES = join(ROOT, 'fixtures')
const file = (name: string, text: string): string => {
  const path = join(dir, name)
  writeFileSync(path, text)
  return path
}
const missing = join(dir, 'nowhere', 'qa.jsonl')

/** What a declaration threw, for its message, name, stack and cause. */
function thrown(declare: () => unknown): ServegateError {
  try {
    declare()
  } catch (error) {
    if (error instanceof ServegateError) return error
    throw error
  }
  throw new Error('expected the declaration to throw')
}

describe('every file a declaration names is read when it is declared', () => {
  const conversation = { kind: 'conversation' as const, sessions: 2, turns: 2 }
  const trace = (path: string) => ({ kind: 'trace' as const, path })
  test.for<[string, () => unknown, RegExp]>([
    [
      'a missing dataset',
      () => pair({ baseline: fake, candidate: fake, id: 'qa', workload: { kind: 'dataset', datasetPath: missing } }),
      /^pair "qa"\.workload\.datasetPath: .*nowhere\/qa\.jsonl: cannot read the dataset \(ENOENT: no such file .*nowhere\/qa\.jsonl\); check the path$/,
    ],
    [
      'a dataset line with a bad field',
      () =>
        cell({
          engine: fake,
          workload: { kind: 'dataset', datasetPath: file('bad.jsonl', '{"prompt":"2+2?","answer":"4","scorer":"numeric"}\n') },
        }),
      /^cell\.workload\.datasetPath: .*bad\.jsonl:1: field `answer` has the wrong type \(string\); set it to a finite number, e\.g\. 42/,
    ],
    [
      'a dataset image that is not there',
      () =>
        cell({
          engine: fake,
          workload: {
            kind: 'dataset',
            datasetPath: file('img.jsonl', '{"prompt":"Which?","answer":"A","scorer":"exact","images":["gone.png"]}\n'),
          },
        }),
      /^cell\.workload\.datasetPath: .*img\.jsonl:1: field `images\[0\]` "gone\.png" cannot be read \(ENOENT: no such file /,
    ],
    [
      'dataset images over the completions API',
      () => cell({ engine: fake, api: 'completions', workload: { kind: 'dataset', datasetPath: join(FIXTURES, 'datasets/charts.jsonl') } }),
      /^cell\.api: the rows of .*charts\.jsonl have images, which need the chat API; set api: 'chat'$/,
    ],
    [
      'the dataset kind without a dataset',
      () => cell({ engine: fake, workload: { kind: 'dataset' } }),
      /^cell\.workload\.datasetPath: the dataset kind/,
    ],
    [
      'a missing conversations file',
      () => cell({ engine: fake, workload: { ...conversation, conversations: missing } }),
      /^cell\.workload\.conversations: .*qa\.jsonl: cannot read the conversations \(ENOENT: no such file /,
    ],
    [
      'a conversation line with a bad field',
      () =>
        cell({
          engine: fake,
          workload: { ...conversation, conversations: file('c.jsonl', '{"messages":[{"role":"human","content":"hi"}]}\n') },
        }),
      /^cell\.workload\.conversations: .*c\.jsonl:1: `messages\[0\]\.role` is "human"; use system, user or assistant$/,
    ],
    [
      'more turns than any conversation has',
      () =>
        cell({
          engine: fake,
          workload: { ...conversation, turns: 9, conversations: join(FIXTURES, 'conversations/openai-messages.jsonl') },
        }),
      /^cell\.workload\.conversations: .*openai-messages\.jsonl: no conversation has 9 user turns \(the longest has \d+\); set workload\.turns to \d+ or less$/,
    ],
    [
      'a missing trace',
      () => cell({ engine: fake, arrival: trace(missing) }),
      /^cell\.arrival\.path: trace .*qa\.jsonl: cannot read it \(ENOENT: no such file .*\); pass the path of a JSONL trace$/,
    ],
    [
      'a trace line with a bad field',
      () => cell({ engine: fake, requests: 1, arrival: trace(file('t.jsonl', '{"timestamp":"x","input_length":8,"output_length":2}\n')) }),
      /^cell\.arrival\.path: .*t\.jsonl:1: field `timestamp` is "x"; set it to a number ≥ 0$/,
    ],
    [
      'more requests than the trace has rows',
      () => cell({ engine: fake, requests: 500, arrival: trace(join(FIXTURES, 'traces/mooncake-blocks.jsonl')) }),
      /^cell: requests: 500 but the trace .*mooncake-blocks\.jsonl has \d+ rows; pass requests ≤ \d+ \(its first rows are replayed\)$/,
    ],
    [
      'a missing histogram of sizes',
      () => cell({ engine: fake, maxTokens: { histogram: missing } }),
      /^invalid cell options: cell\.maxTokens\.histogram: .*qa\.jsonl cannot be read \(ENOENT\)/,
    ],
    [
      'a sweep whose rungs read a missing dataset',
      () => sweep({ engine: fake, ladder: { concurrencies: [1, 2] }, workload: { kind: 'dataset', datasetPath: missing } }),
      /\.workload\.datasetPath: .*cannot read the dataset \(ENOENT/,
    ],
    [
      'a capacity search on a missing dataset',
      () => capacity({ engine: fake, slo: { ttftMs: 100 }, bracket: { start: 4 }, workload: { kind: 'dataset', datasetPath: missing } }),
      /^capacity cell\.workload\.datasetPath: .*cannot read the dataset \(ENOENT/,
    ],
    [
      "trtllm-serve's own options file",
      () => engine.trtllm({ model: { id: 'm' }, extraArgs: ['--config', missing] }),
      /^engine\.extraArgs: the trtllm-serve options file .*qa\.jsonl cannot be read \(ENOENT: no such file .*\); fix the path$/,
    ],
  ])('%s fails at once, naming the option, the path and the fix', ([, declare, message]) => {
    const error = thrown(declare)
    expect(error.message).toMatch(message)
    expect(error.message).not.toContain('\n')
  })

  test("the error reads as one line with its code, its stack only this spec's frames, and no cause", () => {
    const error = thrown(() => pair({ baseline: fake, candidate: fake, id: 'lost', workload: { kind: 'dataset', datasetPath: missing } }))
    expect(error.code).toBe('FILE_INVALID')
    expect(error.name).toBe('ServegateError [FILE_INVALID]')
    const [head, ...frames] = (error.stack ?? '').split('\n')
    expect(head).toBe(`ServegateError [FILE_INVALID]: ${error.message}`)
    // The first frame is this test's declaration, so vitest's code frame points at it.
    expect(frames[0]).toMatch(/declaration-validation\.test\.ts:\d+:\d+/)
    const own = (f: string): boolean => ['src/', 'dist/'].some((d) => f.includes(join(ROOT, d))) && !f.includes('.test.ts')
    expect(frames.filter(own)).toEqual([])
    expect(error.cause).toBeUndefined()
    expect(declaredCell('lost')).toBeUndefined()
  })

  test('a cell whose files are missing launches nothing', async () => {
    expect(() => cell({ engine: fake, id: 'gone', arrival: trace(missing) })).toThrow(/cannot read it/)
    await sleep(300)
    expect(existsSync(pids)).toBe(false)
  })

  test('files that are there and right are read once for a whole sweep, and the cells declare', () => {
    const dataset = join(FIXTURES, 'datasets/arithmetic.jsonl')
    const s = sweep({ engine: fake, id: 'arith', ladder: { concurrencies: [1, 2] }, workload: { kind: 'dataset', datasetPath: dataset } })
    expect(s.steps.map((step) => declaredCell(step.id)?.status)).toEqual(['pending', 'pending'])
  })
})
