/**
 * The packed form of a request's inter-token gaps in a stored run record (`itlPacked`): whole
 * microseconds, each gap minus the one before (the first as is), zigzag-mapped so small negative
 * deltas stay small, written as unsigned LEB128 varints, then base64 (standard alphabet, padded).
 * Gaps of a steady stream differ by a few µs, so most take one or two bytes. Pure functions:
 * the record writers pack, the record schema unpacks on read.
 *
 * @example packGaps([10.002, 9.998, 10.01]) // { unit: 'us', codec: 'delta-zigzag-leb128', count: 3, base64: 'pJwBBxg=' }
 */
import { z } from 'zod'

/** The one codec `itlPacked` is written in. */
export const ITL_CODEC = 'delta-zigzag-leb128'

/**
 * The largest gap packed, µs (about 35 years): twice it still fits a double's 53-bit integer, so
 * every delta and its zigzag value are exact. A larger gap stays in `itlMs`.
 */
const MAX_GAP_US = 2 ** 50

/** A varint of a value up to 2^53 takes at most 8 bytes of 7 bits. */
const MAX_VARINT_BYTES = 8

/** A request's gaps packed: see the module comment and docs/metrics.md, "Gaps, packed". */
export const ItlPacked = z
  .object({
    /** The unit each gap is rounded to before packing: microseconds. */
    unit: z.literal('us').describe('unit of the packed integers: microseconds'),
    /** The codec: delta, zigzag, LEB128 varint. */
    codec: z.literal(ITL_CODEC).describe('delta (first gap as is), zigzag (every value), unsigned LEB128 varints'),
    /** How many gaps the bytes hold. */
    count: z.int().nonnegative().describe('number of gaps the bytes hold'),
    /** The varint bytes in base64, standard alphabet with padding. */
    base64: z.string().describe('the varint bytes, base64 (standard alphabet, padded)'),
  })
  .describe(
    "a request's inter-token gaps packed: integer microseconds, each minus the previous (the first as is), " +
      'zigzag-mapped, LEB128 varints, base64. Reading a record decodes it into itlMs (ms = us / 1000).',
  )
export type ItlPacked = z.infer<typeof ItlPacked>

/**
 * A gap rounded to a whole microsecond, in ms, exactly as it reads back from `itlPacked`: records
 * keep their gaps this way, so a record read from disk equals the one that was measured.
 * @example quantizeGap(10.0021999) // 10.002
 */
export function quantizeGap(gapMs: number): number {
  // `+ 0` turns a -0 (a gap of -0.0004 ms) into 0, which is what the packed form reads back.
  return Math.round(gapMs * 1000) / 1000 + 0
}

/** Every gap of a request quantized ({@link quantizeGap}); null (no gaps kept) stays null. */
export function quantizeGaps(gapsMs: readonly number[] | null): number[] | null {
  return gapsMs === null ? null : gapsMs.map(quantizeGap)
}

/**
 * Packs a request's gaps (ms). Null when a gap is not a whole number of microseconds (a record
 * made before servegate quantized its gaps) or is beyond `MAX_GAP_US`: such gaps stay in
 * `itlMs`, so writing a record never changes a figure.
 */
export function packGaps(gapsMs: readonly number[]): ItlPacked | null {
  const bytes = Buffer.allocUnsafe(gapsMs.length * MAX_VARINT_BYTES)
  let n = 0
  let previous = 0
  for (const gap of gapsMs) {
    const us = Math.round(gap * 1000)
    if (!(Math.abs(us) <= MAX_GAP_US) || us / 1000 !== gap) return null
    const delta = us - previous
    previous = us
    let zigzag = delta >= 0 ? delta * 2 : -delta * 2 - 1
    if (zigzag < 0x80000000) {
      while (zigzag > 0x7f) {
        bytes[n++] = (zigzag & 0x7f) | 0x80
        zigzag >>>= 7
      }
    } else {
      while (zigzag > 0x7f) {
        bytes[n++] = (zigzag % 0x80) | 0x80
        zigzag = Math.floor(zigzag / 0x80)
      }
    }
    bytes[n++] = zigzag
  }
  return { unit: 'us', codec: ITL_CODEC, count: gapsMs.length, base64: bytes.toString('base64', 0, n) }
}

