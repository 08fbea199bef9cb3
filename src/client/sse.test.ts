import { describe, expect, test } from 'vitest'
import { createSseParser, DEFAULT_MAX_SSE_LINE_BYTES, parseSse } from './sse.ts'

const b = (s: string): Buffer => Buffer.from(s)

/** Every way of cutting `text` into two reads gives the same events as one read. */
function everySplit(text: string): string[][] {
  const bytes = b(text)
  const results: string[][] = []
  for (let cut = 0; cut <= bytes.length; cut++) results.push(parseSse([bytes.subarray(0, cut), bytes.subarray(cut)]))
  return results
}

describe('parseSse', () => {
  test('several events in one read, in order', () => {
    expect(parseSse([b('data: {"a":1}\n\ndata: {"a":2}\n\ndata: [DONE]\n\n')])).toEqual(['{"a":1}', '{"a":2}', '[DONE]'])
  })

  test('any split point yields the same events, including right after "data:"', () => {
    const text = 'data: {"choices":[{"delta":{"content":"héllo ✓"}}]}\r\n\r\n: keep-alive\n\ndata: [DONE]\n\n'
    for (const events of everySplit(text)) {
      expect(events).toEqual(['{"choices":[{"delta":{"content":"héllo ✓"}}]}', '[DONE]'])
    }
  })

  test('a multi-byte character split across reads is decoded whole', () => {
    const bytes = b('data: ✓\n\n')
    const cut = bytes.indexOf(0xe2) + 1
    expect(parseSse([bytes.subarray(0, cut), bytes.subarray(cut)])).toEqual(['✓'])
  })

  test('CRLF, bare CR and LF line ends all separate lines', () => {
    expect(parseSse([b('data: a\r\n\r\ndata: b\r\rdata: c\n\n')])).toEqual(['a', 'b', 'c'])
  })

  test('a CR at the end of one read and LF at the start of the next is one line end', () => {
    expect(parseSse([b('data: a\r'), b('\n\r'), b('\ndata: b\n\n')])).toEqual(['a', 'b'])
  })

  test('comments and keep-alive lines produce no event', () => {
    expect(parseSse([b(': ping\n\n:\n\ndata: x\n\n')])).toEqual(['x'])
  })

  test('event, id and retry fields are ignored; multi-line data is joined with newlines', () => {
    expect(parseSse([b('event: message\nid: 7\nretry: 10\ndata: one\ndata:two\n\n')])).toEqual(['one\ntwo'])
  })

  test('"data:" without a space, and a bare "data" line', () => {
    expect(parseSse([b('data:x\n\ndata\n\n')])).toEqual(['x', ''])
  })

  test('an unterminated last event is flushed at end of stream', () => {
    expect(parseSse([b('data: [DONE]')])).toEqual(['[DONE]'])
  })

  test('one byte per read', () => {
    const bytes = b('data: {"k":"v"}\n\ndata: [DONE]\n\n')
    const reads = Array.from(bytes, (byte) => Uint8Array.of(byte))
    expect(parseSse(reads)).toEqual(['{"k":"v"}', '[DONE]'])
  })

  test('a parser keeps state between pushes and calls back only for completed events', () => {
    const seen: string[] = []
    const p = createSseParser((data) => seen.push(data))
    p.push(b('data: {"a"'))
    p.push(b(':1}\n'))
    expect(seen).toEqual([])
    p.push(b('\n'))
    expect(seen).toEqual(['{"a":1}'])
    p.end()
    expect(seen).toEqual(['{"a":1}'])
  })
})

describe('the line cap and linear buffering', () => {
  test('a 50 MB data line without a line end fails with STREAM_PROTOCOL at the cap, fast', () => {
    const p = createSseParser(() => {})
    const read = Buffer.alloc(64 * 1024, 0x61)
    const started = performance.now()
    let pushed = 0
    let error: unknown = null
    try {
      p.push(b('data: '))
      for (; pushed < 50 * 1024 * 1024; pushed += read.length) p.push(read)
    } catch (err) {
      error = err
    }
    expect(error).toMatchObject({ code: 'STREAM_PROTOCOL' })
    expect((error as Error).message).toMatch(/^one line exceeds the 4\.0 MiB cap of the SSE parser \(4\.0 MiB so far\)/)
    // It stops at the cap (4 MiB), not at the end of the 50 MB.
    expect(pushed).toBeLessThanOrEqual(DEFAULT_MAX_SSE_LINE_BYTES)
    expect(performance.now() - started).toBeLessThan(1000)
  })

  test('a line below the cap that spans thousands of reads is joined once, in linear time', () => {
    const seen: string[] = []
    const p = createSseParser((data) => seen.push(data))
    p.push(b('data: '))
    const started = performance.now()
    // 3 MiB in 1-KiB reads: repeated concatenation of the whole buffer would copy ~4.5 GiB.
    for (let i = 0; i < 3072; i++) p.push(Buffer.alloc(1024, 0x62))
    p.push(b('\n\n'))
    expect(performance.now() - started).toBeLessThan(1000)
    expect(seen).toHaveLength(1)
    expect(seen[0]).toHaveLength(3 * 1024 * 1024)
  })

  test('the cap is configurable and bounds one event joined from many data lines too', () => {
    expect(() => parseSse([b('data: 12345678901\n\n')], { maxLineBytes: 10 })).toThrow(/^one line exceeds/)
    expect(() => parseSse([b('data:12345\ndata:12345\ndata:1\n\n')], { maxLineBytes: 10 })).toThrow(/^one event's data exceeds/)
    expect(parseSse([b('data: 1234\n\n')], { maxLineBytes: 10 })).toEqual(['1234'])
  })
})
