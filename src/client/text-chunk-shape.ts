/** A text key followed by its string value's opening quote, as any JSON writer spaces it. */
const TEXT_KEY = /"(content|text)"\s*:\s*"/g

/** Consecutive chunks this stream's shape failed to match before it stops learning one. */
const GIVE_UP_AFTER_MISSES = 4

/** The text a learned shape is proven with: plain, and in no real chunk. */
const PROBE = 'servegate shape probe 7f3a'

/** Whether `s` needs no escape in a JSON string: no quote, no backslash, no control character. */
function plain(s: string): boolean {
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i)
    if (c === 0x22 || c === 0x5c || c < 0x20) return false
  }
  return true
}

/**
 * One stream's text chunk split around its text: an engine serializes every token's chunk the
 * same way (the same id, model and `created`, the same members in the same order), so a chunk
 * that is the learned chunk's bytes with only another plain text between them parses to the
 * learned chunk with that text. {@link textOf} reads such a chunk's text without `JSON.parse`
 * (a quarter of its cost, and none of its garbage); any other chunk is `null` and is parsed.
 *
 * It learns only from a chunk that carried nothing but its text: no finish reason, no usage, no
 * reasoning, no error, no timings. The text must need no escape and sit under the chunk's only
 * `"content"` or `"text"` key; the shape is then proven once with the caller's own parser, on the
 * learned bytes with a probe text between them. A stream whose chunks differ in more than their
 * text (a per-chunk timestamp) stops learning after a few misses, so it costs the parse path
 * little.
 * @example
 * const shape = new TextChunkShape()
 * const onlyText = (data: string) => JSON.parse(data).choices[0].delta.content
 * shape.learn('{"choices":[{"delta":{"content":"Hi"}}]}', 'Hi', onlyText)
 * shape.textOf('{"choices":[{"delta":{"content":" there"}}]}') // ' there'
 * shape.textOf('{"choices":[{"delta":{"content":"x"},"finish_reason":"stop"}]}') // null
 */
export class TextChunkShape {
  #head = ''
  #tail = ''
  #learned = false
  #misses = 0

  /** The text of `data` when it is the learned chunk with another plain text, else null. */
  textOf(data: string): string | null {
    if (!this.#learned) return null
    const head = this.#head
    const tail = this.#tail
    const end = data.length - tail.length
    if (end >= head.length && data.startsWith(head) && data.endsWith(tail)) {
      const text = data.slice(head.length, end)
      if (plain(text)) {
        this.#misses = 0
        return text
      }
    }
    this.#misses++
    return null
  }

  /** Whether {@link learn} is worth calling: a stream that missed too often has given up. */
  get learning(): boolean {
    return this.#misses < GIVE_UP_AFTER_MISSES
  }

  /**
   * Learns `data`'s shape, given that it parsed to a chunk whose only effect is the text `text`
   * (its first choice's `delta.content`, or `text`). Keeps the last shape where `data` does not
   * place the text unambiguously.
   * @param onlyText the caller's parse: a chunk's text when that text is its only effect, else null
   */
  learn(data: string, text: string, onlyText: (data: string) => string | null): void {
    if (text.length === 0 || !plain(text)) return
    const at = this.#textAt(data, text)
    if (at >= 0) {
      const head = data.slice(0, at)
      const tail = data.slice(at + text.length)
      // The key found may not be the one parsed (a key with an escaped quote that ends in `content`).
      if (onlyText(head + PROBE + tail) === PROBE) {
        this.#head = head
        this.#tail = tail
        this.#learned = true
        return
      }
    }
    // Counted as a miss: a stream whose chunks never place their text plainly stops paying for this.
    this.#misses++
  }

  /** Where `text` starts in `data`, under its only text key; -1 where there are none or several, or it is not there. */
  #textAt(data: string, text: string): number {
    let at = -1
    for (const m of data.matchAll(TEXT_KEY)) {
      if (at >= 0) return -1 // two text keys: which one is the parsed text is not read off the bytes
      at = m.index + m[0].length
    }
    return at >= 0 && data.startsWith(text, at) && data.charCodeAt(at + text.length) === 0x22 ? at : -1
  }
}
