import { describe, expect, test } from 'vitest'
import { around, okRequest } from '../../fixtures/gate-fixture.ts'
import type { GateRecord } from './arms.ts'
import { holdLatencyGate } from './hold-latency.ts'
import { winGate } from './win.ts'

const SESSIONS = 40
const TURNS = 3

/** A conversation launch: turn 1 at `first` tok/s (and ms TTFT), later turns at `later`, request i is turn (i mod 3) + 1. */
function conversationLaunch(first: number, later: number, phase = 0): GateRecord {
  const n = SESSIONS * TURNS
  const wiggle = around(1, n, 0.05, phase)
  return {
    requests: Array.from({ length: n }, (_, i) => {
      const turn = (i % TURNS) + 1
      const rate = (turn === 1 ? first : later) * (wiggle[i] as number)
      return okRequest(i, { session: Math.floor(i / TURNS), turn, effectivePrefillTokPerS: rate, ttftMs: 100_000 / rate })
    }),
  }
}

describe('turns: a gate judges only the conversation turns it names', () => {
  // The candidate's cache pays from turn 2 on: 3× the prefill rate there, the same on turn 1.
  const baseline = conversationLaunch(1000, 1000)
  const candidate = conversationLaunch(1000, 3000, 0.4)

  test('turn ≥ 2 prefill wins by 3×, and the rule says which turns it judged', () => {
    const d = winGate({ baseline, candidate }, { gate: 'toWinPrefill', margin: 0.5, turns: { from: 2 } })
    expect(d.outcome).toBe('pass')
    expect(d.rule).toMatch(/; over turns ≥ 2 only$/)
    // Turn 1 alone: no win.
    const first = winGate({ baseline, candidate }, { gate: 'toWinPrefill', margin: 0.5, turns: { from: 1, to: 1 } })
    expect(first.outcome).toBe('fail')
    expect(first.rule).toMatch(/; over turns 1–1 only$/)
  })

  test('toHoldLatency over turns: turn 1 holds, turns 2–3 are 3× faster, which holds too; the reverse pair regresses on turns ≥ 2', () => {
    expect(holdLatencyGate({ baseline, candidate }, { metric: 'ttft', notWorseThanPct: 10, turns: { from: 1, to: 1 } }).outcome).toBe(
      'pass',
    )
    expect(
      holdLatencyGate({ baseline: candidate, candidate: baseline }, { metric: 'ttft', notWorseThanPct: 10, turns: { from: 2 } }).outcome,
    ).toBe('fail')
  })

  test('misuse is a TypeError naming the fix: records without turns, a cell-level metric, a backwards range', () => {
    const plain = { requests: [okRequest(0, { effectivePrefillTokPerS: 1 })] }
    expect(() => winGate({ baseline: plain, candidate: plain }, { gate: 'toWinPrefill', turns: { from: 2 } })).toThrow(
      /toWinPrefill: turns needs conversation records/,
    )
    expect(() => winGate({ baseline, candidate }, { gate: 'toWinThroughput', turns: { from: 2 } })).toThrow(/remove turns/)
    expect(() => winGate({ baseline, candidate }, { gate: 'toWinDecode', turns: { from: 3, to: 2 } })).toThrow(
      /turns\.to must be at least turns\.from/,
    )
  })
})
