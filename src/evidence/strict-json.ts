/**
 * JSON as `servegate verify` reads it: `JSON.parse`, and then no object may name a key twice.
 * JSON.parse keeps the last of two equal keys, other readers the first or either, so a file
 * with a duplicated key says different things to different readers; evidence refuses it.
 */
import { ServegateError } from '../errors.ts'

const QUOTE = 0x22
const BACKSLASH = 0x5c
const OPEN_OBJECT = 0x7b
const CLOSE_OBJECT = 0x7d
const OPEN_ARRAY = 0x5b
const CLOSE_ARRAY = 0x5d
const COMMA = 0x2c

/** One open object (its keys so far, the latest, whether a key comes next) or array (the index of its current item). */
type Frame = { keys: Set<string>; key: string; keyNext: boolean } | { index: number }

/** A JSON path to where the scan stands, e.g. `$.cells[0].arms[1]["a key"]`. */
function pathOf(stack: readonly Frame[]): string {
  let path = '$'
  for (const frame of stack) {
    if ('index' in frame) path += `[${frame.index}]`
    else path += /^[A-Za-z_$][A-Za-z0-9_$]*$/.test(frame.key) ? `.${frame.key}` : `[${JSON.stringify(frame.key)}]`
  }
  return path
}

/** The index of the quote that closes the string opened at `open`. */
function stringEnd(text: string, open: number): number {
  let end = text.indexOf('"', open + 1)
  for (;;) {
    let backslashes = 0
    while (text.charCodeAt(end - 1 - backslashes) === BACKSLASH) backslashes++
    if (backslashes % 2 === 0) return end
    end = text.indexOf('"', end + 1)
  }
}

/**
 * The first key that an object of valid JSON text names twice, with its JSON path and line, or
 * null. Keys are compared as decoded, so `"a"` and `"\u0061"` are the same key.
 */
export function duplicateKey(text: string): { key: string; path: string; line: number } | null {
  const stack: Frame[] = []
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i)
    if (c === QUOTE) {
      const end = stringEnd(text, i)
      const top = stack.at(-1)
      // A string where an object expects a key (valid JSON has a `:` after it) is the key.
      if (top !== undefined && 'keys' in top && top.keyNext) {
        const raw = text.slice(i + 1, end)
        const key = raw.includes('\\') ? (JSON.parse(`"${raw}"`) as string) : raw
        if (top.keys.has(key)) {
          top.key = key
          return { key, path: pathOf(stack), line: text.slice(0, i).split('\n').length }
        }
        top.keys.add(key)
        top.key = key
        top.keyNext = false
      }
      i = end
    } else if (c === OPEN_OBJECT) stack.push({ keys: new Set(), key: '', keyNext: true })
    else if (c === OPEN_ARRAY) stack.push({ index: 0 })
    else if (c === CLOSE_OBJECT || c === CLOSE_ARRAY) stack.pop()
    else if (c === COMMA) {
      const top = stack.at(-1) as Frame
      if ('index' in top) top.index++
      else top.keyNext = true
    }
  }
  return null
}

/**
 * Parses JSON, refusing a key named twice in one object; bytes must be UTF-8.
 * @param file names the file in the error
 * @throws ServegateError FILE_INVALID naming the file when it is not UTF-8 or not JSON, and naming
 * the key and its JSON path when a key repeats
 * @example parseStrictJson('{"a":1,"a":2}', 'index.json') // throws: index.json: the key "a" appears twice in one object, at $.a (line 1)…
 */
export function parseStrictJson(content: string | Uint8Array, file: string): unknown {
  let text: string
  try {
    text = typeof content === 'string' ? content : new TextDecoder('utf-8', { fatal: true }).decode(content)
  } catch (error) {
    throw new ServegateError('FILE_INVALID', `${file}: not UTF-8 text`, { cause: error })
  }
  let value: unknown
  try {
    value = JSON.parse(text)
  } catch (error) {
    throw new ServegateError('FILE_INVALID', `${file}: not JSON (${(error as Error).message})`, { cause: error })
  }
  const duplicate = duplicateKey(text)
  if (duplicate !== null)
    throw new ServegateError(
      'FILE_INVALID',
      `${file}: the key ${JSON.stringify(duplicate.key)} appears twice in one object, at ${duplicate.path} (line ${duplicate.line}); ` +
        'JSON readers differ on which value counts, so evidence holds each key once',
    )
  return value
}
