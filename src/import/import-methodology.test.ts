import { describe, expect, test } from 'vitest'
import { type ImportFacts, methodologyOf } from './import-methodology.ts'

const facts: ImportFacts = {
  tool: 'Tool',
  read: 'a Tool results file (line 2)',
  notes: ['every request released at once'],
  definitions: { ttft: "Tool's ttft: send to the first chunk" },
  failureRule: 'a request failed when its error is non-empty',
}

describe("methodologyOf writes an import's methodology from its facts", () => {
  test('per request: the definitions, the failure rule, and an import line naming what was read', () => {
    expect(methodologyOf(facts, { perRequest: true })).toEqual({
      ttft: "Tool's ttft: send to the first chunk",
      failures: 'a request failed when its error is non-empty',
      import:
        'imported from a Tool results file (line 2); every request released at once; ' +
        "per-request values converted seconds → ms, distributions recomputed by servegate's rules over the ok requests",
    })
  })

  test('summary-only with a failed count: where the count came from, and no failure codes', () => {
    const m = methodologyOf(
      { ...facts, perRequestHint: 'keep the details to import per request' },
      { perRequest: false, failed: { count: 3, from: "Tool's failed" } },
    )
    expect(m.failedCount).toBe("Tool's failed (3)")
    expect(m.failures).toBe('failure codes are unknown in a summary-only import, so failures is empty')
    expect(m.distributions).toMatch(/^summary-only: each distribution holds only what Tool summarized/)
    expect(m.import).toBe(
      'summary-only import of a Tool results file (line 2); every request released at once; ' +
        'requests is empty and nothing per-request is invented; keep the details to import per request',
    )
  })

  test('summary-only without a failed count: says it was not recorded and that failed is null', () => {
    const m = methodologyOf(facts, { perRequest: false, failed: { count: null, why: 'Tool writes no failed count' } })
    expect(m.failedCount).toBe('not recorded: Tool writes no failed count, so failed is null')
  })

  test("a source's own definition replaces the summary-only default", () => {
    const m = methodologyOf(
      { ...facts, definitions: { distributions: "Tool's own summaries" } },
      { perRequest: false, failed: { count: 0, from: 'x' } },
    )
    expect(m.distributions).toBe("Tool's own summaries")
  })
})
