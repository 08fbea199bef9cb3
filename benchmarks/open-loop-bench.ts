/**
 * `npm run bench:open-loop [-- --quick] [-- --json FILE]`: how closely the open-loop dispatcher
 * holds its schedule. Poisson arrivals at rising rates against the simulated engine in a child
 * process pinned to another CPU (a fast engine: 2000 tok/s, no batch limit, 16-token replies, so
 * the engine never queues and every late send is the client's). Per rate: the send lag (scheduled
 * time to bytes on the socket) p50 / p99 / max, the event-loop delay p99, the client's CPU share,
 * and whether the cell was flagged harness-limited at the default bounds. Nothing here fails the run.
 */
import { writeFile } from 'node:fs/promises'
import { loadavg } from 'node:os'
import { parseArgs } from 'node:util'
import { runCell } from '../src/runner/measure-cell.ts'
import type { RunRecord } from '../src/schema/run.ts'
import { serverCpu } from './cpu.ts'
import { startServerProcess } from './servers/spawn.ts'

const { values } = parseArgs({ options: { quick: { type: 'boolean' }, json: { type: 'string' } } })
const RATES = values.quick === true ? [50, 200] : [50, 200, 500, 1000]
/** Each rate runs for about this long (and at least 200 requests). */
const SECONDS = values.quick === true ? 1 : 6

interface Row {
  ratePerS: number
  requests: number
  offeredRatePerS: number | null
  sendLagP50Ms: number | null
  sendLagP99Ms: number | null
  sendLagMaxMs: number | null
  eventLoopDelayP99Ms: number | null
  clientCpuShare: number | null
  harnessLimited: boolean
  reasons: string[]
}

function rowOf(ratePerS: number, r: RunRecord): Row {
  const lag = r.metrics.distributions.sendLagMs
  return {
    ratePerS,
    requests: r.requests.length,
    offeredRatePerS: r.plan.arrival?.offeredRatePerS ?? null,
    sendLagP50Ms: lag.p50,
    sendLagP99Ms: lag.p99,
    sendLagMaxMs: lag.max,
    eventLoopDelayP99Ms: r.harness.eventLoopDelayP99Ms,
    clientCpuShare: r.harness.clientCpuShare,
    harnessLimited: r.harness.harnessLimited,
    reasons: r.harness.reasons,
  }
}

const f = (v: number | null, digits = 2) => (v === null ? '—' : v.toFixed(digits))
const server = await startServerProcess(
  'sim',
  ['--model', 'm', '--decode-tok-per-s', '2000', '--prefill-tok-per-s', '1000000', '--batch-slowdown', '0'],
  { cpu: serverCpu() },
)
const rows: Row[] = []
try {
  console.log(
    `simulated engine ${server.origin} (pid ${server.pid}, ${server.cpu === null ? 'unpinned' : `CPU ${server.cpu}`}); ` +
      `load average ${loadavg()
        .map((l) => l.toFixed(2))
        .join(' ')}`,
  )
  console.log('| rate req/s | requests | offered | send lag p50 | p99 | max | event-loop p99 | client CPU | harness |')
  console.log('| --- | --- | --- | --- | --- | --- | --- | --- | --- |')
  for (const rate of RATES) {
    const requests = Math.max(200, Math.round(rate * SECONDS))
    const record = await runCell({
      baseUrl: server.origin,
      model: 'm',
      requests,
      warmupRequests: 8,
      maxTokens: 16,
      workload: { promptTokens: 64 },
      arrival: { kind: 'poisson', ratePerS: rate, seed: 1 },
    })
    const row = rowOf(rate, record)
    rows.push(row)
    console.log(
      `| ${rate} | ${row.requests} | ${f(row.offeredRatePerS, 1)} | ${f(row.sendLagP50Ms, 3)} ms | ` +
        `${f(row.sendLagP99Ms)} ms | ${f(row.sendLagMaxMs)} ms | ${f(row.eventLoopDelayP99Ms)} ms | ${f(row.clientCpuShare)} | ` +
        `${row.harnessLimited ? `limited: ${row.reasons.join('; ')}` : 'ok'} |`,
    )
  }
} finally {
  await server.close()
}
if (values.json !== undefined) await writeFile(values.json, `${JSON.stringify({ loadAverage: loadavg(), rows }, null, 2)}\n`)
