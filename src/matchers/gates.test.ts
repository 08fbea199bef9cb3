import { describe, expect, test } from 'vitest'
import { failureOf as messageOf } from '../../fixtures/matchers.ts'
import { buildEvidence } from '../evidence/build.ts'
import { formatSignificant as num } from '../number-format.ts'
import { createRandom } from '../random.ts'
import type { PairResult } from '../schema/results.ts'
import { RunRecord } from '../schema/run.ts'
import { failedCellRecord } from '../runner/run-record.ts'
import { computeCellMetrics } from '../metrics/cell-metrics.ts'
import { keyFigures } from './annotate.ts'

/**
 * A record of `n` ok requests whose per-request figures are drawn around the given medians
 * (log-normal with relative sd `noise`), seeded, so both arms can share per-prompt effects.
 */
function arm(n: number, scale: { decode?: number; ttftMs?: number }, noise: number, seed: number): RunRecord {
  const prompt = createRandom(7)
  const own = createRandom(seed)
  const gauss = (r: () => number) => Math.sqrt(-2 * Math.log(1 - r())) * Math.cos(2 * Math.PI * r())
  const base = failedCellRecord(
    { baseUrl: 'http://127.0.0.1:1', model: 'm', requests: n },
    { code: 'INTERNAL', message: 'x', httpStatus: null, retryAfterS: null },
  )
  const requests = Array.from({ length: n }, (_, index) => {
    const difficulty = Math.exp(0.2 * gauss(prompt))
    const jitter = () => Math.exp(noise * gauss(own))
    const decodeTokPerS = (scale.decode ?? 100) * difficulty * jitter()
    const ttftMs = (scale.ttftMs ?? 200) * difficulty * jitter()
    const completionTokens = 64
    const generationMs = ((completionTokens - 1) / decodeTokPerS) * 1000
    return RunRecord.shape.requests.element.parse({
      status: 'ok',
      index,
      queueDelayMs: 0,
      sendLagMs: 0,
      startOffsetMs: 0,
      ttftMs,
      timeToFirstOutputMs: ttftMs,
      e2eMs: ttftMs + generationMs,
      generationMs,
      tpotMs: generationMs / (completionTokens - 1),
      decodeTokPerS,
      effectivePrefillTokPerS: 512 / (ttftMs / 1000),
      promptTokens: 512,
      completionTokens,
      completionTokenSource: 'usage',
      reasoningChunks: 0,
      contentChunks: completionTokens,
      itlMs: null,
      finishReason: 'length',
    })
  })
  // A closed loop at concurrency 4: the wall clock is the requests' service time over the slots.
  const wallClockMs = requests.reduce((sum, r) => sum + (r.e2eMs ?? 0), 0) / 4
  return { ...base, cellFailure: null, requests, completed: n, metrics: computeCellMetrics(requests, wallClockMs) }
}

const pairOf = (b: RunRecord, c: RunRecord): PairResult => ({
  kind: 'pair',
  id: 'p',
  baseline: [b],
  candidate: [c],
  launchOrder: ['baseline', 'candidate'],
})
/** The failure message up to vitest's own diff. */
const failureOf = (fn: () => void): string => messageOf(fn).split('\n- Expected')[0] as string

describe('toWinDecode', () => {
  test('pass: a clear 30% win over 64 paired prompts (launch noise 2% included)', () => {
    const p = pairOf(arm(64, { decode: 100 }, 0.05, 1), arm(64, { decode: 130 }, 0.05, 2))
    expect(p).toWinDecode({ margin: 0.05 })
    expect(failureOf(() => expect(p).not.toWinDecode({ margin: 0.05 }))).toMatch(
      /^expect\(result\)\.not\.toWinDecode\(\)\n\nExpected: not: pass if the lower bound .* exceeds 1\.050/,
    )
  })

  test('fail: the candidate is confidently slower', () => {
    const p = pairOf(arm(64, { decode: 100 }, 0.05, 1), arm(64, { decode: 80 }, 0.05, 2))
    const message = failureOf(() => expect(p).toWinDecode())
    expect(message).toMatch(/Received: fail: 0\.\d+× \[0\.\d+×, 0\.\d+×\] \(98% interval\)/)
    expect(message).toMatch(/Samples: {2}64 paired; baseline 64, candidate 64/)
  })

  test('inconclusive fails, with how many more requests would likely decide it', () => {
    const p = pairOf(arm(10, { decode: 100 }, 0.3, 1), arm(10, { decode: 104 }, 0.3, 2))
    const message = failureOf(() => expect(p).toWinDecode())
    expect(message).toMatch(/Received: inconclusive: /)
    expect(message).toMatch(/about \d+ paired requests per arm would likely decide it/)
  })

  test('a failed cell fails the gate with its reason', () => {
    const failed = failedCellRecord(
      { baseUrl: 'http://127.0.0.1:1', model: 'm' },
      { code: 'ENGINE_EXITED', message: 'engine vllm exited during start-up with code 3', httpStatus: null, retryAfterS: null },
    )
    expect(failureOf(() => expect(pairOf(arm(16, {}, 0.05, 1), failed)).toWinDecode())).toMatch(
      /- candidate: ENGINE_EXITED: engine vllm exited during start-up with code 3/,
    )
  })

  test('a wrong argument is a TypeError naming the matcher', () => {
    expect(() => expect({}).toWinDecode()).toThrow(TypeError)
    expect(() => expect({}).toWinDecode()).toThrow(/^toWinDecode: expected a measured pair/)
  })
})

