/** The printed summary of a remote target's record: raw rows as before, network-adjusted rows and the probes' line beside them. */
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, test } from 'vitest'
import { networkAdjusted, rttSeries } from '../metrics/network.ts'
import { parseRunText } from '../record/record-io.ts'
import type { NetworkProbes, RunRecord } from '../schema/run.ts'
import { renderSummary } from './summary.ts'

const RECORD: RunRecord = parseRunText(
  readFileSync(join(import.meta.dirname, '../../fixtures/import/aiperf-run/profile_export_aiperf.json'), 'utf8'),
  'profile_export_aiperf.json',
  { from: 'aiperf' },
)

function withNetwork(http: number[], handshake: number[]): RunRecord {
  const probes = {
    host: '10.0.0.2:8000',
    intervalMs: 500,
    handshake: { before: rttSeries(handshake, 0), during: rttSeries(handshake, 1) },
    http: {
      endpoint: http.length === 0 ? null : ('/health' as const),
      reason: http.length === 0 ? 'neither endpoint answered 2xx (/health 404, /v1/models 401); only TCP handshakes were probed' : null,
      before: rttSeries(http, 0),
      during: rttSeries(http, 0),
    },
  }
  const network: NetworkProbes = { ...probes, adjusted: networkAdjusted(probes, RECORD.metrics.distributions) }
  return { ...RECORD, network }
}

describe('the summary of a remote record', () => {
  test('the raw rows stay; network-adjusted rows follow, with the line saying what they subtract', () => {
    const plain = renderSummary(RECORD)
    const text = renderSummary(withNetwork([19.9, 20, 20.1], [0.2]))
    // Every line of the loopback summary is still there, in order (the table's columns padded to its longer labels).
    const squeeze = (t: string) => t.split('\n').map((line) => line.replace(/\s+/g, ' ').trim())
    const lines = squeeze(text)
    let at = 0
    for (const line of squeeze(plain)) {
      at = lines.indexOf(line, at)
      expect(at, line).toBeGreaterThanOrEqual(0)
    }
    expect(text).toMatch(/^ttft ms \(network-adjusted\) +\d+ /m)
    expect(text).toMatch(/^e2e ms \(network-adjusted\) +\d+ /m)
    expect(text).toContain(
      'network to 10.0.0.2:8000: HTTP RTT (GET /health) before p50 20.00 ms (3), during p50 20.00 ms (3) · ' +
        'TCP handshake before p50 0.20 ms (1), during p50 0.20 ms (1, 1 failed) · ' +
        'network-adjusted rows subtract 20.00 ms, the HTTP RTT p50 before the cell; gates judge the raw rows',
    )
  })

  test('without an HTTP endpoint the handshake is subtracted, and the summary says why and which', () => {
    const text = renderSummary(withNetwork([], [0.3]))
    expect(text).toContain('HTTP not probed: neither endpoint answered 2xx (/health 404, /v1/models 401); only TCP handshakes were probed')
    expect(text).toContain('network-adjusted rows subtract 0.30 ms, the TCP handshake p50 before the cell')
  })
})
