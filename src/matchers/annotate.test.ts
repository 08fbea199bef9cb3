import { describe, expect, test } from 'vitest'
import { tracked } from '../worker/cell-registry.ts'
import { computeCellMetrics } from '../metrics/cell-metrics.ts'
import { failedCellRecord } from '../runner/run-record.ts'
import type { PairResult } from '../schema/results.ts'
import { RunRecord } from '../schema/run.ts'
import { type Annotate, annotateCell, annotationType, checkAnnotation, svgAttachment } from './annotate.ts'

/** A record of `n` ok requests at `decode` tok/s (a little spread, so the chart has a range). */
function record(n: number, decode: number): RunRecord {
  const base = failedCellRecord(
    { baseUrl: 'http://127.0.0.1:1', model: 'm', requests: n },
    { code: 'INTERNAL', message: 'x', httpStatus: null, retryAfterS: null },
  )
  const requests = Array.from({ length: n }, (_, index) => {
    const decodeTokPerS = decode * (1 + 0.05 * Math.sin(index))
    const ttftMs = 200 * (1 + 0.1 * Math.cos(index))
    const generationMs = (63 / decodeTokPerS) * 1000
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
      tpotMs: generationMs / 63,
      decodeTokPerS,
      effectivePrefillTokPerS: 512 / (ttftMs / 1000),
      promptTokens: 512,
      completionTokens: 64,
      completionTokenSource: 'usage',
      reasoningChunks: 0,
      contentChunks: 64,
      itlMs: null,
      finishReason: 'length',
    })
  })
  return { ...base, cellFailure: null, requests, completed: n, metrics: computeCellMetrics(requests, 1000) }
}

function pairOf(id: string, decode: number): PairResult {
  return { kind: 'pair', id, baseline: [record(16, 100)], candidate: [record(16, decode)], launchOrder: ['baseline', 'candidate'] }
}

/** An annotate function that keeps what it was called with, in order. */
function recorder(): { calls: Array<{ message: string; type: string; attachment?: unknown }>; annotate: Annotate } {
  const calls: Array<{ message: string; type: string; attachment?: unknown }> = []
  return {
    calls,
    annotate: async (message, type, attachment) => {
      calls.push(attachment === undefined ? { message, type } : { message, type, attachment })
    },
  }
}

describe('annotations', () => {
  test('types follow the outcome: notice for pass, warning for inconclusive, error for fail', () => {
    expect(annotationType('pass')).toBe('notice')
    expect(annotationType('inconclusive')).toBe('warning')
    expect(annotationType('fail')).toBe('error')
  })

  test('a check reads as passed or failed, and a .not that held as expected, in a neutral notice', () => {
    const mismatch = { cell: 'c4', check: 'toBeMatchedPair' as const, passed: false, findings: ['GPU driver: 550 ≠ 560'] }
    expect(checkAnnotation({ ...mismatch, isNot: true })).toEqual({
      message: 'toBeMatchedPair c4: expected mismatch ✓: 1 finding(s), first: GPU driver: 550 ≠ 560',
      type: 'notice',
    })
    expect(checkAnnotation({ ...mismatch, isNot: false })).toEqual({
      message: 'toBeMatchedPair c4: FAIL: 1 finding(s), first: GPU driver: 550 ≠ 560',
      type: 'error',
    })
    expect(checkAnnotation({ ...mismatch, passed: true, findings: [], isNot: false })).toEqual({
      message: 'toBeMatchedPair c4: PASS',
      type: 'notice',
    })
  })

  test('an SVG is attached as UTF-8 text, not as a string vitest would read as base64', () => {
    expect(svgAttachment('<svg/>')).toEqual({ body: '<svg/>', contentType: 'image/svg+xml', bodyEncoding: 'utf-8' })
  })

  test('a cell measured through the registry has its chart drawn before its result is handed on, and attached synchronously', async () => {
    const p = pairOf('drawn-on-measure', 150)
    const result = await tracked(
      p.id,
      async () => p,
      (r) => ({ baseline: [...r.baseline], candidate: [...r.candidate] }),
    )
    const { calls, annotate } = recorder()
    const settled = annotateCell(annotate, result)
    // Both calls are made before annotateCell returns: nothing waits on a drawing any more.
    expect(calls.map((c) => [c.type, c.message.split(':')[0]])).toEqual([
      ['notice', 'drawn-on-measure'],
      ['notice', 'drawn-on-measure'],
    ])
    expect(calls[0]?.message).toMatch(/^drawn-on-measure: baseline: decode p50 \d+ tok\/s/)
    expect(calls[1]).toMatchObject({
      message: 'drawn-on-measure: latency by arm',
      attachment: { contentType: 'image/svg+xml', bodyEncoding: 'utf-8' },
    })
    expect((calls[1]?.attachment as { body: string }).body).toMatch(/^<svg[\s\S]*<\/svg>\s*$/)
    await settled
  })

  test('records handed to expect directly get their chart once drawn; the promise settles after it is attached', async () => {
    const { calls, annotate } = recorder()
    const settled = annotateCell(annotate, pairOf('drawn-late', 150))
    expect(calls.map((c) => c.type)).toEqual(['notice'])
    await settled
    expect(calls.map((c) => [c.type, c.message])).toEqual([
      ['notice', expect.stringMatching(/^drawn-late: baseline: /)],
      ['notice', 'drawn-late: latency by arm'],
    ])
  })

  test('an annotate that rejects (the test already ended) never fails the test', async () => {
    const annotate: Annotate = async () => {
      throw new Error('Cannot annotate tests outside of the test run')
    }
    await expect(annotateCell(annotate, pairOf('too-late', 150))).resolves.toBeUndefined()
  })
})
