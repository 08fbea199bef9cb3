import { createHash } from 'node:crypto'

/**
 * What a request wrote to the socket, kept as lengths and sha256 digests instead of the bytes:
 * the whole write (the record's `wireSha256`) and the body without its `"model"` member (the
 * wire-stream hash, which must not depend on the served model's name, so that both arms of a
 * pair prove the same request stream).
 */
export interface SentDigest {
  /** Bytes written. */
  bytes: number
  /** sha256 of the bytes written, hex. */
  sha256: string
  /** Bytes of the model-free body (the write itself when it did not start with the model's prefix). */
  bodyBytes: number
  /** sha256 of the model-free body, hex. */
  bodySha256: string
}

/**
 * The model-free body of what was written: `{"model":"m",…}` becomes `{…}`; null when the bytes
 * do not start with this model's prefix (the inverse of `bodyBytes` in workload/bytes.ts).
 */
export function stripModel(model: string, written: Buffer): Buffer | null {
  const prefix = Buffer.from(`{"model":${JSON.stringify(model)},`)
  if (written.length < prefix.length || !written.subarray(0, prefix.length).equals(prefix)) return null
  return Buffer.concat([Buffer.from('{'), written.subarray(prefix.length)])
}

/**
 * Digests what was written for one request, from the pieces handed to the socket; null when
 * nothing was. `model` is the name the body was built with (null: the body is the write itself).
 * @example digestSent([Buffer.from('{"model":"m","x":1}')], 'm').bodySha256 // sha256 of '{"x":1}'
 */
export function digestSent(pieces: readonly Uint8Array[], model: string | null): SentDigest | null {
  if (pieces.length === 0) return null
  const first = pieces[0] as Uint8Array
  const written = pieces.length === 1 ? Buffer.from(first.buffer, first.byteOffset, first.byteLength) : Buffer.concat(pieces)
  const sha256 = createHash('sha256').update(written).digest('hex')
  const body = model === null ? null : stripModel(model, written)
  if (body === null) return { bytes: written.length, sha256, bodyBytes: written.length, bodySha256: sha256 }
  return { bytes: written.length, sha256, bodyBytes: body.length, bodySha256: createHash('sha256').update(body).digest('hex') }
}
