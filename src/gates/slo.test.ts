import { describe, expect, test } from 'vitest'
import { wilsonInterval } from '../stats/wilson.ts'
import { failedRequest, okRequest } from '../../fixtures/gate-fixture.ts'
import type { HarnessHealth, HarnessLimitExceeded } from '../schema/run.ts'
import { sloGate, sloRequestsHint } from './slo.ts'

const record = (ttfts: readonly number[], failed = 0) => ({
  requests: [
    ...ttfts.map((ttftMs, i) => okRequest(i, { ttftMs })),
    ...Array.from({ length: failed }, (_, i) => failedRequest(ttfts.length + i)),
  ],
  harness: {
    clientCpuMs: null,
    clientCpuShare: null,
    eventLoopDelayP99Ms: null,
    eventLoopDelayMaxMs: null,
    sendLagP99Ms: null,
    harnessLimited: false,
    reasons: [],
  },
  metrics: { wallClockMs: 4000 },
})

describe('sloGate', () => {
  test("the good share's Wilson interval at the gate's confidence decides; failed requests count as not good", () => {
    const d = sloGate(record(new Array(95).fill(100), 5), { ttftMs: 200, percentile: 80 })
    expect(d).toMatchObject({
      outcome: 'pass',
      kind: 'superiority',
      metric: 'good fraction (ttft ≤ 200 ms)',
      samples: { baseline: 0, candidate: 100, paired: 0 },
    })
    const z = 2.3263478740408408
    expect(d.effect).toMatchObject({ estimate: 0.95, unit: 'fraction', confidence: 0.98 })
    expect(d.effect.low).toBeCloseTo(wilsonInterval(95, 100, z).low as number, 12)
    expect(d.warnings).toEqual(['5 failed request(s) counted as not good'])
    expect(d.effect.method).toBe('Wilson score interval of 95 good of 100 measured request(s) over 4.00 s of wall clock: 23.75 good req/s')
  })

  test('launches are pooled, with a warning that launch variation is not in the interval', () => {
    const d = sloGate([record(new Array(60).fill(100)), record(new Array(60).fill(100))], { ttftMs: 200 })
    expect(d.samples.candidate).toBe(120)
    expect(d.warnings[0]).toMatch(/^2 launches pooled/)
  })

  test('a launch whose source recorded no wall clock leaves the pooled one unknown: the share is judged, no rate is given', () => {
    const unknown = { ...record(new Array(60).fill(100)), metrics: { wallClockMs: null } }
    const d = sloGate([record(new Array(60).fill(100)), unknown], { ttftMs: 200 })
    expect(d.samples.candidate).toBe(120)
    expect(d.effect.method).toBe('Wilson score interval of 120 good of 120 measured request(s)')
  })

  test('an empty record is inconclusive without a hint', () => {
    expect(sloGate(record([]), { ttftMs: 200 })).toMatchObject({
      outcome: 'inconclusive',
      moreRequestsHint: null,
      effect: { estimate: null },
    })
  })
})

describe('sloRequestsHint', () => {
  test('the fewest requests at which the same share would be decided', () => {
    // 39 of 40 good (97.5%) against 90%: at n the Wilson lower bound of 0.975·n good must reach 0.9.
    const n = sloRequestsHint(39, 40, 0.9, 0.98) as number
    const z = 2.3263478740408408
    expect(wilsonInterval(Math.round(0.975 * n), n, z).low as number).toBeGreaterThanOrEqual(0.9)
    expect(wilsonInterval(Math.round(0.975 * (n - 1)), n - 1, z).low as number).toBeLessThan(0.9)
    expect(sloRequestsHint(9, 10, 0.9, 0.98)).toBeNull()
  })
})

/** The same record, flagged harness-limited for each limit given. */
const limited = (r: ReturnType<typeof record>, exceeded: HarnessLimitExceeded[], workers?: HarnessHealth['workers']) => ({
  ...r,
  harness: {
    ...r.harness,
    harnessLimited: true,
    reasons: exceeded.map((e) => `${e.option} ${e.value} over ${e.limit}`),
    exceeded,
    ...(workers === undefined ? {} : { clientWorkers: workers.length, workers }),
  },
})
const sendLag = (value: number): HarnessLimitExceeded => ({ option: 'sendLagLimitMs', limit: 5, value, thread: 'cell' })

