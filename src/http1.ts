/**
 * An incremental HTTP/1.1 response parser: bytes in, head / body pieces / end out. It does no I/O
 * and reads no clock, so the streaming client stamps each read before a byte of it is parsed, and
 * a test drives it with literal bytes. It reads what an OpenAI-compatible server sends: a status
 * line, headers, then a body framed by `transfer-encoding: chunked`, a `content-length`, or the
 * connection's close. 1xx interim responses are skipped.
 *
 * Malformed input throws an {@link Http1ParseError} whose `code` names the fault the way llhttp
 * (Node's and undici's parser) does (`HPE_INVALID_STATUS`, `HPE_INVALID_HEADER_TOKEN`,
 * `HPE_HEADER_OVERFLOW`, `HPE_INVALID_CHUNK_SIZE`…), so a caller tells a reply that is not HTTP
 * from a dropped connection.
 */

/** Response headers, names lower-cased; a repeated header keeps every value in order. */
export type Http1Headers = Record<string, string | string[]>

/** What a parser reports, in order: one head, body pieces, one end. */
export interface Http1Sink {
  onHead(status: number, headers: Http1Headers): void
  /** A piece of the (de-chunked) body: a view into the read, valid only during the call. */
  onBody(bytes: Uint8Array): void
  onEnd(): void
}

/** A reply that is not valid HTTP/1.1, named as llhttp names it. */
export class Http1ParseError extends Error {
  override readonly name = 'HTTPParserError'
  readonly code: string
  constructor(code: string, message: string) {
    super(message)
    this.code = code
  }
}

/** Bytes a status line and headers may hold together (llhttp's default max header size is 16 KiB; servers behind gateways send more). */
const MAX_HEAD_BYTES = 64 * 1024
/** Characters of a chunk-size line, extensions included. */
const MAX_CHUNK_LINE = 1024
const CR = 13
const LF = 10

/** Where the parser is in a response. */
const State = {
  Head: 0,
  /** Body bytes counted by content-length. */
  Length: 1,
  ChunkSize: 2,
  ChunkData: 3,
  /** The CRLF after a chunk's data. */
  ChunkDataEnd: 4,
  Trailers: 5,
  /** Body until the connection closes. */
  UntilClose: 6,
  Done: 7,
} as const
type State = (typeof State)[keyof typeof State]

/**
 * One response on a connection. Feed it every read (`push`); tell it when the connection closed
 * (`close`). After `done`, `keepAlive` says whether the connection may carry another request, and
 * `extra` counts bytes that came after the response (a server talking unasked: never reuse it).
 * @example
 * const parser = new Http1ResponseParser({ onHead: (s) => console.log(s), onBody: () => {}, onEnd: () => {} })
 * parser.push(Buffer.from('HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nhi')) // logs 200; parser.done is true
 */
export class Http1ResponseParser {
  readonly #sink: Http1Sink
  #state: State = State.Head
  /** Head bytes (or a chunk-size / trailer line) split across reads. */
  #pending: Buffer | null = null
  #left = 0
  #keepAlive = true
  /** Bytes that arrived after the response ended. */
  extra = 0

  constructor(sink: Http1Sink) {
    this.#sink = sink
  }

  /** The response ended (its last body byte parsed, or its connection closed after a close-delimited body). */
  get done(): boolean {
    return this.#state === State.Done
  }

  /** Whether the connection may carry another request once this response is done. */
  get keepAlive(): boolean {
    return this.#keepAlive && this.extra === 0
  }

  /** True once a head has been parsed (the server answered). */
  get answered(): boolean {
    return this.#state !== State.Head
  }

