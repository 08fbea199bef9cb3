import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, test } from 'vitest'
import { rttSeries } from '../metrics/network.ts'
import { parseRunText } from '../record/record-io.ts'
import type { NetworkProbes, RunRecord } from '../schema/run.ts'
import { pairMismatches } from './fairness.ts'
import { networkMismatches, NETWORK_RTT_BOUND_TEXT, rttsDiffer } from './network-pair.ts'

/** A record to pair (AIPerf's aggregate, imported): the network facts are what each test varies. */
const RECORD: RunRecord = parseRunText(
  readFileSync(join(import.meta.dirname, '../../fixtures/import/aiperf-run/profile_export_aiperf.json'), 'utf8'),
  'profile_export_aiperf.json',
  { from: 'aiperf' },
)

/** A remote arm's probes: HTTP round trips before the cell of about `httpMs` (none: no HTTP endpoint answered). */
function network(httpMs: number | null, handshakeMs = 0.1): NetworkProbes {
  const http = httpMs === null ? [] : [httpMs - 0.1, httpMs, httpMs + 0.1]
  return {
    host: '10.0.0.2:8000',
    intervalMs: 500,
    handshake: { before: rttSeries([handshakeMs], 0), during: rttSeries([], 0) },
    http: {
      endpoint: httpMs === null ? null : '/health',
      reason: httpMs === null ? 'neither endpoint answered 2xx' : null,
      before: rttSeries(http, 0),
      during: rttSeries([], 0),
    },
    adjusted: null,
  }
}

const arm = (probes: NetworkProbes | undefined): RunRecord => (probes === undefined ? RECORD : { ...RECORD, network: probes })
const networkFindings = (baseline: RunRecord, candidate: RunRecord) =>
  pairMismatches({ baseline: [baseline], candidate: [candidate] }).filter((f) => f.startsWith('network'))

describe('the pair check on network paths', () => {
  test('a pair with 0 ms against 20 ms of RTT is refused, naming both figures and the bound', () => {
    expect(networkFindings(arm(network(0.1)), arm(network(20)))).toEqual([
      `network RTT: the arms' paths differ by more than ${NETWORK_RTT_BOUND_TEXT} ` +
        '(baseline HTTP RTT p50 0.10 ms, candidate HTTP RTT p50 20.00 ms)',
    ])
  })

  test('one arm remote, the other on loopback, is refused naming which is which', () => {
    expect(networkFindings(arm(undefined), arm(network(20)))).toEqual([
      'network path: one arm remote, the other loopback (baseline loopback (no network probes), candidate HTTP RTT p50 20.00 ms)',
    ])
  })

  test('two loopback arms, and two alike paths, are matched', () => {
    expect(networkFindings(arm(undefined), arm(undefined))).toEqual([])
    expect(networkFindings(arm(network(20)), arm(network(21.5)))).toEqual([])
  })

  test('the bound: the larger of 2 ms and 25% of the larger RTT', () => {
    expect(NETWORK_RTT_BOUND_TEXT).toBe('max(2 ms, 25% of the larger)')
    expect(rttsDiffer(0, 2)).toBe(false)
    expect(rttsDiffer(0, 2.01)).toBe(true)
    expect(rttsDiffer(75, 100)).toBe(false)
    expect(rttsDiffer(74.9, 100)).toBe(true)
  })

  test('round trips measured by different probes, or by none, are not compared as if alike', () => {
    expect(networkFindings(arm(network(null, 0.2)), arm(network(0.2)))).toEqual([
      'network RTT: measured by different probes, so not comparable (baseline TCP handshake RTT p50 0.20 ms, candidate HTTP RTT p50 0.20 ms)',
    ])
    const silent: NetworkProbes = { ...network(null), handshake: { before: rttSeries([], 10), during: rttSeries([], 0) } }
    expect(
      networkMismatches([
        { label: 'baseline', r: { network: silent } },
        { label: 'candidate', r: { network: network(1) } },
      ]),
    ).toEqual(['network RTT: unknown for baseline (no probe answered), so the paths cannot be compared'])
  })

  test('every launch counts: a repeated arm whose second launch crossed another path is refused', () => {
    const findings = pairMismatches({ baseline: [arm(network(5)), arm(network(30))], candidate: [arm(network(5)), arm(network(5))] })
    expect(findings.filter((f) => f.startsWith('network'))).toEqual([
      `network RTT: the arms' paths differ by more than ${NETWORK_RTT_BOUND_TEXT} (baseline launch 1 HTTP RTT p50 5.00 ms, ` +
        'baseline launch 2 HTTP RTT p50 30.00 ms, candidate launch 1 HTTP RTT p50 5.00 ms, candidate launch 2 HTTP RTT p50 5.00 ms)',
    ])
  })
})
