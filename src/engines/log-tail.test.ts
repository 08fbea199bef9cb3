import { afterEach, describe, expect, test } from 'vitest'
import { clearSecrets, registerSecret } from '../secrets.ts'
import { LogTail, type LogSink, TAIL_LINES } from './log-tail.ts'

/** A sink that keeps what was written, and whether it was ended. */
function memorySink(): LogSink & { text: string; ended: boolean } {
  const sink = {
    text: '',
    ended: false,
    write(text: string) {
      sink.text += text
    },
    end(text: string) {
      sink.text += text
      sink.ended = true
    },
  }
  return sink
}

afterEach(() => {
  clearSecrets()
})

describe('LogTail', () => {
  test('keeps whole lines across chunks, the unterminated last one too, and the last TAIL_LINES of them', () => {
    const log = new LogTail(memorySink())
    log.stdout(Buffer.from('first li'))
    log.stdout(Buffer.from('ne\r\nsecond\n'))
    log.stderr(Buffer.from('third, no newline yet'))
    // Sanitized for a message: whitespace folds to one space.
    expect(log.tail()).toBe('first line second third, no newline yet')
    for (let i = 0; i < TAIL_LINES + 5; i++) log.text(`line-${i}\n`)
    const tail = log.tail().split(' ')
    expect(tail).toHaveLength(TAIL_LINES)
    expect([tail[0], tail.at(-1)]).toEqual(['line-5', `line-${TAIL_LINES + 4}`])
  })

  test('a character split between two chunks of one stream stays whole, each stream decoded on its own', () => {
    const sink = memorySink()
    const log = new LogTail(sink)
    const euro = Buffer.from('€\n')
    log.stdout(euro.subarray(0, 1))
    // A chunk of stderr between the halves does not break stdout's character.
    log.stderr(Buffer.from('err\n'))
    log.stdout(euro.subarray(1))
    expect(log.tail()).toBe('err €')
    expect(sink.text).toBe('err\n€\n')
  })

  test('the log is scrubbed of registered secrets as written; the tail is sanitized when read', () => {
    registerSecret('sk-verysecretvalue123')
    const sink = memorySink()
    const log = new LogTail(sink)
    log.text('token sk-verysecretvalue123 used\n')
    expect(sink.text).not.toContain('sk-verysecretvalue123')
    expect(log.tail()).not.toContain('sk-verysecretvalue123')
  })

  test('at the end the last line is kept once, and the sink ends with what the decoders still held', () => {
    const sink = memorySink()
    const log = new LogTail(sink)
    log.text('ready\nexiting')
    log.stdout(Buffer.from('€').subarray(0, 2))
    log.end()
    expect(sink.ended).toBe(true)
    expect(sink.text.startsWith('ready\nexiting')).toBe(true)
    expect(sink.text.length).toBeGreaterThan('ready\nexiting'.length)
    expect(log.tail()).toBe('ready exiting')
  })
})