  /** Parses one read. @throws Http1ParseError for a reply that is not HTTP/1.1 */
  push(bytes: Uint8Array): void {
    let at = 0
    while (at < bytes.length) {
      switch (this.#state) {
        case State.Head:
        case State.ChunkSize:
        case State.Trailers:
          at = this.#line(bytes, at)
          break
        case State.Length:
        case State.ChunkData: {
          const n = Math.min(this.#left, bytes.length - at)
          this.#sink.onBody(bytes.subarray(at, at + n))
          at += n
          this.#left -= n
          if (this.#left > 0) break
          if (this.#state === State.Length) this.#end()
          else {
            this.#state = State.ChunkDataEnd
            this.#left = 2
          }
          break
        }
        case State.ChunkDataEnd: {
          const expected = this.#left === 2 ? CR : LF
          if (bytes[at] !== expected) throw new Http1ParseError('HPE_STRICT', 'a chunk of the body does not end with CRLF')
          at++
          if (--this.#left === 0) this.#state = State.ChunkSize
          break
        }
        case State.UntilClose:
          this.#sink.onBody(bytes.subarray(at))
          at = bytes.length
          break
        case State.Done:
          this.extra += bytes.length - at
          at = bytes.length
          break
      }
    }
  }

  /**
   * The connection closed. A close-delimited body ends here; any other unfinished response is cut.
   * @returns true when the response is complete
   */
  close(): boolean {
    if (this.#state === State.UntilClose) this.#end()
    return this.#state === State.Done
  }

  /** Takes a head, chunk-size or trailer line (a head: up to its blank line) from `from`; returns where parsing goes on. */
  #line(bytes: Uint8Array, from: number): number {
    if (this.#state === State.Head) return this.#headBytes(bytes, from)
    if (this.#state === State.ChunkSize && this.#pending === null) {
      // The common case, without allocating: hex digits, then CRLF, whole in this read.
      let size = 0
      let at = from
      for (; at < bytes.length && at - from < 12; at++) {
        const digit = hexDigit(bytes[at] as number)
        if (digit < 0) break
        size = size * 16 + digit
      }
      if (at > from && at + 1 < bytes.length && bytes[at] === CR && bytes[at + 1] === LF) {
        this.#left = size
        this.#state = size === 0 ? State.Trailers : State.ChunkData
        return at + 2
      }
    }
    const lf = bytes.indexOf(LF, from)
    const piece = Buffer.from(bytes.buffer, bytes.byteOffset + from, (lf < 0 ? bytes.length : lf + 1) - from)
    const text = this.#pending === null ? piece : Buffer.concat([this.#pending, piece])
    if (text.length > MAX_CHUNK_LINE) this.#overflow()
    if (lf < 0) {
      this.#pending = Buffer.from(text)
      return bytes.length
    }
    this.#pending = null
    const line = text.toString('latin1').replace(/\r?\n$/, '')
    if (this.#state === State.ChunkSize) this.#chunkSize(line)
    else if (line === '') this.#end()
    return lf + 1
  }

  /** Takes head bytes up to the blank line that ends the head, across reads; parses the head once it is whole. */
  #headBytes(bytes: Uint8Array, from: number): number {
    const before = this.#pending?.length ?? 0
    const piece = Buffer.from(bytes.buffer, bytes.byteOffset + from, bytes.length - from)
    const text = this.#pending === null ? piece : Buffer.concat([this.#pending, piece])
    // The blank line may begin in an earlier read: search from a little before this one.
    let end = -1
    for (let at = text.indexOf(LF, Math.max(0, before - 3)); at >= 0; at = text.indexOf(LF, at + 1)) {
      if (text[at + 1] === LF) {
        end = at + 2
        break
      }
      if (text[at + 1] === CR && text[at + 2] === LF) {
        end = at + 3
        break
      }
    }
    if (end < 0) {
      if (text.length > MAX_HEAD_BYTES) this.#overflow()
      this.#pending = Buffer.from(text)
      return bytes.length
    }
    if (end > MAX_HEAD_BYTES) this.#overflow()
    this.#pending = null
    this.#head(text.toString('latin1', 0, end))
    return from + end - before
  }

  #overflow(): never {
    throw this.#state === State.Head
      ? new Http1ParseError('HPE_HEADER_OVERFLOW', `the response head is longer than ${MAX_HEAD_BYTES} bytes`)
      : new Http1ParseError('HPE_INVALID_CHUNK_SIZE', `a chunk-size or trailer line is longer than ${MAX_CHUNK_LINE} bytes`)
  }

  #head(text: string): void {
    const lines = text.split(/\r?\n/)
    const statusLine = lines[0] ?? ''
    const match = /^HTTP\/1\.([01]) (\d{3})(?: .*)?$/.exec(statusLine)
    if (match === null) throw new Http1ParseError('HPE_INVALID_STATUS', `invalid status line: ${JSON.stringify(statusLine.slice(0, 80))}`)
    const http10 = match[1] === '0'
    const status = Number(match[2])
    const headers: Http1Headers = {}
    for (let i = 1; i < lines.length; i++) {
      const line = lines[i] as string
      if (line === '') continue
      const colon = line.indexOf(':')
      if (colon <= 0 || !/^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/.test(line.slice(0, colon))) {
        throw new Http1ParseError('HPE_INVALID_HEADER_TOKEN', `invalid header line: ${JSON.stringify(line.slice(0, 80))}`)
      }
      const name = line.slice(0, colon).toLowerCase()
      const value = line.slice(colon + 1).trim()
      const had = headers[name]
      headers[name] = had === undefined ? value : Array.isArray(had) ? [...had, value] : [had, value]
    }
    // 1xx: an interim response (100 Continue, 103 Early Hints); the real one follows.
    if (status >= 100 && status < 200) return
    const connection = headerText(headers.connection).toLowerCase()
    this.#keepAlive = http10 ? /\bkeep-alive\b/.test(connection) : !/\bclose\b/.test(connection)
    const transfer = headerText(headers['transfer-encoding']).toLowerCase()
    const length = headers['content-length']
    this.#sink.onHead(status, headers)
    if (status === 204 || status === 304) {
      this.#end()
    } else if (/\bchunked\s*$/.test(transfer)) {
      this.#state = State.ChunkSize
    } else if (length !== undefined) {
      const text = Array.isArray(length) ? length[0] : length
      if (!/^\d+$/.test(text ?? '') || (Array.isArray(length) && length.some((l) => l !== text))) {
        throw new Http1ParseError('HPE_INVALID_CONTENT_LENGTH', `invalid content-length: ${JSON.stringify(length)}`)
      }
      this.#left = Number(text)
      if (this.#left === 0) this.#end()
      else this.#state = State.Length
    } else {
      this.#keepAlive = false
      this.#state = State.UntilClose
    }
  }

  #chunkSize(line: string): void {
    const size = /^([0-9A-Fa-f]{1,12})[ \t]*(?:;.*)?$/.exec(line)
    if (size === null) throw new Http1ParseError('HPE_INVALID_CHUNK_SIZE', `invalid chunk size line: ${JSON.stringify(line.slice(0, 40))}`)
    this.#left = Number.parseInt(size[1] as string, 16)
    this.#state = this.#left === 0 ? State.Trailers : State.ChunkData
  }

  #end(): void {
    this.#state = State.Done
    this.#sink.onEnd()
  }
}

function headerText(value: string | string[] | undefined): string {
  return value === undefined ? '' : Array.isArray(value) ? value.join(', ') : value
}

/** The value of an ASCII hex digit, or -1. */
function hexDigit(c: number): number {
  if (c >= 48 && c <= 57) return c - 48
  if (c >= 97 && c <= 102) return c - 87
  if (c >= 65 && c <= 70) return c - 55
  return -1
}
