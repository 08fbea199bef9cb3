/**
 * The progress reporter: plain lines (CI) and live lines (a terminal) from the events it is
 * given, and, end to end, a `vitest bench` run of the fixture suite whose workers send their
 * cells' phases over the reporter's socket.
 */
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { execa } from 'execa'
import { afterEach, beforeAll, describe, expect, test, vi } from 'vitest'
import type { CellPhase, ProgressEvent } from '../schema/progress.ts'
import { ServegateProgressReporter } from './progress-reporter.ts'

const ROOT = fileURLToPath(new URL('../../', import.meta.url))
const VITEST = join(dirname(createRequire(import.meta.url).resolve('vitest/package.json')), 'vitest.mjs')

const ESC = '\u001b['
const waiting = (elapsedMs: number): CellPhase => ({
  phase: 'waiting',
  elapsedMs,
  timeoutMs: 900_000,
  logPath: '.servegate/logs/vllm-1.log',
})
const event = (phase: CellPhase, atMs: number): ProgressEvent => ({
  cell: 'never',
  arm: null,
  engine: 'vllm:Qwen/Qwen3-8B',
  step: null,
  phase,
  atMs,
})

/** A reporter on a fake output, at a clock the test moves. */
function reporter(live: boolean) {
  const clock = { now: 0 }
  const written: string[] = []
  const output = { isTTY: live, columns: 200, write: (chunk: string) => written.push(chunk) > 0 }
  const r = new ServegateProgressReporter({ live, output, clock: () => clock.now, intervalMs: 5000 })
  return { r, clock, written, output }
}

afterEach(() => {
  vi.useRealTimers()
})

describe('plain lines (CI)', () => {
  test('a cell prints on each change of phase and every 5 s while it waits, with the figures run on', () => {
    vi.useFakeTimers()
    const { r, clock, written } = reporter(false)
    r.start(true, [])
    r.receive(event({ phase: 'launching' }, 0))
    // The engine is polled every 200 ms; each poll says how long it has waited.
    for (let t = 100; t <= 12_000; t += 200) {
      clock.now = t
      r.receive(event(waiting(t - 100), t))
    }
    // No event for 6 s: the reporter's own tick prints the wait as it runs on.
    for (let t = 13_000; t <= 18_000; t += 1000) {
      clock.now = t
      vi.advanceTimersByTime(1000)
    }
    clock.now = 18_100
    r.receive(event({ phase: 'done', completed: 0, failed: 0, failure: 'ENGINE_START_TIMEOUT: not ready' }, 18_100))
    expect(written).toEqual([
      'servegate never: launching vllm:Qwen/Qwen3-8B (0 s)\n',
      'servegate never: waiting for vllm:Qwen/Qwen3-8B to become ready: 0 s of 900 s, log .servegate/logs/vllm-1.log\n',
      'servegate never: waiting for vllm:Qwen/Qwen3-8B to become ready: 5 s of 900 s, log .servegate/logs/vllm-1.log\n',
      'servegate never: waiting for vllm:Qwen/Qwen3-8B to become ready: 10 s of 900 s, log .servegate/logs/vllm-1.log\n',
      'servegate never: waiting for vllm:Qwen/Qwen3-8B to become ready: 15 s of 900 s, log .servegate/logs/vllm-1.log\n',
      'servegate never: failed: ENGINE_START_TIMEOUT: not ready\n',
    ])
    // The cell is gone: the tick prints nothing more.
    vi.advanceTimersByTime(10_000)
    expect(written).toHaveLength(6)
  })

  test('events outside a benchmark run are ignored', () => {
    const { r, written } = reporter(false)
    r.start(false, [])
    r.receive(event({ phase: 'launching' }, 0))
    expect(written).toEqual([])
  })
})

