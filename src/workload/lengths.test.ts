import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { resolveCellPlan } from '../runner/cell-options.ts'
import { type Length, lengthLabel } from '../schema/lengths.ts'
import { centerTokens, drawLengths, drawnLengthsRecord, MAX_TOKENS_STREAM, PROMPT_TOKENS_STREAM, readHistogram } from './lengths.ts'
import { RequestSizes } from './request-sizes.ts'
import { WorkloadSpec } from './workload-spec.ts'

let dir = ''
let histogram = ''
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'servegate-lengths-'))
  histogram = join(dir, 'sizes.csv')
  await writeFile(histogram, '# prompt sizes seen in production\ntokens,weight\n100,1\n200,3\n\n300,0\n')
})
afterAll(async () => {
  await rm(dir, { recursive: true, force: true })
})

/** The message a cell declaration fails with. */
function declarationError(cell: unknown): string {
  try {
    resolveCellPlan(cell, 'cell "c"')
  } catch (err) {
    return (err as Error).message
  }
  throw new Error('the declaration was accepted')
}

describe('declared distributions are checked when declared, naming the field and the fix', () => {
  test.each([
    [
      { workload: { promptTokens: { uniform: [300, 200] } } },
      'cell "c".workload.promptTokens.uniform: min 300 > max 200; pass [min, max] with min ≤ max',
    ],
    [{ maxTokens: { normal: { mean: 64, sd: -1 } } }, 'cell "c".maxTokens.normal.sd: sd -1 is negative; pass sd ≥ 0'],
    [
      { maxTokens: { lognormal: { median: 64, sigma: -0.5 } } },
      'cell "c".maxTokens.lognormal.sigma: sigma -0.5 is negative; pass sigma ≥ 0',
    ],
    [{ workload: { promptTokens: { uniform: [4, 20] } } }, 'cell "c".workload.promptTokens.uniform.0: min 4 is not from 8 to 10000000'],
    [{ workload: { promptTokens: { normal: { mean: 0, sd: 3 } } } }, 'cell "c".workload.promptTokens.normal.mean: mean 0 is not from 8'],
    [{ maxTokens: { unifrom: [1, 2] } }, 'cell "c".maxTokens: pass a number of tokens ≥ 1, or one of { uniform: [min, max] }'],
    [{ maxTokens: 12.5 }, 'cell "c".maxTokens: pass a number of tokens ≥ 1, or one of'],
  ])('%j', (cell, message) => {
    expect(declarationError(cell)).toContain(message)
  })

  test('a missing histogram file fails at declaration, naming the file and the format', () => {
    const missing = join(dir, 'absent.csv')
    expect(declarationError({ workload: { promptTokens: { histogram: missing } } })).toBe(
      `invalid cell "c" options: cell "c".workload.promptTokens.histogram: ${missing} cannot be read (ENOENT); ` +
        'pass the path of a CSV of tokens,weight rows (an optional tokens,weight header; # comments)',
    )
  })

  test.each([
    ['tokens,weight\n100,1\n100,2\n', 'line 3: tokens 100 is listed again (first on line 2); list each size once'],
    ['100;1\n', 'line 1: "100;1" is not a tokens,weight row'],
    ['5,1\n', 'line 1: tokens "5" is not an integer from 8 to 10000000'],
    ['100,-1\n', 'line 1: weight "-1" is not a number ≥ 0'],
    ['100,0\n', 'has no row with a weight > 0'],
  ])('a bad histogram %j is named with its line', async (text, message) => {
    const path = join(dir, `bad-${Math.random().toString(36).slice(2)}.csv`)
    await writeFile(path, text)
    expect(declarationError({ workload: { promptTokens: { histogram: path } } })).toContain(`${path} ${message}`)
  })

  test('drawn sizes where nothing can be drawn are refused: a dataset, a trace, a conversation', () => {
    expect(declarationError({ workload: { kind: 'dataset', datasetPath: 'x.jsonl', promptTokens: { uniform: [10, 20] } } })).toContain(
      'workload.promptTokens: dataset prompts are sent as written; pass one number or remove promptTokens',
    )
    expect(declarationError({ maxTokens: { uniform: [1, 9] }, arrival: { kind: 'trace', path: 't.jsonl' } })).toContain(
      "maxTokens: a trace sets each request's sizes itself; pass one number or remove the trace arrival",
    )
    const conversation = { kind: 'conversation', sessions: 2, turns: 2, userTokens: 32 }
    expect(declarationError({ maxTokens: { uniform: [1, 9] }, workload: conversation })).toContain(
      "maxTokens: a conversation's turns share one max_tokens; pass one number",
    )
  })

  test('a shared prefix with drawn prompts names its block, and the block must fit the smallest uniform draw', () => {
    expect(declarationError({ workload: { kind: 'shared-prefix', promptTokens: { uniform: [100, 200] } } })).toContain(
      "workload.prefixCache: a shared-prefix workload whose promptTokens is drawn needs its shared block's size",
    )
    expect(
      declarationError({ workload: { promptTokens: { uniform: [100, 200] }, prefixCache: { mode: 'shared', tokens: 100 } } }),
    ).toContain('workload.prefixCache: 100 shared tokens leave no room in a 100-token prompt; make tokens smaller than 100')
  })

  test('a valid distribution resolves as declared', () => {
    const plan = resolveCellPlan({ maxTokens: { uniform: [16, 64] }, workload: { promptTokens: { histogram: histogram } } })
    expect(plan.maxTokens).toEqual({ uniform: [16, 64] })
    expect(plan.workload.promptTokens).toEqual({ histogram })
    expect(WorkloadSpec.parse({}).promptTokens).toBe(256)
  })
})

