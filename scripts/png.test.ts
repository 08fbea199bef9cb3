import { inflateSync } from 'node:zlib'
import { describe, expect, test } from 'vitest'
import { encodePng } from './png.ts'

/** CRC-32 (ISO 3309, as PNG uses it), bit by bit: independent of node:zlib's table-driven crc32. */
function crc32Reference(bytes: Uint8Array): number {
  let crc = 0xffffffff
  for (const byte of bytes) {
    crc ^= byte
    for (let k = 0; k < 8; k++) crc = crc & 1 ? (crc >>> 1) ^ 0xedb88320 : crc >>> 1
  }
  return (crc ^ 0xffffffff) >>> 0
}

interface Chunk {
  type: string
  data: Buffer
}

/** Splits a PNG into chunks, checking the signature and every chunk CRC. */
function readChunks(png: Buffer): Chunk[] {
  expect([...png.subarray(0, 8)]).toEqual([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a])
  const chunks: Chunk[] = []
  let offset = 8
  while (offset < png.length) {
    const length = png.readUInt32BE(offset)
    const typeAndData = png.subarray(offset + 4, offset + 8 + length)
    expect(png.readUInt32BE(offset + 8 + length)).toBe(crc32Reference(typeAndData))
    chunks.push({ type: typeAndData.toString('latin1', 0, 4), data: Buffer.from(typeAndData.subarray(4)) })
    offset += 12 + length
  }
  expect(offset).toBe(png.length)
  return chunks
}

function decode(png: Buffer): { width: number; height: number; rgb: Buffer } {
  const chunks = readChunks(png)
  expect(chunks.map((c) => c.type)).toEqual(['IHDR', 'IDAT', 'IEND'])
  const header = (chunks[0] as Chunk).data
  const width = header.readUInt32BE(0)
  const height = header.readUInt32BE(4)
  expect([...header.subarray(8)]).toEqual([8, 2, 0, 0, 0])
  const raw = inflateSync((chunks[1] as Chunk).data)
  expect(raw.length).toBe(height * (1 + width * 3))
  const rgb = Buffer.alloc(width * height * 3)
  for (let y = 0; y < height; y++) {
    expect(raw[y * (1 + width * 3)]).toBe(0)
    raw.copy(rgb, y * width * 3, y * (1 + width * 3) + 1, (y + 1) * (1 + width * 3))
  }
  expect((chunks[2] as Chunk).data.length).toBe(0)
  return { width, height, rgb }
}

describe('encodePng', () => {
  test('round-trips pixels through a standard inflate', () => {
    const width = 5
    const height = 3
    const rgb = new Uint8Array(width * height * 3)
    for (let i = 0; i < rgb.length; i++) rgb[i] = (i * 37) % 256
    const decoded = decode(encodePng({ width, height, rgb }))
    expect(decoded.width).toBe(5)
    expect(decoded.height).toBe(3)
    expect([...decoded.rgb]).toEqual([...rgb])
  })

  test('a single red pixel', () => {
    const png = encodePng({ width: 1, height: 1, rgb: Uint8Array.of(255, 0, 0) })
    expect([...decode(png).rgb]).toEqual([255, 0, 0])
  })

  test('images larger than one stored block (64 KiB) still decode', () => {
    const width = 200
    const height = 120 // 120 · 601 = 72 120 bytes of scanlines: two stored blocks
    const rgb = new Uint8Array(width * height * 3).map((_, i) => (i * 7 + (i >> 9)) % 256)
    expect([...decode(encodePng({ width, height, rgb })).rgb]).toEqual([...rgb])
  })

  test('is deterministic', () => {
    const rgb = new Uint8Array(4 * 4 * 3).fill(200)
    expect(encodePng({ width: 4, height: 4, rgb }).equals(encodePng({ width: 4, height: 4, rgb }))).toBe(true)
  })

  test('refuses a wrong buffer size or dimensions', () => {
    expect(() => encodePng({ width: 2, height: 2, rgb: new Uint8Array(11) })).toThrow(/expected 12 bytes of RGB, got 11/)
    expect(() => encodePng({ width: 0, height: 2, rgb: new Uint8Array(0) })).toThrow(RangeError)
  })
})
