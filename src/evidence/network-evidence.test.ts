/**
 * A remote arm in the evidence: its round trips and its TTFT and e2e less them, named
 * network-adjusted beside the raw rows; a loopback arm shows neither.
 */
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, test } from 'vitest'
import { sampleEvidence } from '../../fixtures/evidence-fixture.ts'
import { networkAdjusted, rttSeries } from '../metrics/network.ts'
import { formatSignificant } from '../number-format.ts'
import { parseRunText } from '../record/record-io.ts'
import type { NetworkProbes, RunRecord } from '../schema/run.ts'
import { armSummary } from './arm-summary.ts'
import { renderBoard } from './board.ts'
import { renderHtml } from './html.ts'

const RECORD: RunRecord = parseRunText(
  readFileSync(join(import.meta.dirname, '../../fixtures/import/aiperf-run/profile_export_aiperf.json'), 'utf8'),
  'profile_export_aiperf.json',
  { from: 'aiperf' },
)
const REF = { path: 'runs/c/cell-1.json', bytes: 1, sha256: 'a'.repeat(64) }

function remote(record: RunRecord): RunRecord {
  const probes = {
    host: '10.0.0.2:8000',
    intervalMs: 500,
    handshake: { before: rttSeries([0.1, 0.2, 0.3], 0), during: rttSeries([], 0) },
    http: { endpoint: '/health' as const, reason: null, before: rttSeries([19.5, 20, 20.5], 0), during: rttSeries([21], 0) },
  }
  const network: NetworkProbes = { ...probes, adjusted: networkAdjusted(probes, record.metrics.distributions) }
  return { ...record, network }
}

describe('a remote arm in the evidence', () => {
  test('its summary holds the round trips and the adjusted percentiles, raw less the HTTP p50', () => {
    const d = RECORD.metrics.distributions
    const summary = armSummary(remote(RECORD), 'cell', 1, REF)
    expect(summary.network).toEqual({
      host: '10.0.0.2:8000',
      httpEndpoint: '/health',
      httpRttP50Ms: 20,
      handshakeP50Ms: 0.2,
      estimator: 'http-p50-before',
      rttMs: 20,
      adjustedTtftMs: {
        p50: (d.ttftMs.p50 as number) - 20,
        p95: (d.ttftMs.p95 as number) - 20,
        p99: (d.ttftMs.p99 as number) - 20,
        samples: d.ttftMs.samples,
      },
      adjustedE2eMs: {
        p50: (d.e2eMs.p50 as number) - 20,
        p95: (d.e2eMs.p95 as number) - 20,
        p99: (d.e2eMs.p99 as number) - 20,
        samples: d.e2eMs.samples,
      },
    })
    // The raw timings stay as they were measured.
    expect(summary.timings.ttftMs.p50).toBe(d.ttftMs.p50)
    expect(armSummary(RECORD, 'cell', 1, REF)).not.toHaveProperty('network')
  })

  test('the page shows network-adjusted rows and what they subtract, only for a remote arm', () => {
    const index = sampleEvidence()
    const plain = renderHtml(index, '', [])
    expect(plain).not.toContain('network-adjusted')
    const cell = index.cells[0]
    if (cell === undefined) throw new Error('the sample evidence has cells')
    const arm = cell.arms[0]
    if (arm === undefined) throw new Error('the sample cell has arms')
    const summary = armSummary(remote(RECORD), 'cell', 1, REF).network
    cell.arms[0] = { ...arm, network: summary }
    const html = renderHtml(index, '', [])
    expect(html).toContain('TTFT, network-adjusted (ms)')
    expect(html).toContain('end to end, network-adjusted (ms)')
    expect(html).toContain(
      '→ 10.0.0.2:8000: HTTP RTT p50 20 ms (GET /health), TCP handshake p50 0.2 ms; network-adjusted rows subtract 20 ms (HTTP RTT p50 before the cell); gates judge the raw rows.',
    )
  })

  test('the board gets a network table for remote arms only, the latency table keeping the raw figures', () => {
    const index = sampleEvidence()
    expect(renderBoard(index, [])).not.toContain('## Network')
    const cell = index.cells[0]
    const arm = cell?.arms[0]
    if (cell === undefined || arm === undefined) throw new Error('the sample evidence has an arm')
    const network = armSummary(remote(RECORD), 'cell', 1, REF).network
    cell.arms[0] = { ...arm, network }
    const md = renderBoard(index, [])
    const ttft = network?.adjustedTtftMs
    expect(md).toContain(
      '## Network (remote arms, ms; network-adjusted = raw − subtracted: the HTTP RTT p50 before the cell, else the handshake p50)',
    )
    const row = md.split('\n').find((line) => line.includes('| 10.0.0.2:8000 |'))
    expect(row).toContain('| 20 (GET /health) | 0.2 | 20 |')
    const figures = (x: typeof ttft) => [x?.p50, x?.p95, x?.p99].map((v) => formatSignificant(v ?? null)).join(' / ')
    expect(row).toContain(`| ${figures(ttft)} | ${figures(network?.adjustedE2eMs)} |`)
  })
})
