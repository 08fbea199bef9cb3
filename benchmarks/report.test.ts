import { expect, test } from 'vitest'
import { distribution } from '../src/metrics/distribution.ts'
import { type ClientBenchReport, renderReport, SIDE_BY_SIDE_WITH_VLLM } from './report.ts'

const EMPTY_RUN: ClientBenchReport = {
  startedAt: '2026-12-01T00:00:00.000Z',
  quick: true,
  node: 'v24.21.0',
  cpus: 2,
  loadAvg1: { before: 0.1, after: 0.2 },
  wallS: 1,
  serverCpu: null,
  wakeLateMs: distribution([0.1, 0.2, 0.3]),
  micro: [],
  ingest: [],
  itl: [],
  targets: [],
}

test("the comparison with vLLM's client is the side-by-side measurement with its method, never a ratio to a constant", () => {
  const text = renderReport(EMPTY_RUN)
  expect(text).toContain(
    "Side by side with vLLM's client (an external measurement; medians [min–max]; -- --side-by-side reruns it with a vLLM-style client)",
  )
  expect(text).toContain(SIDE_BY_SIDE_WITH_VLLM.method)
  const escape = (text: string): string => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')
  for (const row of SIDE_BY_SIDE_WITH_VLLM.rows) {
    expect(text).toMatch(new RegExp(`${escape(row.figure)} +${escape(row.servegate)} +${escape(row.vllm)}$`, 'm'))
  }
  expect(text).not.toMatch(/÷ vLLM|78k|Orientation/)
})
