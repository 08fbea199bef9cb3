import { describe, expect, test } from 'vitest'
import { ITL_CODEC, ItlPacked, packGaps, quantizeGap, quantizeGaps, unpackGaps } from './itl-packed.ts'
import { runRecordJsonSchema } from './json-schema.ts'
import { RequestRecord } from './run.ts'
import { okRequest } from '../../fixtures/gate-fixture.ts'

/** Packs and reads back, asserting the round trip is exact. */
function roundTrip(gaps: number[]): ItlPacked {
  const packed = packGaps(gaps)
  expect(packed).not.toBeNull()
  expect(ItlPacked.parse(packed)).toEqual(packed)
  expect(unpackGaps(packed as ItlPacked)).toEqual(gaps)
  return packed as ItlPacked
}

describe('itlPacked: delta, zigzag, LEB128, base64', () => {
  test('the worked example of docs/metrics.md, byte for byte', () => {
    const packed = roundTrip([10.002, 9.998, 10.01])
    // µs [10002, 9998, 10010] → deltas [10002, -4, 12] → zigzag [20004, 7, 24] → varints a4 9c 01 | 07 | 18.
    expect(packed).toEqual({ unit: 'us', codec: 'delta-zigzag-leb128', count: 3, base64: 'pJwBBxg=' })
    expect([...Buffer.from(packed.base64, 'base64')]).toEqual([0xa4, 0x9c, 0x01, 0x07, 0x18])
    expect(ITL_CODEC).toBe('delta-zigzag-leb128')
  })

  test('no gaps, one gap, a negative first gap, -0 and gaps of hours and years round-trip exactly', () => {
    expect(roundTrip([])).toEqual({ unit: 'us', codec: ITL_CODEC, count: 0, base64: '' })
    expect(roundTrip([0.001]).base64).toBe(Buffer.from([2]).toString('base64'))
    // The first gap is zigzagged too: -1 µs is 1, not a 10-byte varint.
    expect(Buffer.from(roundTrip([-0.001, 5]).base64, 'base64')[0]).toBe(1)
    roundTrip([-12.5, 3, -7.25, 0, 0])
    // 2^31 µs and more: beyond 32-bit arithmetic.
    const hour = 3_600_000
    roundTrip([hour, 2 * hour + 0.001, 0.002, 36 * hour, 2 ** 31 / 1000, 2 ** 32 / 1000 + 0.001, 0])
    roundTrip([2 ** 50 / 1000, -(2 ** 50) / 1000, 2 ** 50 / 1000])
    expect(unpackGaps(packGaps([-0]) as ItlPacked)).toEqual([0])
  })

  test('a steady 10 ms stream packs into about 1.3 bytes a gap, real-engine gaps of 15-40 ms into about 3', () => {
    let seed = 7
    const random = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31
    const steady = Array.from({ length: 1000 }, () => quantizeGap(10 + (random() - 0.5) * 0.06))
    const engine = Array.from({ length: 1000 }, () => quantizeGap(15 + random() * 25))
    const bytes = (gaps: number[]) => Buffer.from(roundTrip(gaps).base64, 'base64').length / gaps.length
    expect(bytes(steady)).toBeLessThan(1.5)
    expect(bytes(engine)).toBeLessThan(3.1)
  })

  test('gaps that are not whole microseconds, or beyond 2^50 µs, are not packed (they stay in itlMs)', () => {
    expect(packGaps([10.0004])).toBeNull()
    expect(packGaps([1, 0.1 + 0.2])).toBeNull()
    expect(packGaps([2 ** 51 / 1000])).toBeNull()
    expect(packGaps([Number.NaN])).toBeNull()
    expect(packGaps([Number.POSITIVE_INFINITY])).toBeNull()
  })

  test('quantizing rounds to the µs, makes -0 a 0, and what it gives always packs', () => {
    expect(quantizeGaps([10.0021999, 9.9995, -0.0004, 0.1 + 0.2])).toEqual([10.002, 10, 0, 0.3])
    expect(Object.is(quantizeGap(-0.0004), 0)).toBe(true)
    expect(quantizeGaps(null)).toBeNull()
    for (let i = 0; i < 2000; i++) {
      const gaps = [Math.random() * 100, Math.random() * 1e7, -Math.random()].map(quantizeGap)
      expect(unpackGaps(packGaps(gaps) as ItlPacked)).toEqual(gaps)
    }
  })
})

