import { describe, expect, test } from 'vitest'
import { telemetryWithPreemptions } from '../../fixtures/engine-telemetry.ts'
import { around, launchOf } from '../../fixtures/gate-fixture.ts'
import { GateDecision } from '../schema/gate.ts'
import type { GateRecord } from './arms.ts'
import { holdLatencyGate } from './hold-latency.ts'
import { armPreemptions, pairPreemptions, preemptionText, unevenPreemptions } from './preemption.ts'
import { winGate } from './win.ts'

const N = 64

function decode(ratio: number, preemptions: number | null | undefined): GateRecord {
  const launch = launchOf(
    'decodeTokPerS',
    around(50, N, 0.1).map((v) => v * ratio),
  )
  return preemptions === undefined ? launch : { ...launch, telemetry: telemetryWithPreemptions(preemptions) }
}

function ttft(ratio: number, preemptions: number): GateRecord {
  return {
    ...launchOf(
      'ttftMs',
      around(200, N, 0.3).map((v) => v * ratio),
    ),
    telemetry: telemetryWithPreemptions(preemptions),
  }
}

describe('armPreemptions', () => {
  test('sums the launches of an arm, as a share of the requests they sent', () => {
    expect(armPreemptions([decode(1, 3), decode(1, 5)])).toEqual({ count: 8, requests: 128, perRequest: 0.0625, reason: null })
  })

  test('a launch without a count leaves the arm without one, with its reason', () => {
    expect(armPreemptions([decode(1, 3), decode(1, null)])).toEqual({
      count: null,
      requests: 128,
      perRequest: null,
      reason: "sglang:num_retracted_requests_total is not in the engine's metrics",
    })
    expect(armPreemptions([decode(1, undefined)]).reason).toBe('the record has no telemetry')
    const absent: GateRecord = {
      ...decode(1, 0),
      telemetry: { ...telemetryWithPreemptions(0), engine: { status: 'absent', reason: 'in-process' } },
    }
    expect(armPreemptions([absent]).reason).toBe('no engine metrics: in-process')
  })
})

describe('unevenPreemptions: > 5% of one arm, > 2× and ≥ 5 more than the other', () => {
  const arm = (count: number, requests = 100) => ({ count, requests, perRequest: count / requests, reason: null })
  test.each([
    [0, 6, true, '6% against none'],
    [2, 7, true, '7%, 3.5× and 5 more'],
    [4, 9, true, '9%, 2.25× and 5 more'],
    [0, 5, false, 'exactly 5% is not more than 5%'],
    [5, 10, false, 'exactly 2× is not more than 2×'],
    [2, 6, false, '6% and 3×, but only 4 more'],
    [40, 80, false, 'both preempt a lot, 2× only'],
  ] as const)('baseline %i, candidate %i of 100 requests: uneven %s (%s)', (b, c, expected, _why) => {
    expect(unevenPreemptions(arm(b), arm(c))).toBe(expected)
    // Symmetric: the baseline can be the arm that preempted.
    expect(unevenPreemptions(arm(c), arm(b))).toBe(expected)
  })

  test('unknown on either arm is never uneven', () => {
    expect(unevenPreemptions({ count: null, requests: 100, perRequest: null, reason: 'x' }, arm(50))).toBe(false)
  })
})

describe('preemptions beside the verdict', () => {
  test('a win decision carries both arms; an uneven pair says so in its warnings, the outcome unchanged', () => {
    const d = winGate({ baseline: decode(1, 1), candidate: decode(1.2, 12) }, { gate: 'toWinDecode', margin: 0.05 })
    expect(GateDecision.parse(d)).toEqual(d)
    expect(d.outcome).toBe('pass')
    expect(d.preemptions).toEqual({
      baseline: { count: 1, requests: 64, perRequest: 1 / 64, reason: null },
      candidate: { count: 12, requests: 64, perRequest: 12 / 64, reason: null },
      uneven: true,
    })
    expect(d.warnings.at(-1)).toBe(
      'the arms preempted very differently (baseline 1 in 64 requests (1.6%), candidate 12 in 64 requests (18.8%)): ' +
        "the candidate's engine ran short of KV cache and recomputed preempted requests, so memory pressure, not only the change, " +
        'may explain the effect; check the KV memory setting (vLLM --gpu-memory-utilization, SGLang --mem-fraction-static) and the batch limit on both arms',
    )
  })

  test('even arms: the counts beside the verdict, no warning', () => {
    const d = winGate({ baseline: decode(1, 2), candidate: decode(1.2, 3) }, { gate: 'toWinDecode', margin: 0.05 })
    expect(d.preemptions?.uneven).toBe(false)
    expect(d.warnings.join(' ')).not.toMatch(/preempted/)
    expect(preemptionText(d.preemptions)).toBe('baseline 2 in 64 requests (3.1%), candidate 3 in 64 requests (4.7%)')
  })

  test('a hold decision carries them too; the baseline can be the arm that preempted', () => {
    const d = holdLatencyGate({ baseline: ttft(1, 20), candidate: ttft(1, 0) }, { metric: 'ttft', percentile: 95, notWorseThanPct: 10 })
    expect(d.preemptions?.uneven).toBe(true)
    expect(d.warnings.join(' ')).toMatch(/the baseline's engine ran short of KV cache/)
  })

  test('records without engine telemetry: both arms not reported, nothing to show', () => {
    const d = winGate({ baseline: decode(1, undefined), candidate: decode(1.2, undefined) }, { gate: 'toWinDecode' })
    expect(d.preemptions).toMatchObject({ baseline: { count: null }, candidate: { count: null }, uneven: false })
    expect(preemptionText(d.preemptions)).toBeNull()
    expect(preemptionText(pairPreemptions([decode(1, 4)], [decode(1, undefined)]))).toBe(
      'baseline 4 in 64 requests (6.3%), candidate not reported',
    )
  })
})
