import { describe, expect, test } from 'vitest'
import { decodeGgufHeader, encodeGguf } from './gguf.ts'

describe('encodeGguf', () => {
  test('round-trips every value type and aligns each tensor', () => {
    const bytes = encodeGguf(
      {
        'general.alignment': { type: 'u32', value: 64 },
        i: { type: 'i32', value: -3 },
        f: { type: 'f32', value: 0.5 },
        b: { type: 'bool', value: true },
        s: { type: 'string', value: '\u2581h\u00e9' },
        ss: { type: 'string[]', value: ['a', ''] },
        fs: { type: 'f32[]', value: [1.5, -2] },
        is: { type: 'i32[]', value: [6, -1] },
      },
      [
        { name: 'a', shape: [3], data: Float32Array.of(1, 2, 3) },
        { name: 'b', shape: [2, 2], data: Float32Array.of(4, 5, 6, 7) },
      ],
    )
    const header = decodeGgufHeader(bytes)
    expect(header.version).toBe(3)
    expect(header.metadata).toEqual({
      'general.alignment': 64,
      i: -3,
      f: 0.5,
      b: true,
      s: '\u2581h\u00e9',
      ss: ['a', ''],
      fs: [1.5, -2],
      is: [6, -1],
    })
    expect(header.tensors).toEqual([
      { name: 'a', shape: [3], type: 0, offset: 0 },
      { name: 'b', shape: [2, 2], type: 0, offset: 64 },
    ])
    expect(header.dataOffset % 64).toBe(0)
    const view = new DataView(bytes.buffer, bytes.byteOffset)
    expect(view.getFloat32(header.dataOffset + 64 + 3 * 4, true)).toBe(7)
    expect(bytes.length).toBe(header.dataOffset + 128)
  })

  test('rejects a tensor whose data does not fill its shape', () => {
    expect(() => encodeGguf({}, [{ name: 'x', shape: [2, 2], data: new Float32Array(3) }])).toThrow(
      /shape \[2, 2\] holds 4 values, data has 3/,
    )
  })
})
