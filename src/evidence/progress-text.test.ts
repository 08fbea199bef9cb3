import { describe, expect, test } from 'vitest'
import type { ProgressEvent } from '../schema/progress.ts'
import { eraseRows, isLiveTerminal, LineThrottle, phaseText, progressLine, redraw, rowsOf } from './progress-text.ts'

const still = { sinceEventMs: 0, inPhaseMs: 0 }
const event = (phase: ProgressEvent['phase'], over: Partial<ProgressEvent> = {}): ProgressEvent => ({
  cell: 'alpha',
  arm: 'baseline',
  engine: 'vllm:Qwen/Qwen3-8B',
  step: null,
  phase,
  atMs: 0,
  ...over,
})

describe('progress text', () => {
  test('a wait for readiness says how long so far, of what deadline, and where the log is', () => {
    const waiting = { phase: 'waiting', elapsedMs: 45_400, timeoutMs: 900_000, logPath: '.servegate/logs/vllm-1.log' } as const
    expect(phaseText(waiting, 'vllm:Qwen/Qwen3-8B', still)).toBe(
      'waiting for vllm:Qwen/Qwen3-8B to become ready: 45 s of 900 s, log .servegate/logs/vllm-1.log',
    )
    // Between events the wait runs on.
    expect(phaseText(waiting, 'vllm:Qwen/Qwen3-8B', { sinceEventMs: 5000, inPhaseMs: 0 })).toMatch(/: 50 s of 900 s,/)
  })

  test('requests show n/N with the stage of a sequential arm; a finished count stops its clock', () => {
    const requests = { phase: 'requests', done: 5, total: 12, ok: 4, failed: 1, elapsedMs: 1234, stage: { index: 2, of: 3 } } as const
    expect(phaseText(requests, 'e', still)).toBe('5/12 requests, 4 ok, 1 failed, 1.2 s, stage 2 of 3')
    expect(phaseText({ ...requests, done: 12, ok: 12, failed: 0, stage: null }, 'e', { sinceEventMs: 9000, inPhaseMs: 0 })).toBe(
      '12/12 requests, 12 ok, 0 failed, 1.2 s',
    )
  })

  test('a line names the cell, the arm and the launch or probe', () => {
    expect(progressLine(event({ phase: 'launching' }), { sinceEventMs: 0, inPhaseMs: 3000 })).toBe(
      'servegate alpha · baseline: launching vllm:Qwen/Qwen3-8B (3 s)',
    )
    expect(progressLine(event({ phase: 'tearing-down' }, { arm: 'candidate', step: { kind: 'launch', index: 2, of: 4 } }), still)).toBe(
      'servegate alpha · candidate · launch 2/4: tearing down vllm:Qwen/Qwen3-8B (0 s)',
    )
    expect(
      progressLine(
        event({ phase: 'calibrating' }, { cell: 'cap', arm: null, step: { kind: 'probe', index: 3, value: 8, axis: 'rate' } }),
        still,
      ),
    ).toMatch(/^servegate cap · probe 3 at 8\.00 req\/s: calibrating/)
    expect(progressLine(event({ phase: 'stopped' }, { cell: null, arm: null }), still)).toBe('servegate: vllm:Qwen/Qwen3-8B stopped')
    expect(progressLine(event({ phase: 'done', completed: 0, failed: 0, failure: 'ENGINE_START_TIMEOUT: not ready' }), still)).toBe(
      'servegate alpha · baseline: failed: ENGINE_START_TIMEOUT: not ready',
    )
  })
})

describe('plain (CI) lines are throttled', () => {
  test('one line per phase change, and at most one per interval while the phase stays', () => {
    const throttle = new LineThrottle(5000)
    const due = (phase: 'waiting' | 'requests', at: number) => throttle.due('alpha', phase, at)
    expect(due('waiting', 0)).toBe(true)
    expect([200, 1000, 4999].map((t) => due('waiting', t))).toEqual([false, false, false])
    expect(due('waiting', 5000)).toBe(true)
    expect(due('waiting', 9000)).toBe(false)
    // A new phase prints at once, and starts its own interval.
    expect(due('requests', 9100)).toBe(true)
    expect(due('requests', 9200)).toBe(false)
    expect(due('requests', 14_100)).toBe(true)
  })

  test('cells are throttled apart, and a cell that went away starts afresh', () => {
    const throttle = new LineThrottle(5000)
    expect(throttle.due('a', 'waiting', 0)).toBe(true)
    expect(throttle.due('b', 'waiting', 10)).toBe(true)
    expect(throttle.due('a', 'waiting', 20)).toBe(false)
    throttle.forget('a')
    expect(throttle.due('a', 'waiting', 30)).toBe(true)
  })

  test('over a 15-minute wait a cell prints one line every 5 s, not one per poll', () => {
    const throttle = new LineThrottle(5000)
    let lines = 0
    // waitReady polls every 200 ms.
    for (let t = 0; t < 900_000; t += 200) if (throttle.due('never', 'waiting', t)) lines++
    expect(lines).toBe(180)
  })
})

describe('live lines', () => {
  test('a redraw moves up over the rows drawn last (wrapped lines count their rows) and erases them', () => {
    expect(rowsOf('x'.repeat(80), 80)).toBe(1)
    expect(rowsOf('x'.repeat(81), 80)).toBe(2)
    expect(rowsOf('', 80)).toBe(1)
    const first = redraw(0, ['a'.repeat(100), 'b'], 80)
    expect(first).toEqual({ text: `${'a'.repeat(100)}\nb\n`, rows: 3 })
    expect(redraw(first.rows, ['c'], 80)).toEqual({ text: '\u001b[3A\r\u001b[Jc\n', rows: 1 })
    expect(redraw(1, [], 80)).toEqual({ text: eraseRows(1), rows: 0 })
    expect(eraseRows(0)).toBe('')
  })

  test('live on a terminal outside CI, plain otherwise', () => {
    expect(isLiveTerminal({ isTTY: true }, {})).toBe(true)
    expect(isLiveTerminal({ isTTY: true }, { CI: 'true' })).toBe(false)
    expect(isLiveTerminal({ isTTY: true }, { CI: '1' })).toBe(false)
    expect(isLiveTerminal({ isTTY: true }, { CI: 'false' })).toBe(true)
    expect(isLiveTerminal({}, {})).toBe(false)
  })
})