describe('draws', () => {
  test('are the same for the same seed, differ for another seed, and depend on the index only', () => {
    const d = { lognormal: { median: 512, sigma: 0.5 } }
    const a = drawLengths(d, 8, 7, PROMPT_TOKENS_STREAM, 200, 'p')?.tokens
    const b = drawLengths(d, 8, 7, PROMPT_TOKENS_STREAM, 200, 'p')?.tokens
    const other = drawLengths(d, 8, 8, PROMPT_TOKENS_STREAM, 200, 'p')?.tokens
    const fewer = drawLengths(d, 8, 7, PROMPT_TOKENS_STREAM, 50, 'p')?.tokens
    expect(Array.from(a ?? [])).toEqual(Array.from(b ?? []))
    expect(Array.from(other ?? [])).not.toEqual(Array.from(a ?? []))
    expect(Array.from(fewer ?? [])).toEqual(Array.from(a ?? []).slice(0, 50))
    // The prompt and max_tokens streams are apart: the same distribution draws differently for each.
    expect(Array.from(drawLengths(d, 8, 7, MAX_TOKENS_STREAM, 200, 'm')?.tokens ?? [])).not.toEqual(Array.from(a ?? []))
  })

  test('one number is not drawn', () => {
    expect(drawLengths(128, 1, 0, MAX_TOKENS_STREAM, 10, 'maxTokens')).toBeNull()
  })

  test('uniform: integers from min to max, both ends included, each about as often', () => {
    const tokens = drawLengths({ uniform: [10, 13] }, 1, 3, MAX_TOKENS_STREAM, 4000, 'm')?.tokens ?? new Int32Array()
    const counts = new Map<number, number>()
    for (const t of tokens) counts.set(t, (counts.get(t) ?? 0) + 1)
    expect([...counts.keys()].sort()).toEqual([10, 11, 12, 13])
    for (const c of counts.values()) expect(c).toBeGreaterThan(900)
  })

  test('normal and lognormal: the mean, sd and median hold; integers; held at the floor', () => {
    const normal = Array.from(drawLengths({ normal: { mean: 512, sd: 64 } }, 8, 1, PROMPT_TOKENS_STREAM, 20_000, 'p')?.tokens ?? [])
    const mean = normal.reduce((s, t) => s + t, 0) / normal.length
    const sd = Math.sqrt(normal.reduce((s, t) => s + (t - mean) ** 2, 0) / (normal.length - 1))
    expect(mean).toBeGreaterThan(509)
    expect(mean).toBeLessThan(515)
    expect(sd).toBeGreaterThan(62)
    expect(sd).toBeLessThan(66)
    expect(normal.every(Number.isInteger)).toBe(true)
    const lognormal = Array.from(
      drawLengths({ lognormal: { median: 300, sigma: 0.8 } }, 8, 1, PROMPT_TOKENS_STREAM, 20_000, 'p')?.tokens ?? [],
    )
    const sorted = lognormal.slice().sort((x, y) => x - y)
    expect(sorted[10_000]).toBeGreaterThan(290)
    expect(sorted[10_000]).toBeLessThan(310)
    // A normal centred on the floor: about half its draws fall below it and take it.
    const floored = Array.from(drawLengths({ normal: { mean: 8, sd: 20 } }, 8, 1, PROMPT_TOKENS_STREAM, 1000, 'p')?.tokens ?? [])
    expect(Math.min(...floored)).toBe(8)
    expect(floored.filter((t) => t === 8).length).toBeGreaterThan(400)
  })

  test('histogram: each listed size at its weight share; a weight of 0 is never drawn', () => {
    const drawn = drawLengths({ histogram }, 8, 5, PROMPT_TOKENS_STREAM, 8000, 'p')
    const tokens = Array.from(drawn?.tokens ?? [])
    const share200 = tokens.filter((t) => t === 200).length / tokens.length
    expect(new Set(tokens)).toEqual(new Set([100, 200]))
    expect(share200).toBeGreaterThan(0.72)
    expect(share200).toBeLessThan(0.78)
    expect(drawn?.histogramSha256).toBe(readHistogram(histogram, 8).sha256)
    expect(centerTokens({ histogram }, 8)).toBe(175)
  })

  test('the record keeps every measured draw, in request order, with its summary', () => {
    const drawn = drawLengths({ uniform: [20, 40] }, 1, 9, MAX_TOKENS_STREAM, 12, 'maxTokens')
    const record = drawnLengthsRecord(drawn as NonNullable<typeof drawn>, 10)
    expect(record.tokens).toEqual(Array.from(drawn?.tokens.subarray(0, 10) ?? []))
    expect(record.smallestTokens).toBe(Math.min(...record.tokens))
    expect(record.largestTokens).toBe(Math.max(...record.tokens))
    expect(record.meanTokens).toBeCloseTo(record.tokens.reduce((s, t) => s + t, 0) / 10, 10)
    expect(record.distribution).toEqual({ uniform: [20, 40] })
  })
})

