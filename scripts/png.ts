import { crc32 } from 'node:zlib'

/** An 8-bit RGB raster, row-major, 3 bytes per pixel. */
export interface RgbImage {
  width: number
  height: number
  rgb: Uint8Array
}

const SIGNATURE = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a])

function chunk(type: string, data: Buffer): Buffer {
  const head = Buffer.alloc(8)
  head.writeUInt32BE(data.length, 0)
  head.write(type, 4, 'latin1')
  const crc = Buffer.alloc(4)
  crc.writeUInt32BE(crc32(data, crc32(head.subarray(4))), 0)
  return Buffer.concat([head, data, crc])
}

function adler32(data: Uint8Array): number {
  let a = 1
  let b = 0
  for (const byte of data) {
    a = (a + byte) % 65521
    b = (b + a) % 65521
  }
  return ((b << 16) | a) >>> 0
}

/**
 * A zlib stream of stored (uncompressed) deflate blocks. Stored blocks make the bytes a pure
 * function of the input: zlib's compressed output may differ across zlib builds and CPUs,
 * which would make committed fixtures churn.
 */
function zlibStored(data: Uint8Array): Buffer {
  const parts: Buffer[] = [Buffer.from([0x78, 0x01])]
  const max = 0xffff
  for (let offset = 0; offset === 0 || offset < data.length; offset += max) {
    const block = data.subarray(offset, offset + max)
    const head = Buffer.alloc(5)
    head[0] = offset + max >= data.length ? 1 : 0
    head.writeUInt16LE(block.length, 1)
    head.writeUInt16LE(~block.length & 0xffff, 3)
    parts.push(head, Buffer.from(block))
  }
  const trailer = Buffer.alloc(4)
  trailer.writeUInt32BE(adler32(data), 0)
  parts.push(trailer)
  return Buffer.concat(parts)
}

/**
 * Encodes an RGB raster as a PNG (8-bit truecolor, no interlace, filter 0 on every row,
 * stored deflate). Deterministic: the same pixels always give the same bytes.
 * @example writeFileSync('x.png', encodePng({ width: 1, height: 1, rgb: Uint8Array.of(255, 0, 0) }))
 */
export function encodePng(image: RgbImage): Buffer {
  const { width, height, rgb } = image
  if (!(Number.isInteger(width) && Number.isInteger(height) && width > 0 && height > 0)) {
    throw new RangeError(`encodePng: width and height must be positive integers, got ${width}×${height}`)
  }
  if (rgb.length !== width * height * 3) {
    throw new RangeError(`encodePng: expected ${width * height * 3} bytes of RGB, got ${rgb.length}`)
  }
  const stride = width * 3
  const raw = Buffer.alloc(height * (1 + stride))
  for (let y = 0; y < height; y++) {
    raw[y * (1 + stride)] = 0
    raw.set(rgb.subarray(y * stride, (y + 1) * stride), y * (1 + stride) + 1)
  }
  const header = Buffer.alloc(13)
  header.writeUInt32BE(width, 0)
  header.writeUInt32BE(height, 4)
  header[8] = 8 // bit depth
  header[9] = 2 // colour type: truecolor
  // compression, filter method and interlace stay 0
  return Buffer.concat([SIGNATURE, chunk('IHDR', header), chunk('IDAT', zlibStored(raw)), chunk('IEND', Buffer.alloc(0))])
}