/** Why packed gaps could not be read: the field at fault and what is wrong with it. */
export interface UnpackProblem {
  field: 'unit' | 'codec' | 'count' | 'base64'
  message: string
}

/** The fields of packed gaps as read from a file, not yet checked. */
type PackedFields = { unit?: unknown; codec?: unknown; count?: unknown; base64?: unknown }

/** Checks packed gaps' unit, codec, count and base64; their bytes, or which field is wrong. */
function checkedBytes(packed: PackedFields): { count: number; bytes: Buffer } | UnpackProblem {
  if (packed.unit !== 'us') return { field: 'unit', message: `unit is ${JSON.stringify(packed.unit)}; expected "us"` }
  if (packed.codec !== ITL_CODEC) {
    return { field: 'codec', message: `codec is ${JSON.stringify(packed.codec)}; this servegate reads "${ITL_CODEC}"` }
  }
  const { count, base64 } = packed
  if (typeof count !== 'number' || !Number.isInteger(count) || count < 0) {
    return { field: 'count', message: `count is ${JSON.stringify(count)}; expected a whole number ≥ 0` }
  }
  if (typeof base64 !== 'string') return { field: 'base64', message: `base64 is ${JSON.stringify(base64)}; expected a string` }
  const bytes = Buffer.from(base64, 'base64')
  // Node's decoder skips what is not base64; a string that does not encode back the same is corrupt.
  if (bytes.toString('base64') !== base64) {
    return { field: 'base64', message: 'base64 is not standard padded base64 (a character outside A-Z a-z 0-9 + / =, or cut short)' }
  }
  if (count > bytes.length) {
    return { field: 'count', message: `count is ${count} but the ${bytes.length} bytes hold at most ${bytes.length} gaps` }
  }
  return { count, bytes }
}

/** Decodes `count` gaps from `bytes` into `out` from `offset` (null: checks them only), or says what is wrong. */
function decodeGaps(count: number, bytes: Buffer, out: number[] | Float64Array | null, offset: number): UnpackProblem | null {
  let at = 0
  let previous = 0
  for (let i = 0; i < count; i++) {
    let zigzag = 0
    let scale = 1
    let length = 0
    for (;;) {
      if (at >= bytes.length) {
        const why = length === 0 ? `hold only ${i} gaps` : `end inside gap ${i + 1}'s varint (truncated)`
        return { field: length === 0 ? 'count' : 'base64', message: `count is ${count} but the bytes ${why}` }
      }
      const byte = bytes[at++] as number
      zigzag += (byte & 0x7f) * scale
      scale *= 0x80
      if (++length > MAX_VARINT_BYTES) return { field: 'base64', message: `gap ${i + 1}'s varint is longer than ${MAX_VARINT_BYTES} bytes` }
      if (byte < 0x80) break
    }
    const delta = zigzag % 2 === 0 ? zigzag / 2 : -(zigzag + 1) / 2
    previous += delta
    if (!Number.isSafeInteger(previous)) return { field: 'base64', message: `gap ${i + 1} is beyond ${Number.MAX_SAFE_INTEGER} µs` }
    if (out !== null) out[offset + i] = previous / 1000
  }
  if (at !== bytes.length) {
    return { field: 'count', message: `count is ${count} but ${bytes.length - at} bytes are left after the last gap` }
  }
  return null
}

/**
 * Reads packed gaps back into ms (µs / 1000), or says which field is wrong: a unit or codec this
 * servegate does not write, base64 that is not canonical standard base64, a varint cut short or
 * too long, or bytes holding more or fewer gaps than `count`.
 */
export function unpackGaps(packed: PackedFields): number[] | UnpackProblem {
  const checked = checkedBytes(packed)
  if ('field' in checked) return checked
  const gaps = new Array<number>(checked.count)
  return decodeGaps(checked.count, checked.bytes, gaps, 0) ?? gaps
}

/**
 * Reads packed gaps into `out` from `offset`, as {@link unpackGaps} reads them (null: checks them
 * only): their count, or which field is wrong. A cell's pooled gaps fill one array so, never a
 * decoded array a request.
 */
export function unpackGapsInto(packed: PackedFields, out: Float64Array | null, offset = 0): number | UnpackProblem {
  const checked = checkedBytes(packed)
  if ('field' in checked) return checked
  return decodeGaps(checked.count, checked.bytes, out, offset) ?? checked.count
}
