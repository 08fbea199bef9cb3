import { describe, expect, test } from 'vitest'
import { gapErrors, parseSendLog } from './send-truth.ts'

const A = 'a'.repeat(64)
const B = 'b'.repeat(64)

describe('gapErrors', () => {
  test("judges each gap against the server's send gap and lists the worst, signed, where they fell", () => {
    const log = parseSendLog(
      [
        JSON.stringify({ sha256: A, bodyBytes: 10, tokens: 4, sendMs: [0, 10, 20, 30] }),
        JSON.stringify({ sha256: B, bodyBytes: 10, tokens: 3, sendMs: [100, 110, 121] }),
      ].join('\n'),
      'sends.jsonl',
    )
    // Request 0's third chunk stamped 2 ms late: +2 then −2; request 1 level but for 0.5 ms on its first gap.
    const errors = gapErrors(
      [
        { sha256: A, gapsMs: [10, 12, 8] },
        { sha256: B, gapsMs: [10.5, 11] },
        { sha256: null, gapsMs: [50] },
      ],
      log,
    )
    expect(errors).toMatchObject({ requests: 3, matched: 2, incomplete: 0, gaps: 5 })
    expect(errors.errorMeanMs).toBeCloseTo((0 + 2 + 2 + 0.5 + 0) / 5, 9)
    expect(errors.firstGapSignedMeanMs).toBeCloseTo((0 + 0.5) / 2, 9)
    expect(errors.worst.slice(0, 3)).toEqual([
      { request: 0, gap: 1, errorMs: 2 },
      { request: 0, gap: 2, errorMs: -2 },
      { request: 1, gap: 0, errorMs: 0.5 },
    ])
    expect(errors.worst).toHaveLength(5)
  })
})
