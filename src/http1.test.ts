import { describe, expect, test } from 'vitest'
import { type Http1Headers, Http1ParseError, Http1ResponseParser } from './http1.ts'

interface Seen {
  status: number | null
  headers: Http1Headers | null
  /** The body's bytes so far, as UTF-8 (decoded whole: a piece may cut a character). */
  readonly body: string
  ends: number
}

function parser(): { p: Http1ResponseParser; seen: Seen } {
  const pieces: Buffer[] = []
  const seen: Seen = {
    status: null,
    headers: null,
    get body() {
      return Buffer.concat(pieces).toString('utf8')
    },
    ends: 0,
  }
  const p = new Http1ResponseParser({
    onHead: (status, headers) => {
      seen.status = status
      seen.headers = headers
    },
    onBody: (bytes) => pieces.push(Buffer.from(bytes)),
    onEnd: () => seen.ends++,
  })
  return { p, seen }
}

/** Feeds `text` split at every position pair, so that every field is cut somewhere across reads. */
function everySplit(text: string, check: (seen: Seen, p: Http1ResponseParser) => void): void {
  const bytes = Buffer.from(text)
  for (let i = 0; i <= bytes.length; i++) {
    for (let j = i; j <= bytes.length; j += 7) {
      const { p, seen } = parser()
      p.push(bytes.subarray(0, i))
      p.push(bytes.subarray(i, j))
      p.push(bytes.subarray(j))
      check(seen, p)
    }
  }
}

const CHUNKED =
  'HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nTransfer-Encoding: chunked\r\nSet-Cookie: a\r\nset-cookie: b\r\n\r\n' +
  '7\r\ndata: 1\r\n17;ext=1\r\n\n\ndata: {"x":"é"}\n\ndat\r\n0\r\nx-trailer: t\r\n\r\n'

describe('Http1ResponseParser', () => {
  test('a chunked event stream, cut at every place across reads: one head, the body de-chunked, one end', () => {
    everySplit(CHUNKED, (seen, p) => {
      expect(seen.status).toBe(200)
      expect(seen.headers).toEqual({ 'content-type': 'text/event-stream', 'transfer-encoding': 'chunked', 'set-cookie': ['a', 'b'] })
      expect(seen.body).toBe('data: 1\n\ndata: {"x":"é"}\n\ndat')
      expect(seen.ends).toBe(1)
      expect(p.done).toBe(true)
      expect(p.keepAlive).toBe(true)
    })
  })

  test('a content-length body ends at its length; a 1xx interim head is skipped', () => {
    everySplit('HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 429 Too Many\r\nretry-after: 3\r\ncontent-length: 5\r\n\r\nslow!', (seen, p) => {
      expect(seen.status).toBe(429)
      expect(seen.headers).toEqual({ 'retry-after': '3', 'content-length': '5' })
      expect(seen.body).toBe('slow!')
      expect(p.done).toBe(true)
    })
  })

  test('a body without length or chunking ends with the connection, which is then not reused', () => {
    const { p, seen } = parser()
    p.push(Buffer.from('HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\ndata: [DONE]\n\n'))
    expect(p.done).toBe(false)
    expect(p.close()).toBe(true)
    expect(seen.body).toBe('data: [DONE]\n\n')
    expect(seen.ends).toBe(1)
    expect(p.keepAlive).toBe(false)
  })

  test('a chunked body cut by the close is not complete', () => {
    const { p, seen } = parser()
    p.push(Buffer.from('HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5\r\nab'))
    expect(p.close()).toBe(false)
    expect(seen.ends).toBe(0)
    expect(p.answered).toBe(true)
  })

  test('connection: close, HTTP/1.0, and bytes after the response each make the connection single-use', () => {
    const closing = parser()
    closing.p.push(Buffer.from('HTTP/1.1 200 OK\r\nConnection: close\r\ncontent-length: 0\r\n\r\n'))
    expect([closing.p.done, closing.p.keepAlive]).toEqual([true, false])
    const old = parser()
    old.p.push(Buffer.from('HTTP/1.0 200 OK\r\ncontent-length: 0\r\n\r\n'))
    expect([old.p.done, old.p.keepAlive]).toEqual([true, false])
    const oldKept = parser()
    oldKept.p.push(Buffer.from('HTTP/1.0 200 OK\r\nconnection: keep-alive\r\ncontent-length: 0\r\n\r\n'))
    expect(oldKept.p.keepAlive).toBe(true)
    const chatty = parser()
    chatty.p.push(Buffer.from('HTTP/1.1 204 No Content\r\n\r\nHTTP/1.1 200'))
    expect([chatty.p.done, chatty.p.keepAlive, chatty.p.extra]).toEqual([true, false, 12])
  })

  test.each([
    ['not HTTP', 'SSH-2.0-OpenSSH\r\n\r\n', 'HPE_INVALID_STATUS', /invalid status line: "SSH-2.0-OpenSSH"/],
    ['a bad header line', 'HTTP/1.1 200 OK\r\nno colon here\r\n\r\n', 'HPE_INVALID_HEADER_TOKEN', /invalid header line/],
    [
      'a bad chunk size',
      'HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n',
      'HPE_INVALID_CHUNK_SIZE',
      /invalid chunk size line: "zz"/,
    ],
    ['a chunk without its CRLF', 'HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n2\r\nabcd', 'HPE_STRICT', /CRLF/],
    ['a bad content-length', 'HTTP/1.1 200 OK\r\ncontent-length: 1x\r\n\r\n', 'HPE_INVALID_CONTENT_LENGTH', /content-length/],
    ['an endless head', `HTTP/1.1 200 OK\r\n${'x-pad: y\r\n'.repeat(8000)}`, 'HPE_HEADER_OVERFLOW', /longer than 65536 bytes/],
  ])('%s throws an HTTPParserError with llhttp’s code', (_name, text, code, message) => {
    const { p } = parser()
    let err: unknown = null
    try {
      p.push(Buffer.from(text))
    } catch (e) {
      err = e
    }
    expect(err).toBeInstanceOf(Http1ParseError)
    expect(err).toMatchObject({ name: 'HTTPParserError', code })
    expect((err as Error).message).toMatch(message)
  })
})
