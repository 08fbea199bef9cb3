import { createSseParser } from '../client/sse.ts'

const CHUNK = '{"id":"warm","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":" warm"},"finish_reason":null}]}'
const SAMPLE = Buffer.from(`data: ${CHUNK}\n\n`.repeat(64))

/**
 * Runs the per-chunk hot path (SSE split, JSON parse) a few thousand times before a cell so
 * the JIT has compiled it: a parser still being compiled shows up as latency in the first
 * requests. Takes a few milliseconds; sends nothing.
 */
export function warmClientJit(rounds = 200): number {
  let found = 0
  const count = (data: string): void => {
    found += (JSON.parse(data) as { choices: unknown[] }).choices.length
  }
  for (let i = 0; i < rounds; i++) {
    const parser = createSseParser(count)
    parser.push(SAMPLE.subarray(0, 4000))
    parser.push(SAMPLE.subarray(4000))
  }
  return found
}
