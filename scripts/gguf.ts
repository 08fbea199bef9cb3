/**
 * A minimal GGUF v3 encoder and header decoder (little-endian), written from llama.cpp's
 * `ggml/src/gguf.cpp` and `gguf-py/gguf/constants.py`: magic `GGUF`, version u32, tensor count
 * u64, KV count u64; each KV is a string key, a u32 value type and the value (an array is an
 * element type u32, a count u64 and the elements); each tensor info is a string name, n_dims
 * u32, `ne[]` u64 (ggml order: innermost first), a ggml type u32 and a data offset u64 relative
 * to the data section, which starts at the next multiple of `general.alignment`. Strings are a
 * u64 byte length and UTF-8 bytes, without a terminator.
 */

/** GGUF value type codes (`GGUFValueType`). */
export const GGUF_TYPE = {
  UINT8: 0,
  INT8: 1,
  UINT16: 2,
  INT16: 3,
  UINT32: 4,
  INT32: 5,
  FLOAT32: 6,
  BOOL: 7,
  STRING: 8,
  ARRAY: 9,
  UINT64: 10,
  INT64: 11,
  FLOAT64: 12,
} as const

/** ggml tensor type codes used here (`GGMLQuantizationType`). */
export const GGML_TYPE = { F32: 0 } as const

/** `GGUF_DEFAULT_ALIGNMENT`: the data section and every tensor start on a multiple of this. */
export const GGUF_DEFAULT_ALIGNMENT = 32

const GGUF_MAGIC = 'GGUF'
const GGUF_VERSION = 3

/** One metadata value with its GGUF type spelled out (numbers alone do not say u32 or f32). */
export type GgufValue =
  | { type: 'u32'; value: number }
  | { type: 'i32'; value: number }
  | { type: 'f32'; value: number }
  | { type: 'bool'; value: boolean }
  | { type: 'string'; value: string }
  | { type: 'string[]'; value: readonly string[] }
  | { type: 'f32[]'; value: readonly number[] }
  | { type: 'i32[]'; value: readonly number[] }

/** An f32 tensor; `shape` is ggml's `ne[]` (innermost first), `data` is row-major in that order. */
export type GgufTensor = { name: string; shape: readonly number[]; data: Float32Array }

/** Appends little-endian values to a growing byte list. */
class Writer {
  private chunks: Uint8Array[] = []
  length = 0

  bytes(bytes: Uint8Array): void {
    this.chunks.push(bytes)
    this.length += bytes.length
  }

  private scalar(size: number, write: (view: DataView) => void): void {
    const bytes = new Uint8Array(size)
    write(new DataView(bytes.buffer))
    this.bytes(bytes)
  }

  u32(value: number): void {
    this.scalar(4, (view) => view.setUint32(0, value, true))
  }
  i32(value: number): void {
    this.scalar(4, (view) => view.setInt32(0, value, true))
  }
  u64(value: number): void {
    this.scalar(8, (view) => view.setBigUint64(0, BigInt(value), true))
  }
  f32(value: number): void {
    this.scalar(4, (view) => view.setFloat32(0, value, true))
  }
  bool(value: boolean): void {
    this.bytes(Uint8Array.of(value ? 1 : 0))
  }
  string(value: string): void {
    const bytes = new TextEncoder().encode(value)
    this.u64(bytes.length)
    this.bytes(bytes)
  }
  padTo(alignment: number): void {
    const pad = (alignment - (this.length % alignment)) % alignment
    if (pad > 0) this.bytes(new Uint8Array(pad))
  }

  concat(): Uint8Array {
    const out = new Uint8Array(this.length)
    let offset = 0
    for (const chunk of this.chunks) {
      out.set(chunk, offset)
      offset += chunk.length
    }
    return out
  }
}

function writeValue(writer: Writer, value: GgufValue): void {
  switch (value.type) {
    case 'u32':
      writer.u32(GGUF_TYPE.UINT32)
      return writer.u32(value.value)
    case 'i32':
      writer.u32(GGUF_TYPE.INT32)
      return writer.i32(value.value)
    case 'f32':
      writer.u32(GGUF_TYPE.FLOAT32)
      return writer.f32(value.value)
    case 'bool':
      writer.u32(GGUF_TYPE.BOOL)
      return writer.bool(value.value)
    case 'string':
      writer.u32(GGUF_TYPE.STRING)
      return writer.string(value.value)
    case 'string[]':
      writer.u32(GGUF_TYPE.ARRAY)
      writer.u32(GGUF_TYPE.STRING)
      writer.u64(value.value.length)
      for (const item of value.value) writer.string(item)
      return
    case 'f32[]':
      writer.u32(GGUF_TYPE.ARRAY)
      writer.u32(GGUF_TYPE.FLOAT32)
      writer.u64(value.value.length)
      for (const item of value.value) writer.f32(item)
      return
    case 'i32[]':
      writer.u32(GGUF_TYPE.ARRAY)
      writer.u32(GGUF_TYPE.INT32)
      writer.u64(value.value.length)
      for (const item of value.value) writer.i32(item)
      return
  }
}

