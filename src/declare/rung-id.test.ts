import { describe, expect, test } from 'vitest'
import { rungIds } from './rung-id.ts'

describe('rungIds', () => {
  test('the ladder name, the axis letter and the value as given: short and distinct', () => {
    expect(rungIds('cand-synthetic-summary-ctx1024', 'concurrency', [1, 2, 8])).toEqual([
      'cand-synthetic-summary-ctx1024-c1',
      'cand-synthetic-summary-ctx1024-c2',
      'cand-synthetic-summary-ctx1024-c8',
    ])
    // Rates keep their own decimals: 2.25 and 2.3 stay apart (one decimal would make both r2.3).
    expect(rungIds('ttft', 'rate', [0.5, 2.25, 2.3, 4])).toEqual(['ttft-r0.5', 'ttft-r2.25', 'ttft-r2.3', 'ttft-r4'])
  })

  test('a computed value is rounded, and values that then read alike are numbered', () => {
    expect(rungIds('s', 'rate', [Math.SQRT2 * 20, 0.123456789, 14.142135, 14.1421356])).toEqual([
      's-r28.28',
      's-r0.12',
      's-r14.14',
      's-r14.14~2',
    ])
  })
})
