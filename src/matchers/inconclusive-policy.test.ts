/**
 * The inconclusive policy: a gate's own `inconclusive` option overrides the plugin's, which
 * overrides the default of the gate's kind; the matcher message, the annotation and the test meta
 * say which policy decided, and the meta holds what `servegate verify` needs to decide it again.
 * The plugin's option reaching the workers is tested in src/vitest/plugin.test.ts.
 */
import { describe, expect, test } from 'vitest'
import { around, okRequest } from '../../fixtures/gate-fixture.ts'
import { failureOf } from '../../fixtures/matchers.ts'
import { decideAgain } from '../gates/decide-again.ts'
import { withNoiseFloor } from '../gates/noise-floor.ts'
import { resolveInconclusive } from '../gates/inconclusive-policy.ts'
import { failedCellRecord } from '../runner/run-record.ts'
import type { PairResult } from '../schema/results.ts'
import type { RunRecord } from '../schema/run.ts'
import type { DecisionMeta } from '../schema/task-meta.ts'

/** A run record of `n` ok requests with these decode rates and TTFTs (ms). */
function arm(decode: readonly number[], ttftMs: readonly number[]): RunRecord {
  const base = failedCellRecord(
    { baseUrl: 'http://127.0.0.1:1', model: 'm', requests: decode.length },
    { code: 'INTERNAL', message: 'x', httpStatus: null, retryAfterS: null },
  )
  const requests = decode.map((d, i) =>
    okRequest(i, { decodeTokPerS: d, ttftMs: ttftMs[i] ?? null, timeToFirstOutputMs: ttftMs[i] ?? null }),
  )
  return { ...base, cellFailure: null, requests, completed: requests.length }
}

/** Twelve paired prompts, the candidate 3% faster at decode and 3% slower to first token: neither gate can decide it. */
const undecided: PairResult = {
  kind: 'pair',
  id: 'p',
  baseline: [arm(around(100, 12, 0.2), around(200, 12, 0.3))],
  candidate: [arm(around(103, 12, 0.2, 1), around(206, 12, 0.3, 1))],
  launchOrder: ['baseline', 'candidate'],
}

describe('the policy that decides an inconclusive gate', () => {
  test('the gate option overrides the plugin option, which overrides the default of the kind', () => {
    expect(resolveInconclusive('superiority', undefined, undefined)).toEqual({ inconclusive: 'fail', from: 'default' })
    expect(resolveInconclusive('non-regression', undefined, undefined)).toEqual({ inconclusive: 'pass', from: 'default' })
    expect(resolveInconclusive('superiority', undefined, 'pass')).toEqual({ inconclusive: 'pass', from: 'plugin' })
    expect(resolveInconclusive('non-regression', 'pass', 'fail')).toEqual({ inconclusive: 'pass', from: 'gate' })
  })

  test('by default a superiority claim fails on inconclusive, saying so; inconclusive: "pass" passes it', () => {
    const message = failureOf(() => expect(undecided).toWinDecode({ margin: 0.05 }))
    expect(message).toMatch(/^Received: +inconclusive: /m)
    expect(message).toMatch(
      /^Policy: +inconclusive fails: the default for a superiority claim \(set inconclusive: 'pass' on the gate or in servegate\(\{ … \}\) to change it\)$/m,
    )
    expect(undecided).toWinDecode({ margin: 0.05, inconclusive: 'pass' })
    // .not inverts the result the policy gave: with 'pass', an undecided win is no longer a non-win.
    expect(failureOf(() => expect(undecided).not.toWinDecode({ margin: 0.05, inconclusive: 'pass' }))).toMatch(
      /^Policy: +inconclusive passes: this gate's option inconclusive: 'pass', not the default of a superiority claim \(inconclusive fails\) that the rule and warnings describe$/m,
    )
  })

  test('by default a non-regression claim passes on inconclusive; inconclusive: "fail" fails it, saying so', () => {
    const hold = { metric: 'ttft', percentile: 50, notWorseThanPct: 1 } as const
    expect(undecided).toHoldLatency(hold)
    expect(failureOf(() => expect(undecided).toHoldLatency({ ...hold, inconclusive: 'fail' }))).toMatch(
      /^Policy: +inconclusive fails: this gate's option inconclusive: 'fail', not the default of a non-regression claim \(inconclusive passes\)/m,
    )
  })

  test('a wrong policy is a TypeError naming the matcher and the field', () => {
    // @ts-expect-error: the policy is 'pass' or 'fail'
    expect(() => expect(undecided).toWinDecode({ inconclusive: 'warn' })).toThrow(/^toWinDecode: invalid options\n[^]*→ at inconclusive$/)
  })

  test('the meta and the annotation name the policy; each decision is the one its gate function gives again', async ({ task }) => {
    expect(undecided).toWinDecode({ margin: 0.05, inconclusive: 'pass' })
    failureOf(() => expect(undecided).toHoldLatency({ metric: 'ttft', notWorseThanPct: 1, inconclusive: 'fail' }))
    const decisions = task.meta.servegate?.decisions ?? []
    expect(decisions.map((d) => [d.decision.gate, d.decision.outcome, d.policy, d.passed, d.isNot])).toEqual([
      ['toWinDecode', 'inconclusive', { inconclusive: 'pass', from: 'gate' }, true, false],
      ['toHoldLatency', 'inconclusive', { inconclusive: 'fail', from: 'gate' }, false, false],
    ])
    const ids = { baseline: [undecided.baseline[0]?.runId], candidate: [undecided.candidate[0]?.runId] }
    for (const d of decisions as DecisionMeta[]) {
      expect(d.judged).toEqual({ kind: 'pair', ...ids, storedBaseline: null })
      // The options as the gate function received them, defaults filled in; the policy is not among them.
      expect(d.options).toMatchObject({ gate: d.decision.gate, confidence: 0.98, seed: 1 })
      expect(d.options).not.toHaveProperty('inconclusive')
      // The matcher gives the gate its launch-noise floor and records it: assumed here, with its warning.
      expect(d.decision.noiseFloor).toMatchObject({ source: 'assumed', value: 0.02 })
      expect(d.decision.warnings).toContain(d.decision.noiseFloor?.text)
      const again = decideAgain(d.decision.gate, { kind: 'pair', baseline: undecided.baseline, candidate: undecided.candidate }, d.options)
      expect(withNoiseFloor(again, d.decision.noiseFloor ?? null)).toEqual(d.decision)
    }
    // Besides each verdict's own annotation (a warning, since both are inconclusive), one note per policy.
    const policyNotes = () => task.annotations.filter((a) => a.type === 'warning' && /; inconclusive (passes|fails): /.test(a.message))
    for (let i = 0; i < 50 && policyNotes().length < 2; i++) await new Promise((r) => setTimeout(r, 20))
    expect(policyNotes().map((a) => a.message.replace(/^.*; /, ''))).toEqual([
      "inconclusive passes: this gate's option inconclusive: 'pass', not the default of a superiority claim (inconclusive fails) that the rule and warnings describe",
      "inconclusive fails: this gate's option inconclusive: 'fail', not the default of a non-regression claim (inconclusive passes) that the rule and warnings describe",
    ])
  })
})
