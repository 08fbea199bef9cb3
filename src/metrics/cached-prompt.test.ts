import { describe, expect, test } from 'vitest'
import { okRequest } from '../../fixtures/gate-fixture.ts'
import type { RequestRecord } from '../schema/run.ts'
import { CACHED_PROMPT_TOKENS_UNREPORTED, cachedPromptFigures } from './cached-prompt.ts'
import { computeCellMetrics } from './cell-metrics.ts'

const ok = (index: number, promptTokens: number, cachedPromptTokens: number | null): RequestRecord =>
  okRequest(index, { promptTokens, cachedPromptTokens })
const failed = (index: number, promptTokens: number, cachedPromptTokens: number): RequestRecord => ({
  ...okRequest(index, { promptTokens, cachedPromptTokens }),
  status: 'failed',
  error: { code: 'STREAM_DROPPED', message: 'dropped', httpStatus: null, retryAfterS: null },
})

describe('cached prompt tokens of a cell', () => {
  test('the sum and share over ok requests; failed ones are left out', () => {
    const f = cachedPromptFigures([ok(0, 100, 0), ok(1, 100, 64), failed(2, 100, 96)])
    expect(f).toEqual({ requests: 2, reported: 2, promptTokens: 200, cachedPromptTokens: 64, share: 0.32, unknownReason: null })
  })

  test('nothing reported is unknown, with the reason, never 0', () => {
    const f = cachedPromptFigures([ok(0, 100, null), ok(1, 100, null)])
    expect(f.cachedPromptTokens).toBeNull()
    expect(f.share).toBeNull()
    expect(f.unknownReason).toBe(CACHED_PROMPT_TOKENS_UNREPORTED)
    expect(cachedPromptFigures([]).unknownReason).toBe('no request completed')
  })

  test('once one request reported it, one that did not counts 0 (vLLM leaves out a 0)', () => {
    const f = cachedPromptFigures([ok(0, 100, null), ok(1, 100, 80)])
    expect(f).toMatchObject({ reported: 1, cachedPromptTokens: 80, share: 0.4 })
  })

  test('the cell metrics carry them beside totalPromptTokens', () => {
    const known = computeCellMetrics([ok(0, 50, 0), ok(1, 50, 48)], 1000)
    expect(known).toMatchObject({
      totalPromptTokens: 100,
      totalCachedPromptTokens: 48,
      cachedPromptShare: 0.48,
      cachedPromptTokensUnknownReason: null,
    })
    const unknown = computeCellMetrics([ok(0, 50, null)], 1000)
    expect(unknown).toMatchObject({
      totalCachedPromptTokens: null,
      cachedPromptShare: null,
      cachedPromptTokensUnknownReason: CACHED_PROMPT_TOKENS_UNREPORTED,
    })
  })
})
