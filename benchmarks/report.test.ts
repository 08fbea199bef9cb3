import { expect, test } from 'vitest'
import { distribution } from '../src/metrics/distribution.ts'
import { type ClientBenchReport, type ItlLevel, judge, renderReport, SIDE_BY_SIDE_WITH_VLLM } from './report.ts'

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

/** An ITL level whose every ITL error is `itl`, client-only error `client` and server gap error `server`, ms. */
function itlLevel(concurrency: number, itl: number, client: number, server: number): ItlLevel {
  return {
    concurrency,
    requests: 4,
    okRequests: 4,
    deadlineMs: 3000,
    itlErrorMs: distribution([itl]),
    clientErrorMs: distribution([client]),
    serverErrorMs: distribution([server]),
    arrivalLatencyMs: distribution([0.1]),
    offeredTokens: 800,
    deliveredTokens: 800,
    deliveredShare: 1,
    cpuShare: 0.2,
    failures: [],
    foreignCpuCores: 0,
  }
}

test('an ITL target judges the client-only error where the server was off its own schedule, and says so', () => {
  const [onTime, late] = judge([], [itlLevel(64, 5.4, 3.7, 0.6), itlLevel(256, 7.0, 4.7, 3.3)])
  // The server kept its schedule: the ITL error is the client's, and it misses.
  expect(onTime).toEqual({ name: 'ITL error p99 C=64', target: '≤ 2 ms', value: '5.40 ms', pass: false })
  // The server's gaps were off by 3.3 ms p99: its lateness is not the client's, so 4.7 ms is judged against 10 ms.
  expect(late).toEqual({
    name: 'ITL error p99 C=256',
    target: '≤ 10 ms',
    value: '7.00 ms; server off by 3.30 ms p99, so client-only 4.70 ms',
    pass: true,
  })
  // Late server, client-only error still over: a miss all the same.
  expect(judge([], [itlLevel(64, 5.4, 3.7, 2.2)])[0]?.pass).toBe(false)
})