describe('live lines (a terminal)', () => {
  test('lines are redrawn in place; other output erases them first and they come back below it', () => {
    vi.useFakeTimers()
    const { r, clock, written, output } = reporter(true)
    const other = { isTTY: true, write: (chunk: string) => written.push(`<other>${chunk}`) > 0 }
    const otherWrite = other.write
    r.start(true, [other])
    r.receive(event({ phase: 'launching' }, 0))
    clock.now = 1000
    r.receive(event(waiting(900), 1000))
    expect(written).toEqual([
      'servegate never: launching vllm:Qwen/Qwen3-8B (0 s)\n',
      `${ESC}1A\r${ESC}Jservegate never: waiting for vllm:Qwen/Qwen3-8B to become ready: 0 s of 900 s, log .servegate/logs/vllm-1.log\n`,
    ])
    written.length = 0
    other.write(' ✓ a.bench.ts\n')
    expect(written).toEqual([`${ESC}1A\r${ESC}J`, '<other> ✓ a.bench.ts\n'])
    vi.advanceTimersByTime(50)
    expect(written[2]).toBe(
      'servegate never: waiting for vllm:Qwen/Qwen3-8B to become ready: 0 s of 900 s, log .servegate/logs/vllm-1.log\n',
    )
    // The tick refreshes the figures in place.
    clock.now = 3000
    vi.advanceTimersByTime(1000)
    expect(written[3]).toMatch(new RegExp(`^\\u001b\\[1A\\r\\u001b\\[J.*ready: 2 s of 900 s`))
    // A finished cell's line goes; at the end the streams are left as they were.
    r.receive(event({ phase: 'done', completed: 2, failed: 0, failure: null }, 3000))
    expect(written.at(-1)).toBe(`${ESC}1A\r${ESC}J`)
    r.onTestRunEnd()
    expect(other.write).toBe(otherWrite)
    const before = written.length
    output.write('after the run\n')
    expect(written.slice(before)).toEqual(['after the run\n'])
  })
})

describe('a vitest bench run of the fixture suite (fake vLLM engines) without a terminal', () => {
  let lines: string[] = []
  beforeAll(async () => {
    const result = await execa(process.execPath, [VITEST, 'bench', '--run', '--root', 'fixtures/progress-suite'], {
      cwd: ROOT,
      env: { FORCE_COLOR: '0', CI: 'true' },
      reject: false,
      timeout: 120_000,
      cleanup: true,
    })
    if (result.exitCode !== 0)
      throw new Error(`vitest bench exited ${result.exitCode}:\n${result.stdout.slice(-3000)}\n${result.stderr.slice(-2000)}`)
    lines = result.stdout.split('\n').filter((line) => line.startsWith('servegate'))
  }, 180_000)

  test('an engine that never becomes ready says so while it waits: how long of its deadline, and its log', () => {
    const waits = lines.filter((l) => l.startsWith('servegate never: waiting for never-ready to become ready: '))
    const failed = lines.findIndex((l) => l.startsWith('servegate never: failed: ENGINE_START_TIMEOUT: engine vllm was not ready'))
    expect(failed).toBeGreaterThan(0)
    const log = /log (\S+\.log)$/.exec(waits[0] ?? '')?.[1] as string
    expect(log).toMatch(/^\.servegate\/logs\/vllm-\w+-\d+\.log$/)
    // Before its 4 s deadline, and throttled to about a line a second (it is polled every 200 ms).
    expect(waits.filter((l) => / [1-3] s of 4 s, log /.test(l) && l.endsWith(log)).length).toBeGreaterThanOrEqual(2)
    expect(waits.length).toBeLessThanOrEqual(8)
    expect(lines.indexOf(waits.at(-1) as string)).toBeLessThan(failed)
    expect(lines[failed]).toContain(`check the log ${log}`)
  })

  test('every phase of a repeated cell, launch by launch, and of a staged pair arm by arm', () => {
    const phases = (prefix: string) =>
      lines
        .filter((l) => l.startsWith(prefix))
        .map(
          (l) =>
            (/: (launching|waiting|\S+ is ready|calibrating|0\/4 requests|tearing down|measured)/.exec(l.slice(prefix.length - 2)) ??
              [])[1],
        )
        .filter((name, i, all) => name !== undefined && name !== all[i - 1])
    expect(phases('servegate repeated · launch 1/2: ')).toEqual([
      'launching',
      'waiting',
      'base is ready',
      'calibrating',
      '0/4 requests',
      'tearing down',
      'measured',
    ])
    expect(phases('servegate repeated · launch 2/2: ')).toEqual([
      'launching',
      'waiting',
      'base is ready',
      '0/4 requests',
      'tearing down',
      'measured',
    ])
    for (const arm of ['baseline', 'candidate']) {
      const own = lines.filter((l) => l.startsWith(`servegate staged · ${arm}: `))
      expect(own.some((l) => l.includes('waiting for its turn at stage 1 of 2'))).toBe(true)
      expect(own.some((l) => /requests, .* failed, .* s, stage 1 of 2$/.test(l))).toBe(true)
      // Stopped at the look or run to the end, as the gate decides.
      expect(own.at(-1)).toMatch(new RegExp(`^servegate staged · ${arm}: measured: (16|32) ok, 0 failed$`))
    }
    // The file's shared engines are torn down after its tests, each saying so.
    expect(lines).toContain('servegate: slow stopped')
    expect(lines).toContain('servegate: fast stopped')
  })
})
