import { describe, expect, test } from 'vitest'
import { GateDecision } from '../schema/gate.ts'
import { normalQuantile, studentTQuantile } from '../stats/distributions.ts'
import { around, failedRequest, launchOf, okRequest } from '../../fixtures/gate-fixture.ts'
import type { GateRecord } from './arms.ts'
import { MAX_REQUESTS_HINT, requestsHint } from './decide-hints.ts'
import { DEFAULT_WIN_ESTIMATOR } from './gate-options.ts'
import { winGate } from './win.ts'

const N = 64
const baseline = launchOf('decodeTokPerS', around(50, N, 0.1))
/** The baseline's prompts, `ratio` times as fast, with a little per-request noise of its own. */
const candidate = (ratio: number, noise = 0.02, n = N) =>
  launchOf(
    'decodeTokPerS',
    around(50, n, 0.1).map((v, i) => v * ratio * (1 + noise * Math.cos(2.3 * i))),
  )

describe('winGate', () => {
  test('a clear 10% decode win passes, with the effect, its interval, the rule and the method', () => {
    const d = winGate({ baseline, candidate: candidate(1.1) }, { gate: 'toWinDecode', margin: 0.05, launchNoise: 0 })
    expect(GateDecision.parse(d)).toEqual(d)
    expect(d).toMatchObject({ gate: 'toWinDecode', outcome: 'pass', kind: 'superiority', metric: 'decodeTokPerS', moreRequestsHint: null })
    expect(d.effect.estimate).toBeCloseTo(1.1, 2)
    expect(d.effect.low as number).toBeGreaterThan(1.05)
    expect(d.effect.high as number).toBeGreaterThan(d.effect.estimate as number)
    expect(d.effect).toMatchObject({ unit: 'ratio', confidence: 0.98 })
    expect(d.effect.method).toMatch(/^Hodges–Lehmann pseudo-median of 64 paired log-ratios, Wilcoxon signed-rank interval/)
    expect(d.rule).toBe(
      'pass if the lower bound of the 98% interval of candidate/baseline decode tok/s (a one-sided 99% bound) exceeds 1.050; fail if its upper bound is below 1.050; otherwise inconclusive',
    )
    expect(d.samples).toEqual({ baseline: 64, candidate: 64, paired: 64 })
    expect(d.warnings.join(' ')).toMatch(/launchNoise is 0/)
  })

  test('a clear slowdown fails (confidently not a win); a margin-sized win is inconclusive', () => {
    expect(winGate({ baseline, candidate: candidate(0.9) }, { gate: 'toWinDecode', launchNoise: 0 }).outcome).toBe('fail')
    const d = winGate({ baseline, candidate: candidate(1.05, 0.05) }, { gate: 'toWinDecode', margin: 0.05, launchNoise: 0 })
    expect(d.outcome).toBe('inconclusive')
  })

  test('inconclusive: moreRequestsHint asks for more paired requests than it had', () => {
    const d = winGate({ baseline, candidate: candidate(1.01, 0.1) }, { gate: 'toWinDecode', launchNoise: 0 })
    expect(d.outcome).toBe('inconclusive')
    expect(d.moreRequestsHint as number).toBeGreaterThan(64)
    expect(d.moreRequestsHint as number).toBeLessThanOrEqual(MAX_REQUESTS_HINT)
  })

  test('the default launch-noise floor (2% per launch) holds back a 3% win that one launch cannot prove', () => {
    const tight = candidate(1.03, 0.005)
    expect(winGate({ baseline, candidate: tight }, { gate: 'toWinDecode', launchNoise: 0 }).outcome).toBe('pass')
    const d = winGate({ baseline, candidate: tight }, { gate: 'toWinDecode' })
    expect(d.outcome).toBe('inconclusive')
    expect(d.moreRequestsHint).toBeNull()
    expect(d.warnings.join(' ')).toMatch(/launch-noise floor .* repeat launches/)
    expect(d.effect.method).toMatch(/launch noise 2% per launch added in quadrature/)
    // The floor widens the log interval to at least z·√(2·0.02²) on each side.
    const z = normalQuantile(0.99)
    expect(Math.log(d.effect.high as number) - Math.log(d.effect.estimate as number)).toBeGreaterThanOrEqual(
      z * Math.sqrt(2) * 0.02 - 1e-12,
    )
  })

  test('pairs by index: failed requests and requests on one arm only are left out', () => {
    const b = { requests: [...baseline.requests, okRequest(100, { decodeTokPerS: 10 }), failedRequest(101)] }
    const c = { requests: [failedRequest(0), ...candidate(1.1).requests.slice(1), okRequest(101, { decodeTokPerS: 99 })] }
    const d = winGate({ baseline: b, candidate: c }, { gate: 'toWinDecode', launchNoise: 0 })
    expect(d.samples).toEqual({ baseline: 65, candidate: 64, paired: 63 })
    expect(d.warnings.join(' ')).toMatch(/2 request\(s\) with decodeTokPerS on one arm only/)
  })

  test('too few pairs: inconclusive without an interval, asking for at least 16', () => {
    const d = winGate(
      { baseline: launchOf('decodeTokPerS', [1, 2, 3]), candidate: launchOf('decodeTokPerS', [2, 3, 4]) },
      { gate: 'toWinDecode' },
    )
    expect(d.outcome).toBe('inconclusive')
    expect(d.effect).toMatchObject({ estimate: null, low: null, high: null, confidence: null })
    expect(d.moreRequestsHint).toBe(16)
  })

  test('prefill and per-request throughput read their own metrics; that throughput is completion tokens per second of e2e', () => {
    const requests = (ratio: number) =>
      Array.from({ length: 32 }, (_, i) =>
        okRequest(i, {
          completionTokens: 100 + i,
          e2eMs: ((1000 + 10 * i) / ratio) * (1 + 0.01 * Math.sin(i)),
          effectivePrefillTokPerS: 5000 * ratio,
        }),
      )
    const d = winGate(
      { baseline: { requests: requests(1) }, candidate: { requests: requests(1.2) } },
      { gate: 'toWinThroughput', metric: 'throughputTokPerS', launchNoise: 0 },
    )
    expect(d.metric).toBe('throughputTokPerS')
    expect(d.effect.estimate).toBeCloseTo(1.2, 2)
    expect(
      winGate({ baseline: { requests: requests(1) }, candidate: { requests: requests(1.2) } }, { gate: 'toWinPrefill', launchNoise: 0 })
        .effect.estimate,
    ).toBeCloseTo(1.2, 10)
  })

  test('prefill is judged by the Hodges–Lehmann pseudo-median: stalls on one arm do not hide a 10% win', () => {
    const b = launchOf('effectivePrefillTokPerS', around(5000, N, 0.1))
    // 10% faster, except four requests that hit a scheduler stall and took four times as long.
    const c = launchOf(
      'effectivePrefillTokPerS',
      b.requests.map(
        (r, i) =>
          ((r as { effectivePrefillTokPerS: number }).effectivePrefillTokPerS * 1.1 * (1 + 0.02 * Math.cos(2.3 * i))) /
          (i % 16 === 5 ? 4 : 1),
      ),
    )
    const robust = winGate({ baseline: b, candidate: c }, { gate: 'toWinPrefill', margin: 0.05, launchNoise: 0 })
    expect(robust.outcome).toBe('pass')
    expect(robust.effect.estimate).toBeCloseTo(1.1, 2)
    expect(robust.effect.method).toMatch(/^Hodges–Lehmann pseudo-median of 64 paired log-ratios, Wilcoxon signed-rank interval \(exact;/)
    const mean = winGate({ baseline: b, candidate: c }, { gate: 'toWinPrefill', margin: 0.05, launchNoise: 0, estimator: 'geometric-mean' })
    expect(mean.effect.estimate as number).toBeLessThan(1.02)
    expect(mean.outcome).not.toBe('pass')
  })

  test('the default estimators are the ones chosen by measured power (npm run bench:gate, docs/gates.md)', () => {
    expect(DEFAULT_WIN_ESTIMATOR).toEqual({
      toWinDecode: 'hodges-lehmann',
      toWinPrefill: 'hodges-lehmann',
      toWinThroughput: 'hodges-lehmann',
    })
  })

  test('decode is judged by the Hodges–Lehmann pseudo-median: preempted requests on one arm do not hide a 15% win', () => {
    // 15% faster, except four requests whose decode KV-cache preemption and recompute slowed to 0.3×.
    const c = launchOf(
      'decodeTokPerS',
      baseline.requests.map(
        (r, i) => (r as { decodeTokPerS: number }).decodeTokPerS * 1.15 * (1 + 0.02 * Math.cos(2.3 * i)) * (i % 16 === 7 ? 0.3 : 1),
      ),
    )
    const robust = winGate({ baseline, candidate: c }, { gate: 'toWinDecode' })
    expect(robust.outcome).toBe('pass')
    expect(robust.effect.estimate).toBeCloseTo(1.15, 2)
    expect(robust.effect.method).toMatch(/^Hodges–Lehmann pseudo-median of 64 paired log-ratios/)
    const mean = winGate({ baseline, candidate: c }, { gate: 'toWinDecode', estimator: 'geometric-mean' })
    expect(mean.effect.estimate as number).toBeLessThan(1.08)
    expect(mean.outcome).not.toBe('pass')
  })

  test('an inconclusive Hodges–Lehmann gate sizes more requests from its own interval', () => {
    const b = launchOf('effectivePrefillTokPerS', around(5000, 32, 0.1))
    const c = launchOf(
      'effectivePrefillTokPerS',
      b.requests.map((r, i) => (r as { effectivePrefillTokPerS: number }).effectivePrefillTokPerS * 1.02 * (1 + 0.1 * Math.cos(2.3 * i))),
    )
    const d = winGate({ baseline: b, candidate: c }, { gate: 'toWinPrefill', launchNoise: 0 })
    expect(d.outcome).toBe('inconclusive')
    expect(d.moreRequestsHint as number).toBeGreaterThan(32)
  })

  test('sequential looks: a plain 20% win stops at the first look with a stricter confidence', () => {
    const c = candidate(1.2, 0.02, 128)
    const b = launchOf('decodeTokPerS', around(50, 128, 0.1))
    const d = winGate({ baseline: b, candidate: c }, { gate: 'toWinDecode', launchNoise: 0, looks: [16, 32, 64, 128] })
    expect(d.outcome).toBe('pass')
    expect(d.rule).toMatch(/decided at look 1 of 4 \(16 paired requests\)/)
    expect(d.effect.confidence as number).toBeGreaterThan(0.98)
    expect(d.effect.method).toMatch(/group-sequential look 1 of 4/)
    expect(d.effect.method).toMatch(/Hodges–Lehmann pseudo-median of 16 paired log-ratios/)
  })

  test('sequential looks: with no effect it runs to the last look, at all the paired requests', () => {
    const b = launchOf('decodeTokPerS', around(50, 100, 0.1))
    const c = launchOf(
      'decodeTokPerS',
      around(50, 100, 0.1).map((v, i) => v * (1 + 0.05 * Math.cos(2.3 * i))),
    )
    const d = winGate({ baseline: b, candidate: c }, { gate: 'toWinDecode', launchNoise: 0, looks: [16, 32, 64, 128] })
    expect(d.outcome).toBe('inconclusive')
    expect(d.rule).toMatch(/looks at 16, 32, 64, 100 requests of the plan .* undecided after look 4 of 4 \(100 paired requests\)/)
  })

  test('the same input and seed give the same decision; another seed may move the bounds', () => {
    const pair = { baseline, candidate: candidate(1.04, 0.06) }
    const options = { gate: 'toWinDecode', estimator: 'geometric-mean' } as const
    expect(winGate(pair, options)).toEqual(winGate(pair, options))
    expect(winGate(pair, { ...options, seed: 2 }).effect.method).toMatch(/seed 2/)
  })

  test('repeated launches: the launch-level t-test on per-launch locations of the prompt-centred logs', () => {
    const launches = (ratio: number, k: number) =>
      Array.from({ length: k }, (_, j) => launchOf('decodeTokPerS', around(50 * ratio * (1 + 0.01 * Math.sin(j * 2.1)), 32, 0.1)))
    const d = winGate({ baseline: launches(1, 4), candidate: launches(1.15, 4) }, { gate: 'toWinDecode', looks: [16] })
    expect(d.outcome).toBe('pass')
    expect(d.effect.estimate).toBeCloseTo(1.15, 2)
    expect(d.effect.method).toMatch(
      /launch level: per-launch Hodges–Lehmann pseudo-medians of the log rate, each prompt centred on its mean over all launches; t-interval of the mean log over 4 candidate and 4 baseline launches \(pooled df 6, equal launches per arm\)/,
    )
    expect(d.rule).toMatch(/^launch level:/)
    expect(d.warnings.join(' ')).toMatch(/looks are ignored/)
    expect(d.samples).toEqual({ baseline: 128, candidate: 128, paired: 128 })
    const unsure = winGate({ baseline: launches(1, 3), candidate: launches(1.01, 3) }, { gate: 'toWinDecode', margin: 0.05 })
    expect(unsure.outcome).not.toBe('pass')
  })

  test('launch level: prompts that differ a lot do not leak into the launches when each launch lost different ones', () => {
    // Prompt speeds spread 3× apart; every launch failed a different quarter of the prompts.
    const prompts = Array.from({ length: 32 }, (_, i) => 50 * Math.exp(0.6 * Math.sin(2.7 * i)))
    const launch = (ratio: number, k: number): GateRecord => ({
      requests: prompts.map((p, i) =>
        (i + 3 * k) % 4 === 0 ? failedRequest(i) : okRequest(i, { decodeTokPerS: p * ratio * (1 + 0.01 * Math.sin(1.1 * i + k)) }),
      ),
    })
    const arm = (ratio: number, from: number) => [0, 1, 2, 3].map((k) => launch(ratio, from + k))
    const same = winGate({ baseline: arm(1, 0), candidate: arm(1, 4) }, { gate: 'toWinDecode' })
    expect(Math.abs(Math.log(same.effect.estimate as number))).toBeLessThan(0.005)
    expect((same.effect.high as number) / (same.effect.low as number)).toBeLessThan(1.03)
    expect(winGate({ baseline: arm(1, 0), candidate: arm(1.05, 4) }, { gate: 'toWinDecode' }).outcome).toBe('pass')
  })

  test('one launch against several is refused; so are bad options, naming the gate and the field', () => {
    expect(() => winGate({ baseline, candidate: [baseline, baseline] }, { gate: 'toWinDecode' })).toThrow(
      /toWinDecode: the launch-level test needs at least two launches per arm/,
    )
    expect(() => winGate({ baseline, candidate: baseline }, { gate: 'toWinDecode', confidence: 1.5 })).toThrow(TypeError)
    expect(() => winGate({ baseline, candidate: baseline }, { gate: 'toWinDecode', confidence: 1.5 })).toThrow(
      /toWinDecode: invalid options[\s\S]*confidence/,
    )
    // @ts-expect-error a gate that is not a win gate
    expect(() => winGate({ baseline, candidate: baseline }, { gate: 'toWinLatency' })).toThrow(/gate/)
  })
})

describe('requestsHint', () => {
  test('n = s² / ((gap/z)² − v): the half-width at n equals the gap', () => {
    const z = normalQuantile(0.99)
    const n = requestsHint(0.02, 0.1, 0.98, 0, 10) as number
    expect(n).toBe(Math.ceil((0.1 / (0.02 / z)) ** 2))
    expect((z * 0.1) / Math.sqrt(n)).toBeLessThanOrEqual(0.02)
    expect((z * 0.1) / Math.sqrt(n - 1)).toBeGreaterThan(0.02)
  })

  test('null at the threshold or when the floor alone is wider; capped; never at or below the current count', () => {
    expect(requestsHint(0, 0.1, 0.98, 0, 10)).toBeNull()
    expect(requestsHint(0.02, 0.1, 0.98, 2 * 0.02 ** 2, 10)).toBeNull()
    expect(requestsHint(1e-6, 0.1, 0.98, 0, 10)).toBe(MAX_REQUESTS_HINT)
    expect(requestsHint(0.5, 0.01, 0.98, 0, 40)).toBe(41)
  })
})

describe('winGate on a sequential design the records carry', () => {
  const design = (stoppedAt: number) => ({ looks: [16, 32, 64], plannedRequests: 64, stopWhen: [], stoppedAt, reason: 'test' })
  const arm = (ratio: number, n: number, failedBelow = 0) => ({
    requests: around(50, n, 0.1).map((v, i) =>
      i < failedBelow ? failedRequest(i) : okRequest(i, { decodeTokPerS: v * ratio * (1 + 0.02 * Math.cos(2.3 * i)) }),
    ),
    plan: { sequential: design(n) },
  })

  test('a pair stopped before its first look is inconclusive without an interval, not an error', () => {
    const d = winGate({ baseline: arm(1, 10), candidate: arm(1.5, 10) }, { gate: 'toWinDecode', launchNoise: 0 })
    expect(d.outcome).toBe('inconclusive')
    expect(d.effect.estimate).toBeNull()
    expect(d.warnings.join(' ')).toMatch(
      /only 10 paired request\(s\) with decodeTokPerS and the records end before the design's first look at 16/,
    )
  })

  test('a look with too few pairs is passed over; the next one decides and keeps its place in the design', () => {
    // The first 12 requests failed on both arms: the look at 16 has 4 pairs, the look at 32 has 20.
    const d = winGate({ baseline: arm(1, 32, 12), candidate: arm(1.5, 32, 12) }, { gate: 'toWinDecode', launchNoise: 0 })
    expect(d.outcome).toBe('pass')
    expect(d.rule).toMatch(/decided at look 2 of 3 \(20 paired requests\)/)
  })
})

describe('what decides an undecided win', () => {
  test('more paired requests, from the spread seen: decideHint names requests, as moreRequestsHint counts them', () => {
    const d = winGate({ baseline, candidate: candidate(1.01, 0.1) }, { gate: 'toWinDecode', launchNoise: 0 })
    const n = d.moreRequestsHint as number
    expect(d.decideHint).toEqual({
      set: { requests: n },
      text: `to decide it, set requests: ${n} (about ${n} paired requests per arm would likely decide it at the spread seen over 64)`,
    })
  })

  test('the launch-noise floor wider than the gap: repeats, sized by the launch-level t-interval at the floor', () => {
    const d = winGate({ baseline, candidate: candidate(1.03, 0.005) }, { gate: 'toWinDecode' })
    expect(d.moreRequestsHint).toBeNull()
    const r = d.decideHint?.set.repeats as number
    expect(Object.keys(d.decideHint?.set ?? {})).toEqual(['repeats'])
    expect(d.decideHint?.text).toBe(
      `to decide it, set repeats: ${r} (more requests cannot narrow the launch-noise floor of 2% per launch; ` +
        `about ${r} launches per arm, alternated A B B A, would likely decide it)`,
    )
    // One launch's sd is at least the 2% floor: r is at least where the t half-width at 2% falls below the gap.
    const gap = Math.abs(Math.log(d.effect.estimate as number)) // against the default margin 0
    const half = (k: number) => studentTQuantile(0.99, 2 * k - 2) * 0.02 * Math.sqrt(2 / k)
    const least = Array.from({ length: 64 }, (_, k) => k + 2).find((k) => half(k) < gap) as number
    expect(r).toBeGreaterThanOrEqual(least)
    expect(r).toBeLessThanOrEqual(least + 2)
  })

  test('launch level: more launches per arm than now, at the launch-to-launch sd seen', () => {
    const launches = (ratio: number, k: number) =>
      Array.from({ length: k }, (_, j) => launchOf('decodeTokPerS', around(50 * ratio * (1 + 0.02 * Math.sin(j * 2.1)), 32, 0.1)))
    const d = winGate({ baseline: launches(1, 3), candidate: launches(1.06, 3) }, { gate: 'toWinDecode', margin: 0.03 })
    expect(d.outcome).toBe('inconclusive')
    expect(d.decideHint?.set.repeats as number).toBeGreaterThan(3)
    expect(d.decideHint?.text).toMatch(
      /^to decide it, set repeats: \d+ \(about \d+ launches per arm would likely decide it \(launch-to-launch sd/,
    )
  })

  test('a decided gate names nothing', () => {
    expect(winGate({ baseline, candidate: candidate(1.1) }, { gate: 'toWinDecode', launchNoise: 0 }).decideHint).toBeNull()
  })
})