describe('toHoldLatency', () => {
  test('pass: no regression of p95 TTFT', () => {
    const p = pairOf(arm(128, { ttftMs: 200 }, 0.1, 1), arm(128, { ttftMs: 195 }, 0.1, 2))
    expect(p).toHoldLatency({ metric: 'ttft', percentile: 95, notWorseThanPct: 10 })
  })

  test('fail: a confident 40% regression of p50 TTFT', () => {
    const p = pairOf(arm(128, { ttftMs: 200 }, 0.1, 1), arm(128, { ttftMs: 280 }, 0.1, 2))
    expect(failureOf(() => expect(p).toHoldLatency({ metric: 'ttft', percentile: 50, notWorseThanPct: 10 }))).toMatch(
      /Received: fail: 1\.\d+×/,
    )
  })

  test('inconclusive passes (with a warning annotation), and .not then fails', () => {
    const p = pairOf(arm(12, { ttftMs: 200 }, 0.3, 1), arm(12, { ttftMs: 215 }, 0.3, 2))
    expect(p).toHoldLatency({ metric: 'ttft', percentile: 50, notWorseThanPct: 5 })
    expect(failureOf(() => expect(p).not.toHoldLatency({ metric: 'ttft', percentile: 50, notWorseThanPct: 5 }))).toMatch(
      /Received: inconclusive: /,
    )
  })

  test('a wrong argument is a TypeError naming the matcher', () => {
    const p = pairOf(arm(8, {}, 0.1, 1), arm(8, {}, 0.1, 2))
    // @ts-expect-error: the options are required
    expect(() => expect(p).toHoldLatency()).toThrow(/^toHoldLatency: pass \{ metric:/)
  })
})

describe('toWinPrefill and toWinThroughput', () => {
  test('pass on a clear win, fail on a clear loss, and .not both ways', () => {
    const faster = pairOf(arm(64, { ttftMs: 200, decode: 100 }, 0.05, 1), arm(64, { ttftMs: 120, decode: 140 }, 0.05, 2))
    const slower = pairOf(arm(64, { ttftMs: 200, decode: 100 }, 0.05, 1), arm(64, { ttftMs: 300, decode: 70 }, 0.05, 2))
    expect(faster).toWinPrefill({ margin: 0.1 })
    expect(faster).toWinThroughput({ margin: 0.1 })
    expect(slower).not.toWinPrefill()
    expect(slower).not.toWinThroughput()
    expect(failureOf(() => expect(slower).toWinPrefill())).toMatch(
      /^expect\(result\)\.toWinPrefill\(\)\n\nExpected: pass if .*\nReceived: fail: /,
    )
    expect(failureOf(() => expect(faster).not.toWinThroughput({ margin: 0.1 }))).toMatch(
      /^expect\(result\)\.not\.toWinThroughput\(\)\n\nExpected: not: pass if .*\nReceived: pass: /,
    )
  })
})

describe('toStayWithinAccuracyGap', () => {
  function scored(record: RunRecord, pCorrect: number, seed: number, tokens = 64): RunRecord {
    const r = createRandom(seed)
    return {
      ...record,
      requests: record.requests.map((q) => ({
        ...q,
        completionTokens: tokens,
        score: { correct: r() < pCorrect, extracted: 'x', reason: 'test' },
      })),
    }
  }

  test('pass when both arms answer alike; fail on a confident 25-point drop', () => {
    const base = arm(200, {}, 0.05, 1)
    const same = pairOf(scored(base, 0.8, 11), scored(arm(200, {}, 0.05, 2), 0.8, 11))
    expect(same).toStayWithinAccuracyGap()
    const worse = pairOf(scored(base, 0.8, 11), scored(arm(200, {}, 0.05, 2), 0.55, 12))
    expect(failureOf(() => expect(worse).toStayWithinAccuracyGap({ points: 2 }))).toMatch(
      /^expect\(result\)\.toStayWithinAccuracyGap\(\)\n\nExpected: .*\nReceived: fail: /,
    )
    expect(failureOf(() => expect(same).not.toStayWithinAccuracyGap())).toMatch(/^expect\(result\)\.not\.toStayWithinAccuracyGap\(\)/)
  })

  test('an output-length gap of 10% or more is a warning, not a failure', () => {
    const p = pairOf(scored(arm(100, {}, 0.05, 1), 0.8, 11, 64), scored(arm(100, {}, 0.05, 2), 0.8, 11, 80))
    expect(p).toStayWithinAccuracyGap({ outputLengthPct: 10 })
  })
})

describe('what a reviewer sees in @vitest/ui', () => {
  test('a gate leaves its verdict, the cell key figures and the cell chart (SVG) on the test, and its decision in the meta', async ({
    task,
  }) => {
    const p = pairOf(arm(32, { decode: 100 }, 0.05, 1), arm(32, { decode: 150 }, 0.05, 2))
    expect(p).toWinDecode({ margin: 0.1 })
    expect(p).toWinDecode({ margin: 0.2 })
    // Records handed to expect directly had no chart drawn when measured: it is drawn now, and vitest awaits it.
    expect(task.promises?.length).toBeGreaterThan(0)
    await Promise.all(task.promises ?? [])
    const verdicts = task.annotations.filter((a) => /^toWinDecode /.test(a.message))
    expect(verdicts.map((a) => a.type)).toEqual(['notice', 'notice'])
    expect(verdicts[0]?.message).toMatch(
      /^toWinDecode p: decode \+\d+(\.\d+)?% \[\+\d+(\.\d+)?%, \+\d+(\.\d+)?%\] > \+10%: pass \(98% interval, 32 paired/,
    )
    expect(task.annotations.find((a) => /^p: baseline: decode p50 .*; candidate: decode p50/.test(a.message))?.type).toBe('notice')
    const chart = task.annotations.find((a) => a.attachment !== undefined)
    expect(chart).toMatchObject({ type: 'notice', message: 'p: latency by arm' })
    expect(chart?.attachment).toMatchObject({ contentType: 'image/svg+xml', bodyEncoding: 'utf-8' })
    expect(String(chart?.attachment?.body)).toMatch(/^<svg/)
    expect(task.meta.servegate?.decisions.map((d) => [d.cell, d.decision.gate])).toEqual([
      ['p', 'toWinDecode'],
      ['p', 'toWinDecode'],
    ])
  })

  test('an inconclusive verdict is annotated as a warning, a failed one as an error', async ({ task }) => {
    const p = pairOf(arm(8, { decode: 100 }, 0.3, 1), arm(8, { decode: 104 }, 0.3, 2))
    expect(p).toWinDecode({ margin: 0.05, inconclusive: 'pass' })
    const slower = pairOf(arm(32, { decode: 100 }, 0.05, 1), arm(32, { decode: 60 }, 0.05, 2))
    expect(failureOf(() => expect(slower).toWinDecode({ margin: 0.05 }))).toMatch(/Received: fail/)
    await Promise.all(task.promises ?? [])
    const verdicts = task.annotations.filter((a) => /^toWinDecode /.test(a.message))
    expect(verdicts.map((a) => [a.type, a.message.replace(/ \(.*$/, '').replace(/[+-]?\d+(\.\d+)?%/g, 'N%')])).toEqual([
      ['warning', 'toWinDecode p: decode N% [N%, N%] > N%: inconclusive'],
      ['error', 'toWinDecode p: decode N% [N%, N%] > N%: fail'],
    ])
  })

  test('a .not that held reads as expected in a neutral notice; undecided it stays a warning', async ({ task }) => {
    const p = pairOf(arm(8, { decode: 100 }, 0.3, 1), arm(8, { decode: 104 }, 0.3, 2))
    expect(p).not.toWinDecode({ margin: 0.05 })
    const slower = pairOf(arm(32, { decode: 100 }, 0.05, 1), arm(32, { decode: 60 }, 0.05, 2))
    expect(slower).not.toWinDecode({ margin: 0.05 })
    await Promise.all(task.promises ?? [])
    const verdicts = task.annotations.filter((a) => /^toWinDecode /.test(a.message))
    expect(verdicts.map((a) => a.type)).toEqual(['warning', 'notice'])
    expect(verdicts[0]?.message).toMatch(/: inconclusive, expected non-win ✓ \(.*\); inconclusive fails: /)
    expect(verdicts[1]?.message).toMatch(/^toWinDecode p: decode -\d+(\.\d+)?% \[.*\] > \+5%: fail, expected non-win ✓ \(98% interval/)
  })

  test('the key figures, read from the records without the evidence builder, are the figures the evidence summarizes', () => {
    const p: PairResult = {
      ...pairOf(arm(16, { decode: 100 }, 0.05, 1), arm(16, { decode: 150 }, 0.05, 2)),
      baseline: [arm(16, { decode: 100 }, 0.05, 1), arm(16, { decode: 90 }, 0.05, 3)],
    }
    const records = { baseline: [...p.baseline], candidate: [...p.candidate] }
    const cell = {
      id: 'p',
      kind: 'pair' as const,
      required: true,
      ladder: null,
      engines: {},
      status: 'measured' as const,
      error: null,
      records,
    }
    const built = buildEvidence([{ file: '', meta: { cells: [cell] } }], [], { suiteCommit: null, redact: false }).index.cells[0]
    const arms = (built?.arms ?? []).map((a) => {
      const t = a.timings
      return (
        `${a.arm}${a.launch > 1 ? ` #${a.launch}` : ''}: decode p50 ${num(t.decodeTokPerS.p50)} tok/s, ` +
        `prefill p50 ${num(t.effectivePrefillTokPerS.p50)} tok/s, TTFT p50/p95 ${num(t.ttftMs.p50)}/${num(t.ttftMs.p95)} ms, ` +
        `TPOT p50/p95 ${num(t.tpotMs.p50)}/${num(t.tpotMs.p95)} ms, ${num(a.outputThroughputTokPerS)} tok/s aggregate ` +
        `(${a.completed} ok, ${a.failed} failed)`
      )
    })
    expect(arms).toHaveLength(3)
    expect(keyFigures(p)).toBe(`p: ${arms.join('; ')}`)
    expect(keyFigures(p)).toMatch(/^p: baseline: .*; baseline #2: .*; candidate: /)
  })

  test('an imported arm that never counted its failures reads "failed unknown" in the key figures, never "null failed"', () => {
    const p = pairOf({ ...arm(16, { decode: 100 }, 0.05, 1), failed: null }, arm(16, { decode: 150 }, 0.05, 2))
    expect(keyFigures(p)).toMatch(/^p: baseline: .*\(16 ok, failed unknown\); candidate: .*\(16 ok, 0 failed\)$/)
  })
})

describe('options are parsed once, where a gate matcher is called', () => {
  test('a wrong field is a TypeError naming the matcher and the field, even on a cell that failed', () => {
    const p = pairOf(arm(8, {}, 0.1, 1), arm(8, {}, 0.1, 2))
    expect(() => expect(p).toWinPrefill({ margin: -2 })).toThrow(TypeError)
    expect(() => expect(p).toWinPrefill({ margin: -2 })).toThrow(/^toWinPrefill: invalid options\n✖ .*\n {2}→ at margin$/)
    // @ts-expect-error: an unknown latency metric
    expect(() => expect(p).toHoldLatency({ metric: 'latency', notWorseThanPct: 10 })).toThrow(
      /^toHoldLatency: invalid options\n[^]*→ at metric/,
    )
    expect(() => expect(p).toStayWithinAccuracyGap({ points: 0 })).toThrow(/^toStayWithinAccuracyGap: invalid options\n[^]*→ at points/)
    const failed = pairOf(arm(8, {}, 0.1, 1), {
      ...arm(8, {}, 0.1, 2),
      cellFailure: { code: 'INTERNAL', message: 'x', httpStatus: null, retryAfterS: null },
    })
    expect(() => expect(failed).toWinThroughput({ looks: [1] })).toThrow(/^toWinThroughput: invalid options\n[^]*→ at looks\[0\]/)
  })

  test('anything but an object is a TypeError naming the matcher, with how to call it', () => {
    const p = pairOf(arm(8, {}, 0.1, 1), arm(8, {}, 0.1, 2))
    // @ts-expect-error: the options are an object
    expect(() => expect(p).toWinDecode(5)).toThrow(/^toWinDecode: options must be an object, e.g. \{ margin: 0\.05 \}$/)
  })
})