test('the published JSON Schema pins itlPacked on every request: { unit, codec, count, base64 } or null', () => {
  type Variant = { required: string[]; properties: { itlPacked: { anyOf: unknown[] }; itlMs: { description?: string } } }
  const schema = JSON.parse(runRecordJsonSchema()) as { properties: { requests: { items: { oneOf: Variant[] } } } }
  for (const variant of schema.properties.requests.items.oneOf) {
    expect(variant.required).toContain('itlPacked')
    const [packed, none] = variant.properties.itlPacked.anyOf
    expect(none).toEqual({ type: 'null' })
    expect(packed).toMatchObject({
      type: 'object',
      required: ['unit', 'codec', 'count', 'base64'],
      additionalProperties: false,
      properties: {
        unit: { type: 'string', const: 'us' },
        codec: { type: 'string', const: 'delta-zigzag-leb128' },
        count: { type: 'integer', minimum: 0 },
        base64: { type: 'string' },
      },
    })
    expect(variant.properties.itlMs.description).toMatch(/null in a file that packs them in itlPacked/)
  }
})

describe('corrupt packed gaps are refused, naming the field', () => {
  const good = packGaps([10.002, 9.998, 10.01]) as ItlPacked
  const cases: Array<[string, Record<string, unknown>, RegExp, string]> = [
    ['another codec', { ...good, codec: 'zstd' }, /codec is "zstd"; this servegate reads "delta-zigzag-leb128"/, 'codec'],
    ['another unit', { ...good, unit: 'ms' }, /unit is "ms"; expected "us"/, 'unit'],
    ['a count too high', { ...good, count: 4 }, /count is 4 but the bytes hold only 3 gaps/, 'count'],
    ['a count too low', { ...good, count: 2 }, /count is 2 but 1 bytes are left after the last gap/, 'count'],
    ['a count beyond the bytes', { ...good, count: 1e9 }, /count is 1000000000 but the 5 bytes hold at most 5 gaps/, 'count'],
    ['a negative count', { ...good, count: -1 }, /count is -1; expected a whole number/, 'count'],
    [
      'a varint cut short',
      { ...good, base64: Buffer.from([0xa4, 0x9c, 0x01, 0x07, 0x98]).toString('base64') },
      /end inside gap 3's varint \(truncated\)/,
      'base64',
    ],
    [
      'a varint of 9 bytes',
      { ...good, count: 1, base64: Buffer.alloc(9, 0x81).toString('base64') },
      /varint is longer than 8 bytes/,
      'base64',
    ],
    ['a character outside base64', { ...good, base64: 'pJwB*xg=' }, /not standard padded base64/, 'base64'],
    ['base64 without its padding', { ...good, base64: 'pJwBBxg' }, /not standard padded base64/, 'base64'],
    // Bytes fb 01 (one gap) are "+wE=" in the standard alphabet, "-wE=" in the URL-safe one, which Node would decode alike.
    ['base64 of the URL-safe alphabet', { ...good, count: 1, base64: '-wE=' }, /not standard padded base64/, 'base64'],
  ]
  test.each(cases)('%s', (_, packed, message, field) => {
    const problem = unpackGaps(packed)
    expect(problem).toMatchObject({ field, message: expect.stringMatching(message) })
  })

  test('a stored request with corrupt gaps fails its schema at requests[i].itlPacked.<field>, naming the request', () => {
    const request = { ...okRequest(17), itlPacked: { ...good, count: 4 } }
    const result = RequestRecord.safeParse(request)
    expect(result.success).toBe(false)
    expect(result.error?.issues[0]).toMatchObject({
      path: ['itlPacked', 'count'],
      message: expect.stringMatching(/^request 17: itlPacked\.count is 4 but the bytes hold only 3 gaps; the file is corrupt/),
    })
    const both = RequestRecord.safeParse({ ...okRequest(3, { itlMs: [1] }), itlPacked: good })
    expect(both.error?.issues[0]).toMatchObject({
      path: ['itlMs'],
      message: expect.stringMatching(/request 3: itlMs and itlPacked are both set/),
    })
  })

  test('a stored request reads its packed gaps into itlMs; one of an older servegate (itlMs, no itlPacked) reads as written', () => {
    expect(RequestRecord.parse({ ...okRequest(0), itlPacked: good })).toMatchObject({
      itlMs: [10.002, 9.998, 10.01],
      itlPacked: null,
    })
    const old: Record<string, unknown> = { ...okRequest(1, { itlMs: [10.0021999, 3] }) }
    delete old.itlPacked
    expect(RequestRecord.parse(old)).toMatchObject({ itlMs: [10.0021999, 3], itlPacked: null })
  })
})