describe('what decides an undecided SLO gate', () => {
  test('24 requests cannot show 90% at 98% confidence: the hint says so and names the count that can', () => {
    const d = sloGate(record(new Array(24).fill(100)), { ttftMs: 200, percentile: 90 })
    expect(d.outcome).toBe('inconclusive')
    // n/(n + z²) ≥ 0.9 first holds at 49 when every request is good.
    expect(d.decideHint).toEqual({
      set: { requests: 49 },
      text:
        'to decide it, set requests: 49 (24 requests cannot show 90% good at 98% confidence even if every one is good, ' +
        'which takes at least 49; about 49 would likely decide it at the 100.0% good seen)',
    })
    expect(d.moreRequestsHint).toBe(49)
    expect(sloGate(record(new Array(49).fill(100)), { ttftMs: 200, percentile: 90 }).outcome).toBe('pass')
  })

  test('a share that more requests would decide names them, without the "cannot" clause once the count could show it', () => {
    const ttfts = [...new Array(58).fill(100), 900, 900]
    const d = sloGate(record(ttfts), { ttftMs: 200, percentile: 90 })
    expect(d.outcome).toBe('inconclusive')
    const n = d.decideHint?.set.requests as number
    expect(n).toBe(sloRequestsHint(58, 60, 0.9, 0.98))
    expect(d.decideHint?.text).toBe(`to decide it, set requests: ${n} (about ${n} would likely decide it at the 96.7% good seen)`)
  })

  test('a harness-limited cell by send lag names sendLagLimitMs above the lag, with the requests the share needs', () => {
    const d = sloGate(limited(record(new Array(24).fill(100)), [sendLag(11.13)]), { ttftMs: 200, percentile: 90 })
    expect(d.outcome).toBe('inconclusive')
    expect(d.warnings.join('\n')).toMatch(/^not judged: the harness was the bottleneck/m)
    expect(d.decideHint?.set).toEqual({ sendLagLimitMs: 20, requests: 49 })
    expect(d.decideHint?.text).toMatch(
      /^to decide it, set sendLagLimitMs: 20 \(the send lag p99 was 11\.13 ms, over 5 ms; [^)]*\) and requests: 49 \(24 requests cannot show 90%/,
    )
    // A share that decides on its own needs only the harness setting.
    const decided = sloGate(limited(record(new Array(200).fill(100)), [sendLag(7.2)]), { ttftMs: 200, percentile: 90 })
    expect(decided.decideHint?.set).toEqual({ sendLagLimitMs: 15 })
  })

  test('a client over its CPU share names clientWorkers: off the cell thread, or spread over more workers', () => {
    const cpu = (value: number, thread: 'cell' | number): HarnessLimitExceeded => ({ option: 'cpuShareLimit', limit: 0.9, value, thread })
    const own = sloGate(limited(record(new Array(200).fill(100)), [cpu(0.95, 'cell')]), { ttftMs: 200 })
    expect(own.decideHint?.set).toEqual({ clientWorkers: 2 })
    expect(own.decideHint?.text).toBe(
      "to decide it, set clientWorkers: 2 (the client's CPU share was 0.95 of one core; 2 worker threads would share its streams)",
    )
    const worker = (w: number, cpuShare: number) => ({
      worker: w,
      requests: 100,
      cpuShare,
      eventLoopDelayP99Ms: 1,
      eventLoopDelayMaxMs: 2,
      handoffLagP99Ms: 1,
      harnessLimited: cpuShare >= 0.9,
    })
    const spread = sloGate(limited(record(new Array(200).fill(100)), [cpu(0.97, 1)], [worker(0, 0.8), worker(1, 0.97)]), {
      ttftMs: 200,
    })
    // 1.77 cores of streaming at no more than 0.675 each: 3 workers.
    expect(spread.decideHint?.set).toEqual({ clientWorkers: 3 })
  })

  test('no hint where no option would decide it: an older record that names no limit, the cell thread busy beside workers', () => {
    const older = { ...record(new Array(24).fill(100)), harness: { ...record([]).harness, harnessLimited: true, reasons: ['send lag'] } }
    expect(sloGate(older, { ttftMs: 200 }).decideHint).toBeNull()
    const busy = limited(record(new Array(24).fill(100)), [{ option: 'cpuShareLimit', limit: 0.9, value: 0.95, thread: 'cell' }], [])
    expect(sloGate({ ...busy, harness: { ...busy.harness, clientWorkers: 2 } }, { ttftMs: 200 }).decideHint).toBeNull()
    // A share on the threshold: no count would decide it.
    expect(sloGate(record([...new Array(9).fill(100), 900]), { ttftMs: 200, percentile: 90 }).decideHint).toBeNull()
  })
})
