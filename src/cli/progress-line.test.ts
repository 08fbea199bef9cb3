import { Writable } from 'node:stream'
import { expect, test } from 'vitest'
import type { CliIo } from './cli-io.ts'
import { progressLine } from './progress-line.ts'

function io(isTTY: boolean): { io: CliIo; written: string[] } {
  const written: string[] = []
  const stderr = Object.assign(new Writable({ write: (chunk, _encoding, done) => (written.push(String(chunk)), done()) }), {
    isTTY,
    columns: 60,
  })
  return { io: { stdout: new Writable({ write: (_chunk, _encoding, done) => done() }), stderr }, written }
}

test('servegate run on a terminal: the engine start-up, then the request bar, redrawn in place', () => {
  const { io: tty, written } = io(true)
  const phase = progressLine(tty, 'vllm:Qwen/Qwen3-8B')
  phase({ phase: 'launching' })
  phase({ phase: 'waiting', elapsedMs: 45_000, timeoutMs: 900_000, logPath: '.servegate/logs/vllm-x.log' })
  phase({ phase: 'requests', done: 32, total: 32, ok: 31, failed: 1, elapsedMs: 2500, stage: null })
  expect(written[0]).toBe('launching vllm:Qwen/Qwen3-8B (0 s)\n')
  // 93 characters on a 60-column terminal: two rows to move up over next time.
  expect(written[1]).toBe(
    '\u001b[1A\r\u001b[Jwaiting for vllm:Qwen/Qwen3-8B to become ready: 45 s of 900 s, log .servegate/logs/vllm-x.log\n',
  )
  expect(written[2]).toBe('\u001b[2A\r\u001b[J[########################] 32/32 · 31 ok · 1 failed · 2.5 s\n')
})

test('servegate run without a terminal draws nothing', () => {
  const { io: pipe, written } = io(false)
  progressLine(pipe, 'e')({ phase: 'launching' })
  expect(written).toEqual([])
})
