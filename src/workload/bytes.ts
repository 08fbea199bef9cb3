import { createHash } from 'node:crypto'

/** The exact bytes sent for a body: `{"model":…,` followed by the model-free body. */
export function bodyBytes(model: string, withoutModel: string): Buffer {
  return Buffer.from(`{"model":${JSON.stringify(model)},${withoutModel.slice(1)}`)
}

/**
 * sha256 over the ordered model-free bodies, each prefixed by its byte length, so the same
 * plan proves the same request stream on both arms.
 */
export function requestStreamSha256(bodies: ReadonlyArray<string | Uint8Array>): string {
  const hash = createHash('sha256')
  for (const body of bodies) {
    const bytes = typeof body === 'string' ? Buffer.from(body) : body
    hash.update(`${bytes.length}\n`)
    hash.update(bytes)
  }
  return hash.digest('hex')
}

/**
 * The inverse of `bodyBytes` on what was actually written: the model-free body, or null when
 * the written bytes do not start with this model's prefix.
 */
export function stripModel(model: string, written: Buffer): Buffer | null {
  const prefix = Buffer.from(`{"model":${JSON.stringify(model)},`)
  if (written.length < prefix.length || !written.subarray(0, prefix.length).equals(prefix)) return null
  return Buffer.concat([Buffer.from('{'), written.subarray(prefix.length)])
}