/**
 * Encodes a GGUF v3 file. `general.alignment`, when present in `metadata`, must be a u32 power
 * of two and sets the alignment; otherwise {@link GGUF_DEFAULT_ALIGNMENT} applies.
 */
export function encodeGguf(metadata: Readonly<Record<string, GgufValue>>, tensors: readonly GgufTensor[]): Uint8Array {
  const alignmentValue = metadata['general.alignment']
  const alignment = alignmentValue?.type === 'u32' ? alignmentValue.value : GGUF_DEFAULT_ALIGNMENT
  const writer = new Writer()
  writer.bytes(new TextEncoder().encode(GGUF_MAGIC))
  writer.u32(GGUF_VERSION)
  writer.u64(tensors.length)
  writer.u64(Object.keys(metadata).length)
  for (const [key, value] of Object.entries(metadata)) {
    writer.string(key)
    writeValue(writer, value)
  }
  let offset = 0
  for (const tensor of tensors) {
    const elements = tensor.shape.reduce((a, b) => a * b, 1)
    if (elements !== tensor.data.length) {
      throw new Error(`tensor ${tensor.name}: shape [${tensor.shape.join(', ')}] holds ${elements} values, data has ${tensor.data.length}`)
    }
    writer.string(tensor.name)
    writer.u32(tensor.shape.length)
    for (const ne of tensor.shape) writer.u64(ne)
    writer.u32(GGML_TYPE.F32)
    writer.u64(offset)
    offset += Math.ceil(tensor.data.byteLength / alignment) * alignment
  }
  writer.padTo(alignment)
  for (const tensor of tensors) {
    const bytes = new Uint8Array(tensor.data.byteLength)
    const view = new DataView(bytes.buffer)
    tensor.data.forEach((value, i) => view.setFloat32(i * 4, value, true))
    writer.bytes(bytes)
    writer.padTo(alignment)
  }
  return writer.concat()
}

/** What {@link decodeGgufHeader} reads back: metadata values and tensor infos. */
export type GgufHeader = {
  version: number
  metadata: Record<string, unknown>
  tensors: { name: string; shape: number[]; type: number; offset: number }[]
  dataOffset: number
}

/** Decodes the header of a GGUF file (metadata and tensor infos, not the tensor data). */
export function decodeGgufHeader(bytes: Uint8Array): GgufHeader {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength)
  let at = 0
  const u32 = () => ((at += 4), view.getUint32(at - 4, true))
  const u64 = () => ((at += 8), Number(view.getBigUint64(at - 8, true)))
  const string = () => {
    const length = u64()
    at += length
    return new TextDecoder().decode(bytes.subarray(at - length, at))
  }
  const scalar = (type: number): unknown => {
    switch (type) {
      case GGUF_TYPE.UINT8:
        return view.getUint8((at += 1) - 1)
      case GGUF_TYPE.INT8:
        return view.getInt8((at += 1) - 1)
      case GGUF_TYPE.UINT16:
        return view.getUint16((at += 2) - 2, true)
      case GGUF_TYPE.INT16:
        return view.getInt16((at += 2) - 2, true)
      case GGUF_TYPE.UINT32:
        return u32()
      case GGUF_TYPE.INT32:
        return view.getInt32((at += 4) - 4, true)
      case GGUF_TYPE.FLOAT32:
        return view.getFloat32((at += 4) - 4, true)
      case GGUF_TYPE.BOOL:
        return view.getUint8((at += 1) - 1) !== 0
      case GGUF_TYPE.STRING:
        return string()
      case GGUF_TYPE.UINT64:
        return u64()
      case GGUF_TYPE.INT64:
        return Number(view.getBigInt64((at += 8) - 8, true))
      case GGUF_TYPE.FLOAT64:
        return view.getFloat64((at += 8) - 8, true)
      default:
        throw new Error(`GGUF value type ${type} at byte ${at} is not a scalar type`)
    }
  }
  const magic = new TextDecoder().decode(bytes.subarray(0, 4))
  at = 4
  if (magic !== GGUF_MAGIC) throw new Error(`not a GGUF file: magic ${JSON.stringify(magic)}`)
  const version = u32()
  const tensorCount = u64()
  const kvCount = u64()
  const metadata: Record<string, unknown> = {}
  for (let i = 0; i < kvCount; i++) {
    const key = string()
    const type = u32()
    if (type === GGUF_TYPE.ARRAY) {
      const itemType = u32()
      const count = u64()
      metadata[key] = Array.from({ length: count }, () => scalar(itemType))
    } else {
      metadata[key] = scalar(type)
    }
  }
  const tensors: GgufHeader['tensors'] = []
  for (let i = 0; i < tensorCount; i++) {
    const name = string()
    const dims = u32()
    const shape = Array.from({ length: dims }, u64)
    tensors.push({ name, shape, type: u32(), offset: u64() })
  }
  const alignment = typeof metadata['general.alignment'] === 'number' ? metadata['general.alignment'] : GGUF_DEFAULT_ALIGNMENT
  return { version, metadata, tensors, dataOffset: Math.ceil(at / alignment) * alignment }
}
