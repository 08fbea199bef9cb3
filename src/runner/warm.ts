import { setFlagsFromString } from 'node:v8'
import { runInNewContext } from 'node:vm'
import { ChunkInterpreter } from '../client/chunk-interpreter.ts'
import { Http1ResponseParser } from '../http1.ts'

const CHUNK = '{"id":"warm","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":" warm"},"finish_reason":null}]}'
const EVENT = `data: ${CHUNK}\n\n`
const LAST =
  'data: {"choices":[{"index":0,"delta":{},"finish_reason":"length"}],"usage":{"prompt_tokens":8,"completion_tokens":64}}\n\ndata: [DONE]\n\n'
/** A whole chunked event-stream response, one event a chunk, as a server writes it. */
const RESPONSE = Buffer.from(
  'HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n' +
    `${Buffer.byteLength(EVENT).toString(16)}\r\n${EVENT}\r\n`.repeat(64) +
    `${Buffer.byteLength(LAST).toString(16)}\r\n${LAST}\r\n0\r\n\r\n`,
)

/**
 * Runs the per-read hot path (HTTP/1.1 framing, SSE split, JSON parse, the chunk interpreter) a
 * few thousand times before a cell so the JIT has compiled it: a parser still being compiled
 * shows up as latency in the first requests. Takes a few milliseconds; sends nothing.
 * @returns the output chunks the warm-up streams carried (so none of it is optimized away)
 */
export function warmClientJit(rounds = 100): number {
  let chunks = 0
  for (let i = 0; i < rounds; i++) {
    const interpreter = new ChunkInterpreter({
      dispatchedAt: 0,
      captureChars: 0,
      origin: 'http://warm',
      onSettle: (obs) => (chunks += obs.outputChunkAt.length),
    })
    const parser = new Http1ResponseParser({
      onHead: (status, headers) => interpreter.onResponseStart(status, headers, 0),
      onBody: (bytes) => interpreter.onResponseData(bytes, i),
      onEnd: () => interpreter.onResponseEnd(i),
    })
    interpreter.onRequestSent(0)
    // One read an event, as a paced stream arrives.
    for (let at = 0; at < RESPONSE.length; at += 137) parser.push(RESPONSE.subarray(at, at + 137))
  }
  return chunks
}

let collect: (() => void) | null = null

/**
 * Collects the whole heap before a measured phase, as `vllm bench serve` runs `gc.collect()` and
 * `gc.freeze()` before its requests. Loading, the warm-up and the prepared bodies leave an old
 * generation that V8 would otherwise mark and compact during the first measured requests, in
 * incremental steps of up to tens of milliseconds on one core: a chunk that arrives in one is
 * stamped that much late. Node exposes no collector without `--expose-gc`; the flag is set for
 * the one new context that fetches `gc`, as Jest's leak detector does.
 */
export function settleHeap(): void {
  if (collect === null) {
    setFlagsFromString('--expose-gc')
    collect = runInNewContext('gc') as () => void
  }
  collect()
}
