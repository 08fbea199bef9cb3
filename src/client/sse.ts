const LF = 0x0a
const CR = 0x0d

/** A byte-stream parser that hands each completed event's `data` to its callback, in order. */
export interface SseParser {
  /** Feeds the next bytes; calls back once per event they complete. */
  push(bytes: Uint8Array): void
  /** Flushes at end of stream: an unterminated last event is dispatched if it has data. */
  end(): void
}

/**
 * A Server-Sent Events parser over raw bytes (WHATWG event-stream rules, `data` field only):
 * partial lines across reads, several events in one read, LF / CRLF / CR line ends, comments
 * (`: keep-alive`), `event:`/`id:`/`retry:` fields (ignored), multi-line data joined with `\n`.
 * UTF-8 is decoded per complete line, so a code point split across reads is never mangled.
 * It does no I/O and no JSON parsing: the caller timestamps a read, then pushes it here. Events
 * go to a callback fixed at creation, so a read allocates no result array (the hot path of a
 * client holding hundreds of streams).
 * @example
 * const p = createSseParser((data) => console.log(data))
 * p.push(Buffer.from('data: {"a":1}\n\ndata: [DO')) // logs {"a":1}
 * p.push(Buffer.from('NE]\n\n'))                     // logs [DONE]
 */
export function createSseParser(onData: (data: string) => void): SseParser {
  let pending: Buffer | null = null
  let data: string | null = null
  let lastWasCr = false

  function line(buf: Buffer, start: number, end: number): void {
    if (start === end) {
      if (data !== null) onData(data)
      data = null
      return
    }
    const first = buf[start]
    if (first === 0x3a) return // ':' comment / keep-alive
    // Field name up to ':'; value after ':' and one optional space.
    if (first === 0x64 && end - start >= 5 && buf[start + 1] === 0x61 && buf[start + 2] === 0x74 && buf[start + 3] === 0x61) {
      if (buf[start + 4] === 0x3a) {
        const valueStart = buf[start + 5] === 0x20 ? start + 6 : start + 5
        const value = buf.toString('utf8', valueStart, end)
        data = data === null ? value : `${data}\n${value}`
        return
      }
    }
    if (first === 0x64 && end - start === 4 && buf.toString('latin1', start, end) === 'data') {
      data = data === null ? '' : `${data}\n`
    }
    // Other fields (event, id, retry) do not carry completion data.
  }

  /** `from`: bytes before it are a carried-over partial line, already known to hold no line end. */
  function scan(buf: Buffer, from: number): void {
    let start = 0
    let i = from
    const n = buf.length
    if (lastWasCr && n > 0 && buf[0] === LF) {
      start = 1
      i = 1
    }
    lastWasCr = false
    while (i < n) {
      const b = buf[i]
      if (b === LF || b === CR) {
        line(buf, start, i)
        if (b === CR) {
          if (i + 1 < n) {
            if (buf[i + 1] === LF) i++
          } else {
            lastWasCr = true
          }
        }
        start = i + 1
      }
      i++
    }
    pending = start < n ? Buffer.from(buf.subarray(start)) : null
  }

  return {
    push(bytes) {
      const chunk = Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength)
      if (pending === null) scan(chunk, 0)
      else scan(Buffer.concat([pending, chunk]), pending.length)
    },
    end() {
      if (pending !== null) {
        const rest = pending
        pending = null
        line(rest, 0, rest.length)
      }
      if (data !== null) onData(data)
      data = null
    },
  }
}

/**
 * Parses a whole byte sequence split into reads, as a pure function.
 * @example parseSse([Buffer.from('data: x\n'), Buffer.from('\n')]) // ['x']
 */
export function parseSse(reads: Iterable<Uint8Array>): string[] {
  const out: string[] = []
  const parser = createSseParser((data) => out.push(data))
  for (const read of reads) parser.push(read)
  parser.end()
  return out
}
