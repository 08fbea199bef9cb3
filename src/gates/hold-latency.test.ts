import { describe, expect, test } from 'vitest'
import { GateDecision } from '../schema/gate.ts'
import { around, launchOf, okRequest } from '../../fixtures/gate-fixture.ts'
import { holdLatencyGate } from './hold-latency.ts'

const N = 120
const baselineTtft = launchOf('ttftMs', around(200, N, 0.3))
/** The baseline's TTFTs scaled by `ratio`, with a little noise of their own. */
const candidateTtft = (ratio: number, noise = 0.02) =>
  launchOf(
    'ttftMs',
    around(200, N, 0.3).map((v, i) => v * ratio * (1 + noise * Math.cos(2.3 * i))),
  )

describe('holdLatencyGate: notWorseThanPct', () => {
  test('a 50% slower p95 TTFT fails, with the ratio of nearest-rank percentiles and its interval', () => {
    const d = holdLatencyGate(
      { baseline: baselineTtft, candidate: candidateTtft(1.5) },
      { metric: 'ttft', percentile: 95, notWorseThanPct: 10, launchNoise: 0 },
    )
    expect(GateDecision.parse(d)).toEqual(d)
    expect(d).toMatchObject({
      gate: 'toHoldLatency',
      outcome: 'fail',
      kind: 'non-regression',
      metric: 'ttftMs p95',
      moreRequestsHint: null,
    })
    expect(d.effect.estimate).toBeCloseTo(1.5, 1)
    expect(d.effect.low as number).toBeGreaterThan(1.1)
    expect(d.effect.method).toMatch(
      /ratio of percentiles over 120 paired requests \(pairs resampled together\), nearest-rank p95, BCa bootstrap/,
    )
    expect(d.rule).toBe(
      'fail if the lower bound of the 98% interval of candidate/baseline TTFT p95 (a one-sided 99% bound) exceeds 1.100 (a regression beyond 10%); pass if its upper bound is at most 1.100; otherwise inconclusive, which passes with a warning',
    )
  })

  test('a faster candidate passes; a regression near the tolerance is inconclusive with a warning', () => {
    expect(
      holdLatencyGate(
        { baseline: baselineTtft, candidate: candidateTtft(0.9) },
        { metric: 'ttft', percentile: 95, notWorseThanPct: 10, launchNoise: 0 },
      ).outcome,
    ).toBe('pass')
    const d = holdLatencyGate(
      { baseline: baselineTtft, candidate: candidateTtft(1.1, 0.1) },
      { metric: 'ttft', percentile: 50, notWorseThanPct: 10 },
    )
    expect(d.outcome).toBe('inconclusive')
    expect(d.warnings.join(' ')).toMatch(
      /inconclusive: the 98% interval \[\d\.\d{3}, \d\.\d{3}\] straddles the tolerance 1\.100; passes with this annotation/,
    )
  })

  test('p99 over fewer than 100 samples is flagged as descriptive only', () => {
    const d = holdLatencyGate(
      { baseline: baselineTtft, candidate: candidateTtft(1) },
      { metric: 'ttft', percentile: 99, notWorseThanPct: 10 },
    )
    expect(d.warnings.join(' ')).not.toMatch(/descriptive only/)
    const small = holdLatencyGate(
      { baseline: launchOf('ttftMs', around(200, 40, 0.3)), candidate: launchOf('ttftMs', around(200, 40, 0.3)) },
      { metric: 'ttft', percentile: 99, notWorseThanPct: 10 },
    )
    expect(small.warnings.join(' ')).toMatch(/p99 over 40 < 100 samples is descriptive only/)
  })

  test('arms with no prompts in common are resampled independently, with a warning', () => {
    const shifted = { requests: candidateTtft(1.5).requests.map((r) => ({ ...r, index: r.index + 1000 })) }
    const d = holdLatencyGate(
      { baseline: baselineTtft, candidate: shifted },
      { metric: 'ttft', percentile: 50, notWorseThanPct: 10, launchNoise: 0 },
    )
    expect(d.samples.paired).toBe(0)
    expect(d.effect.method).toMatch(/independent/)
    expect(d.warnings.join(' ')).toMatch(/resampled independently/)
    expect(d.outcome).toBe('fail')
  })

  test('ITL: whole requests (their gaps) are resampled; the percentile is over pooled gaps', () => {
    const gaps = (scale: number) => ({
      requests: Array.from({ length: 40 }, (_, i) => okRequest(i, { itlMs: around(20 * scale, 30, 0.2, i) })),
    })
    const d = holdLatencyGate(
      { baseline: gaps(1), candidate: gaps(1.3) },
      { metric: 'itl', percentile: 90, notWorseThanPct: 5, launchNoise: 0 },
    )
    expect(d.metric).toBe('itlMs p90')
    expect(d.effect.estimate).toBeCloseTo(1.3, 6)
    expect(d.outcome).toBe('fail')
    expect(d.effect.method).toMatch(/clusters of gaps/)
  })

  test('too few requests: not estimable, passes with an annotation', () => {
    const d = holdLatencyGate(
      { baseline: launchOf('tpotMs', [1, 2]), candidate: launchOf('tpotMs', [1, 2]) },
      { metric: 'tpot', notWorseThanPct: 5 },
    )
    expect(d.outcome).toBe('inconclusive')
    expect(d.effect.estimate).toBeNull()
    expect(d.warnings.join(' ')).toMatch(/not estimable/)
  })
})

