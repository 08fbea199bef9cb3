import { createHash, type Hash } from 'node:crypto'

/** The exact bytes sent for a body: `{"model":…,` followed by the model-free body. */
export function bodyBytes(model: string, withoutModel: string): Buffer {
  return Buffer.from(`{"model":${JSON.stringify(model)},${withoutModel.slice(1)}`)
}

/**
 * The request-stream hash of the ordered model-free bodies: sha256 over each body's byte length
 * and its own sha256, so the same plan proves the same request stream on both arms, and a wire
 * that kept only each body's digest (not its bytes) can prove it too.
 */
export function requestStreamSha256(bodies: ReadonlyArray<string | Uint8Array>): string {
  const hash = createHash('sha256')
  for (const body of bodies) updateStreamEntry(hash, ...bodyEntry(body))
  return hash.digest('hex')
}

/** One body's entry in a request-stream hash: its byte length and its sha256 (hex). */
export function bodyEntry(body: string | Uint8Array): [bytes: number, sha256: string] {
  const bytes = typeof body === 'string' ? Buffer.from(body) : body
  return [bytes.length, createHash('sha256').update(bytes).digest('hex')]
}

/** Appends one body's entry, `<bytes>\n<sha256 hex>\n`, to a request-stream hash. */
export function updateStreamEntry(hash: Hash, bytes: number, sha256: string): void {
  hash.update(`${bytes}\n${sha256}\n`)
}
