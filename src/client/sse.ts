import { ServegateError } from '../errors.ts'

const LF = 0x0a
const CR = 0x0d

/** The default cap on one SSE line and on one event's data: far above any real chunk (a few KiB). @default 4 MiB */
export const DEFAULT_MAX_SSE_LINE_BYTES = 4 * 1024 * 1024

/** How a parser bounds what it buffers. */
export interface SseParserOptions {
  /** Bytes one line (and one event's joined data) may hold before `push` throws `STREAM_PROTOCOL`. @default 4 MiB */
  maxLineBytes?: number
}

/** A byte-stream parser that hands each completed event's `data` to its callback, in order. */
export interface SseParser {
  /** Feeds the next bytes; calls back once per event they complete. */
  push(bytes: Uint8Array): void
  /** Flushes at end of stream: an unterminated last event is dispatched if it has data. */
  end(): void
}

/**
 * The line ends (LF or CR) of one read, found with the native `indexOf`. The next CR is searched
 * once and kept until the scan passes it, so a read of many LF-ended events (what every engine
 * sends) is searched for CRs once, not once an event.
 */
class LineEnds {
  #buf: Buffer | null = null
  #from = 0
  #nextCr = -1

  /** Forgets the read: the next `find` searches afresh (a caller may reuse its buffer). */
  reset(): void {
    this.#buf = null
  }

  /** The index of the first LF or CR in `buf` from `from`, or -1. */
  find(buf: Buffer, from: number): number {
    if (this.#buf !== buf || (this.#nextCr >= 0 && this.#nextCr < from) || from < this.#from) {
      this.#buf = buf
      this.#from = from
      this.#nextCr = buf.indexOf(CR, from)
    }
    const lf = buf.indexOf(LF, from)
    return this.#nextCr >= 0 && (lf < 0 || this.#nextCr < lf) ? this.#nextCr : lf
  }
}

/**
 * A Server-Sent Events parser over raw bytes (WHATWG event-stream rules, `data` field only):
 * partial lines across reads, several events in one read, LF / CRLF / CR line ends, comments
 * (`: keep-alive`), `event:`/`id:`/`retry:` fields (ignored), multi-line data joined with `\n`.
 * UTF-8 is decoded per complete line, so a code point split across reads is never mangled.
 * It does no I/O and no JSON parsing: the caller timestamps a read, then pushes it here. Events
 * go to a callback fixed at creation, so a read allocates no result array (the hot path of a
 * client holding hundreds of streams). A partial line is kept as a list of reads and joined once
 * when its end arrives (linear in the bytes, however many reads it spans); a line or an event
 * longer than `maxLineBytes` makes `push` throw instead of buffering without bound.
 * @throws ServegateError `STREAM_PROTOCOL` from `push` when a line or an event exceeds the cap
 * @example
 * const p = createSseParser((data) => console.log(data))
 * p.push(Buffer.from('data: {"a":1}\n\ndata: [DO')) // logs {"a":1}
 * p.push(Buffer.from('NE]\n\n'))                     // logs [DONE]
 */
export function createSseParser(onData: (data: string) => void, options: SseParserOptions = {}): SseParser {
  const maxLineBytes = options.maxLineBytes ?? DEFAULT_MAX_SSE_LINE_BYTES
  // The reads of the line that has not ended yet, joined only once its end arrives.
  let pending: Buffer[] = []
  let pendingBytes = 0
  let data: string | null = null
  let dataBytes = 0
  let lastWasCr = false

  function tooLong(what: string, bytes: number): never {
    const size = (n: number): string => (n >= 1024 * 1024 ? `${(n / (1024 * 1024)).toFixed(1)} MiB` : `${n} bytes`)
    throw new ServegateError(
      'STREAM_PROTOCOL',
      `${what} exceeds the ${size(maxLineBytes)} cap of the SSE parser (${size(bytes)} so far); no real chunk is that large`,
    )
  }

  function appendData(value: string, bytes: number): void {
    dataBytes += bytes
    if (dataBytes > maxLineBytes) tooLong("one event's data", dataBytes)
    data = data === null ? value : `${data}\n${value}`
  }

  function line(buf: Buffer, start: number, end: number): void {
    if (start === end) {
      if (data !== null) onData(data)
      data = null
      dataBytes = 0
      return
    }
    if (end - start > maxLineBytes) tooLong('one line', end - start)
    const first = buf[start]
    if (first === 0x3a) return // ':' comment / keep-alive
    // Field name up to ':'; value after ':' and one optional space.
    if (first === 0x64 && end - start >= 5 && buf[start + 1] === 0x61 && buf[start + 2] === 0x74 && buf[start + 3] === 0x61) {
      if (buf[start + 4] === 0x3a) {
        const valueStart = buf[start + 5] === 0x20 ? start + 6 : start + 5
        appendData(buf.toString('utf8', valueStart, end), end - valueStart)
        return
      }
    }
    if (first === 0x64 && end - start === 4 && buf.toString('latin1', start, end) === 'data') appendData('', 0)
    // Other fields (event, id, retry) do not carry completion data.
  }

  const ends = new LineEnds()
  const lineEnd = (buf: Buffer, from: number): number => ends.find(buf, from)

  /** Consumes the line end at `i` (CRLF as one); returns the index after it. */
  function skipLineEnd(buf: Buffer, i: number): number {
    if (buf[i] === CR) {
      if (i + 1 < buf.length) {
        if (buf[i + 1] === LF) return i + 2
      } else {
        lastWasCr = true
      }
    }
    return i + 1
  }

  function scan(buf: Buffer): void {
    ends.reset() // a caller may reuse its buffer for the next read: search it afresh
    let start = 0
    if (lastWasCr && buf.length > 0 && buf[0] === LF) start = 1
    lastWasCr = false
    if (pending.length > 0) {
      const i = lineEnd(buf, start)
      if (i < 0) {
        keep(buf.subarray(start))
        return
      }
      // The carried-over line ends in this read: join it once.
      const whole = Buffer.concat([...pending, buf.subarray(start, i)])
      pending = []
      pendingBytes = 0
      line(whole, 0, whole.length)
      start = skipLineEnd(buf, i)
    }
    for (;;) {
      const i = lineEnd(buf, start)
      if (i < 0) break
      line(buf, start, i)
      start = skipLineEnd(buf, i)
    }
    if (start < buf.length) keep(buf.subarray(start))
  }

  /** Keeps a partial line's bytes (copied: the caller may reuse its buffer). */
  function keep(part: Buffer): void {
    if (part.length === 0) return
    pendingBytes += part.length
    if (pendingBytes > maxLineBytes) {
      pending = []
      tooLong('one line', pendingBytes)
    }
    pending.push(Buffer.from(part))
  }

  return {
    push(bytes) {
      scan(Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength))
    },
    end() {
      if (pending.length > 0) {
        const rest = Buffer.concat(pending)
        pending = []
        pendingBytes = 0
        line(rest, 0, rest.length)
      }
      if (data !== null) onData(data)
      data = null
      dataBytes = 0
    },
  }
}

/**
 * Parses a whole byte sequence split into reads, as a pure function.
 * @example parseSse([Buffer.from('data: x\n'), Buffer.from('\n')]) // ['x']
 */
export function parseSse(reads: Iterable<Uint8Array>, options: SseParserOptions = {}): string[] {
  const out: string[] = []
  const parser = createSseParser((data) => out.push(data), options)
  for (const read of reads) parser.push(read)
  parser.end()
  return out
}
