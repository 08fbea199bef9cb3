const LF = 0x0a
const CR = 0x0d

/** What one read of the byte stream produced: the `data` payloads of the events it completed. */
export interface SseParser {
  /** Feeds the next bytes; returns the data of every event completed by them, in order. */
  push(bytes: Uint8Array): string[]
  /** Flushes at end of stream: an unterminated last event is dispatched if it has data. */
  end(): string[]
}

/**
 * A Server-Sent Events parser over raw bytes (WHATWG event-stream rules, `data` field only):
 * partial lines across reads, several events in one read, LF / CRLF / CR line ends, comments
 * (`: keep-alive`), `event:`/`id:`/`retry:` fields (ignored), multi-line data joined with `\n`.
 * UTF-8 is decoded per complete line, so a code point split across reads is never mangled.
 * It does no I/O and no JSON parsing: the caller timestamps a read, then pushes it here.
 * @example
 * const p = createSseParser()
 * p.push(Buffer.from('data: {"a":1}\n\ndata: [DO')) // ['{"a":1}']
 * p.push(Buffer.from('NE]\n\n'))                     // ['[DONE]']
 */
export function createSseParser(): SseParser {
  let pending: Buffer | null = null
  let data: string | null = null
  let lastWasCr = false

  function line(buf: Buffer, start: number, end: number, out: string[]): void {
    if (start === end) {
      if (data !== null) out.push(data)
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
  function scan(buf: Buffer, from: number, out: string[]): void {
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
        line(buf, start, i, out)
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
      const out: string[] = []
      const chunk = Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength)
      if (pending === null) scan(chunk, 0, out)
      else scan(Buffer.concat([pending, chunk]), pending.length, out)
      return out
    },
    end() {
      const out: string[] = []
      if (pending !== null) {
        line(pending, 0, pending.length, out)
        pending = null
      }
      if (data !== null) out.push(data)
      data = null
      return out
    },
  }
}

/**
 * Parses a whole byte sequence split into reads, as a pure function.
 * @example parseSse([Buffer.from('data: x\n'), Buffer.from('\n')]) // ['x']
 */
export function parseSse(reads: Iterable<Uint8Array>): string[] {
  const parser = createSseParser()
  const out: string[] = []
  for (const read of reads) out.push(...parser.push(read))
  out.push(...parser.end())
  return out
}
