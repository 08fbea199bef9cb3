import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, test } from 'vitest'
import { parseRunText } from '../record/record-io.ts'
import type { RunRecord } from '../schema/run.ts'
import { pairMismatches } from './fairness.ts'

/** AIPerf's aggregate (fixtures/import/README.md), summary-only: it records its total input tokens as `total_isl`. */
const AGGREGATE = JSON.parse(
  readFileSync(join(import.meta.dirname, '../../fixtures/import/aiperf-run/profile_export_aiperf.json'), 'utf8'),
) as Record<string, unknown>

function aiperf(aggregate: Record<string, unknown>): RunRecord {
  return parseRunText(JSON.stringify(aggregate), 'profile_export_aiperf.json', { from: 'aiperf' })
}

const inputTokens = (findings: string[]) => findings.filter((f) => f.startsWith('input tokens'))

describe('the input tokens of a pair', () => {
  const { total_isl: _, ...withoutTotal } = AGGREGATE
  const known = aiperf(AGGREGATE)
  const unknown = aiperf(withoutTotal)

  test('two launches whose sources never recorded their input tokens are not called equal: a finding that they cannot be compared', () => {
    expect(unknown.metrics.totalPromptTokens).toBeNull()
    expect(inputTokens(pairMismatches({ baseline: [unknown], candidate: [unknown] }))).toEqual([
      "input tokens: unknown for baseline, candidate (its source recorded no total input tokens), so the arms' input tokens cannot be compared",
    ])
  })

  test('one arm unknown is the same finding, naming that arm', () => {
    expect(inputTokens(pairMismatches({ baseline: [known], candidate: [unknown] }))).toEqual([
      "input tokens: unknown for candidate (its source recorded no total input tokens), so the arms' input tokens cannot be compared",
    ])
  })

  test('summary-only launches with their totals recorded compare the totals', () => {
    const total = known.metrics.totalPromptTokens as number
    expect(inputTokens(pairMismatches({ baseline: [known], candidate: [known] }))).toEqual([])
    const more = aiperf({ ...AGGREGATE, total_isl: { unit: 'tokens', avg: total + 1 } })
    expect(inputTokens(pairMismatches({ baseline: [known], candidate: [more] }))).toEqual([
      `input tokens: the totals differ (baseline ${total}, candidate ${total + 1})`,
    ])
  })
})