describe('holdLatencyGate: atMostMs', () => {
  test('bounds the candidate alone, in ms, with one launch of noise (not two)', () => {
    const pass = holdLatencyGate({ baseline: baselineTtft, candidate: candidateTtft(1) }, { metric: 'ttft', percentile: 50, atMostMs: 400 })
    expect(pass).toMatchObject({ outcome: 'pass', metric: 'ttftMs p50' })
    expect(pass.effect.unit).toBe('ms')
    expect(pass.effect.method).toMatch(/candidate only/)
    expect(
      holdLatencyGate({ baseline: baselineTtft, candidate: candidateTtft(1) }, { metric: 'ttft', percentile: 50, atMostMs: 100 }).outcome,
    ).toBe('fail')
    expect(
      holdLatencyGate({ baseline: baselineTtft, candidate: candidateTtft(1) }, { metric: 'ttft', percentile: 50, atMostMs: 200 }).outcome,
    ).toBe('inconclusive')
  })
})

describe('holdLatencyGate: repeated launches', () => {
  test('the launch level: per-launch percentiles, a t-interval on their logs', () => {
    const launches = (ratio: number) => [0, 1, 2].map((j) => launchOf('tpotMs', around(20 * ratio * (1 + 0.01 * Math.sin(3 * j)), 40, 0.1)))
    const d = holdLatencyGate({ baseline: launches(1), candidate: launches(1.4) }, { metric: 'tpot', percentile: 50, notWorseThanPct: 5 })
    expect(d.outcome).toBe('fail')
    expect(d.effect.method).toMatch(
      /launch level: per-launch nearest-rank p50, t-interval of the mean log over 3 candidate and 3 baseline launches \(pooled df 4, equal launches per arm\)/,
    )
    const bound = holdLatencyGate({ baseline: launches(1), candidate: launches(1) }, { metric: 'tpot', percentile: 50, atMostMs: 30 })
    expect(bound).toMatchObject({ outcome: 'pass', effect: { unit: 'ms' } })
  })
})

describe('holdLatencyGate: options', () => {
  test('exactly one of notWorseThanPct or atMostMs, else a TypeError naming the gate', () => {
    expect(() => holdLatencyGate({ baseline: baselineTtft, candidate: baselineTtft }, { metric: 'ttft' })).toThrow(
      /toHoldLatency: invalid options[\s\S]*exactly one/,
    )
    expect(() =>
      holdLatencyGate({ baseline: baselineTtft, candidate: baselineTtft }, { metric: 'ttft', notWorseThanPct: 5, atMostMs: 10 }),
    ).toThrow(TypeError)
    const arms = { baseline: baselineTtft, candidate: baselineTtft }
    // @ts-expect-error percentile 80 is not offered
    expect(() => holdLatencyGate(arms, { metric: 'ttft', percentile: 80, notWorseThanPct: 5 })).toThrow(/percentile/)
  })
})

describe('holdLatencyGate: what would settle an inconclusive verdict', () => {
  test('about 10% slower against a 5% tolerance, with 2% launch noise: only more launches can settle it', () => {
    const d = holdLatencyGate(
      { baseline: baselineTtft, candidate: candidateTtft(1.1, 0) },
      { metric: 'ttft', percentile: 50, notWorseThanPct: 5, launchNoise: 0.02 },
    )
    expect(d.outcome).toBe('inconclusive')
    expect(d.warnings.join('\n')).toMatch(/passes with this annotation, only more launches would settle it/)
    expect(d.warnings.join('\n')).toMatch(/more requests cannot decide this; repeat launches on both arms/)
    expect(d.warnings.join('\n')).not.toMatch(/more requests would settle it/)
  })

  test('without launch noise the same gap is left to more requests', () => {
    const d = holdLatencyGate(
      { baseline: baselineTtft, candidate: candidateTtft(1.07) },
      { metric: 'ttft', percentile: 95, notWorseThanPct: 5, launchNoise: 0 },
    )
    if (d.outcome === 'inconclusive') expect(d.warnings.join('\n')).toMatch(/more requests would settle it/)
    expect(d.warnings.join('\n')).not.toMatch(/only more launches/)
  })
})

describe('holdLatencyGate: what decides an undecided verdict, in the options’ names', () => {
  test('the launch-noise floor wider than the gap: repeats; without it: requests', () => {
    const floor = holdLatencyGate(
      { baseline: baselineTtft, candidate: candidateTtft(1.1, 0) },
      { metric: 'ttft', percentile: 50, notWorseThanPct: 5, launchNoise: 0.02 },
    )
    expect(Object.keys(floor.decideHint?.set ?? {})).toEqual(['repeats'])
    expect(floor.decideHint?.text).toMatch(/^to decide it, set repeats: \d+ \(more requests cannot narrow the launch-noise floor of 2%/)
    const noisy = holdLatencyGate(
      { baseline: baselineTtft, candidate: candidateTtft(1.05, 0.1) },
      { metric: 'ttft', percentile: 50, notWorseThanPct: 5, launchNoise: 0 },
    )
    expect(noisy.outcome).toBe('inconclusive')
    expect(noisy.decideHint?.set.requests as number).toBeGreaterThan(N)
    expect(noisy.decideHint?.text).toMatch(/^to decide it, set requests: \d+ \(about \d+ paired requests per arm would likely decide it/)
  })
})