test('request sizes: measured then warm-up requests each draw; the plan states the mean', () => {
  const spec = WorkloadSpec.parse({ promptTokens: { uniform: [100, 200] }, seed: 3 })
  const sizes = new RequestSizes(spec, { api: 'chat', maxTokens: { uniform: [5, 9] }, requests: 6, warmupRequests: 2 })
  const all = Array.from({ length: 8 }, (_, i) => sizes.size(i))
  expect(all.every((s) => s.promptTokens >= 100 && s.promptTokens <= 200 && s.maxTokens >= 5 && s.maxTokens <= 9)).toBe(true)
  expect(sizes.record()?.promptTokens?.tokens).toEqual(all.slice(0, 6).map((s) => s.promptTokens))
  expect(sizes.record()?.maxTokens?.tokens).toEqual(all.slice(0, 6).map((s) => s.maxTokens))
  expect(sizes.targetPromptTokens).toBe(Math.round(all.slice(0, 6).reduce((s, x) => s + x.promptTokens, 0) / 6))
  expect(new RequestSizes(WorkloadSpec.parse({}), { api: 'chat', maxTokens: 32, requests: 2, warmupRequests: 0 }).record()).toBeNull()
})

test('a size reads short in a cell id', () => {
  const lengths: Length[] = [
    256,
    { uniform: [100, 200] },
    { normal: { mean: 512, sd: 64 } },
    { lognormal: { median: 512, sigma: 0.5 } },
    { histogram: 'x.csv' },
  ]
  expect(lengths.map(lengthLabel)).toEqual(['256', 'u100-200', 'n512sd64', 'ln512s0.5', 'hist'])
})
