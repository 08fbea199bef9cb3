import { ServegateError } from '../errors.ts'
import { computeCellMetrics } from '../metrics/cell-metrics.ts'
import { networkAdjusted } from '../metrics/network.ts'
import { readRunRecord } from '../record/record-io.ts'
import { REQUEST_METRIC_NAMES } from '../schema/run.ts'
import { parseFlags } from './flags.ts'
import type { CliIo } from './cli-io.ts'
import { renderSummary } from './summary.ts'

const SUMMARIZE_HELP = `servegate summarize FILE [--json] — recompute a run record's distributions from its per-request data

  FILE     a servegate.run/v1 or anvil-serving.benchmark/v1 record, a vLLM --save-result JSON or an SGLang bench_serving JSONL
           (summary-only imports are printed as the source summarized them, not recomputed)
  --json   print {"metrics": {NAME: {samples, mean, stddev, ci95Low, ci95High, min, p25, p50, p75, p90, p95, p99, max}}}
           and, for a remote target, "networkAdjusted": the record's network.adjusted recomputed`

/** `servegate summarize`: distributions recomputed from the requests, never copied from the file. */
export async function summarizeCommand(argv: string[], io: CliIo): Promise<number> {
  const { values, positionals } = parseFlags('summarize', argv, { json: { type: 'boolean' }, help: { type: 'boolean', short: 'h' } }, true)
  if (values.help === true) {
    io.stdout.write(`${SUMMARIZE_HELP}\n`)
    return 0
  }
  if (positionals.length !== 1) {
    throw new ServegateError(
      'CONFIG_INVALID',
      `summarize takes one run record file, got ${positionals.length}; run servegate summarize FILE [--json]`,
    )
  }
  const stored = await readRunRecord(positionals[0] as string)
  // A summary-only import has no requests to recompute from: its stored summary is all there is.
  const summaryOnly = stored.importedFrom?.perRequest === false
  // Goodput is recomputed under the SLO the record was judged by; open-loop dispatch facts are kept as measured.
  const recomputed = () => ({
    ...computeCellMetrics(stored.requests, stored.metrics.wallClockMs, stored.metrics.goodput?.slo ?? null),
    openLoop: stored.metrics.openLoop,
  })
  const metrics = summaryOnly ? stored.metrics : recomputed()
  // A remote target's network-adjusted figures follow the recomputed latencies.
  const network =
    stored.network === undefined ? {} : { network: { ...stored.network, adjusted: networkAdjusted(stored.network, metrics.distributions) } }
  const record = { ...stored, metrics, ...network }
  if (values.json === true) {
    const distributions = Object.fromEntries(REQUEST_METRIC_NAMES.map((name) => [name, record.metrics.distributions[name]]))
    // Remote targets only: TTFT and e2e less the network round trip, as the record's `network.adjusted` holds them.
    const adjusted = record.network === undefined ? {} : { networkAdjusted: record.network.adjusted }
    io.stdout.write(`${JSON.stringify({ metrics: distributions, ...adjusted }, null, 2)}\n`)
  } else {
    if (summaryOnly)
      io.stdout.write(`summary-only import from ${stored.importedFrom?.schema}: figures as the source summarized them, not recomputed\n`)
    io.stdout.write(`${renderSummary(record)}\n`)
  }
  return 0
}
