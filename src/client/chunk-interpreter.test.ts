import { createHash } from 'node:crypto'
import { describe, expect, test } from 'vitest'
import { ServegateError } from '../errors.ts'
import { ChunkInterpreter } from './chunk-interpreter.ts'
import type { StreamObservation } from './observation.ts'

const sha = (text: string): string => createHash('sha256').update(text).digest('hex')

const ORIGIN = 'http://127.0.0.1:9'

/** An interpreter dispatched at t=100 ms, and the settlements it reported. */
function interpreter(captureChars = 0) {
  const settlements: Array<{ obs: StreamObservation; abortWith: ServegateError | null }> = []
  const it = new ChunkInterpreter({
    dispatchedAt: 100,
    captureChars,
    origin: ORIGIN,
    onSettle: (obs, abortWith) => settlements.push({ obs, abortWith }),
  })
  return { it, settlements }
}

/** An interpreter whose request went out at t=101 ms and whose 200 response has started. */
function streaming(captureChars = 0) {
  const started = interpreter(captureChars)
  started.it.onRequestSent(101)
  started.it.onResponseStart(200, { 'content-type': 'text/event-stream' }, 0)
  return started
}

/** One read holding these events, each terminated. */
const sse = (...events: string[]): Buffer => Buffer.from(events.map((data) => `data: ${data}\n\n`).join(''))
const content = (text: string): string => JSON.stringify({ choices: [{ delta: { content: text } }] })
const reasoning = (text: string): string => JSON.stringify({ choices: [{ delta: { reasoning_content: text } }] })

describe('a stream that finishes', () => {
  test('each non-empty delta is counted at the arrival of the read that carried it; [DONE] settles it', () => {
    const { it, settlements } = interpreter()
    it.onBodySent(Buffer.from('{"a"'))
    it.onBodySent(new Uint8Array([0x3a, 0x31, 0x7d]))
    it.onRequestSent(101)
    it.onResponseStart(200, {}, 0)
    it.onResponseData(sse(reasoning('think')), 110)
    it.onResponseData(sse(content('a'), content('b')), 120)
    it.onResponseData(sse('{"choices":[{"delta":{"reasoning":"r","content":"c"}}]}'), 125)
    it.onResponseData(
      sse(
        '{"choices":[{"delta":{"content":""},"finish_reason":"stop"}]}',
        '{"choices":[],"usage":{"prompt_tokens":7,"completion_tokens":4}}',
      ),
      130,
    )
    expect(settlements).toHaveLength(0)
    it.onResponseData(sse('[DONE]'), 140)

    expect(settlements).toEqual([{ obs: it.obs, abortWith: null }])
    expect(it.settled).toBe(true)
    expect({ ...it.obs, outputChunkAt: Array.from(it.obs.outputChunkAt) }).toEqual({
      dispatchedAt: 100,
      sentAt: 101,
      firstOutputAt: 110,
      firstContentAt: 120,
      endAt: 140,
      outputChunkAt: [110, 120, 120, 125],
      reasoningChunks: 2,
      contentChunks: 3,
      usagePromptTokens: 7,
      usageCompletionTokens: 4,
      // The engine reported no prefix-cache figure: unknown, not 0.
      cachedPromptTokens: null,
      finishReason: 'stop',
      httpStatus: 200,
      content: '',
      contentTruncated: false,
      // Not asked to keep the streamed text.
      streamedText: null,
      // What was written is kept as lengths and digests, not bytes.
      sent: { bytes: 7, sha256: sha('{"a":1}'), bodyBytes: 7, bodySha256: sha('{"a":1}') },
      engineTimings: null,
      attempts: 1,
      error: null,
    })
  })

  test('the rest of the read that carried [DONE] is still read; whatever arrives after it settled is ignored', () => {
    const { it, settlements } = streaming()
    it.onResponseData(sse(content('a'), '[DONE]', content('b')), 110)
    it.onResponseData(sse(content('c')), 120)
    it.onResponseEnd(130)
    it.onResponseError(new Error('late'), 140)
    it.fail('REQUEST_DEADLINE', 'late', 150)
    expect(settlements).toHaveLength(1)
    expect(it.obs).toMatchObject({ contentChunks: 2, outputChunkAt: Float64Array.of(110, 110), endAt: 110, error: null })
  })

  test('an event split across reads gets the arrival time of the read that completes it', () => {
    const { it } = streaming()
    it.onResponseData(Buffer.from('data: {"choices":[{"delta":{"con'), 110)
    it.onResponseData(Buffer.from('tent":"x"}}]}\n\ndata: [DONE]\n\n'), 115)
    expect(it.obs).toMatchObject({ firstOutputAt: 115, firstContentAt: 115, outputChunkAt: Float64Array.of(115), endAt: 115, error: null })
  })

  test('a completions stream carries its content in `text`; a finish_reason without [DONE] ends it cleanly', () => {
    const { it, settlements } = streaming()
    it.onResponseData(sse('{"choices":[{"text":"hi"}]}', '{"choices":[{"text":"","finish_reason":"length"}]}'), 110)
    expect(settlements).toHaveLength(0)
    it.onResponseEnd(120)
    expect(it.obs).toMatchObject({ contentChunks: 1, firstContentAt: 110, finishReason: 'length', endAt: 120, error: null })
  })

  test('an unterminated last event is read at the end of the response, with its time', () => {
    const { it } = streaming()
    it.onResponseData(Buffer.from('data: {"choices":[{"delta":{"content":"x"},"finish_reason":"stop"}]}'), 110)
    it.onResponseEnd(150)
    expect(it.obs).toMatchObject({ firstContentAt: 150, finishReason: 'stop', endAt: 150, error: null })
  })

  test("the engine's numeric timings are kept; other values are dropped", () => {
    const { it } = streaming()
    const timings = { prompt_ms: 1.5, predicted_n: 3, note: 'x', missing: null }
    it.onResponseData(sse(JSON.stringify({ choices: [{ delta: { content: 'x' } }], timings }), '[DONE]'), 110)
    expect(it.obs.engineTimings).toEqual({ prompt_ms: 1.5, predicted_n: 3 })
  })

  test('cached prompt tokens: usage.prompt_tokens_details.cached_tokens (vLLM, SGLang, llama.cpp)', () => {
    const { it } = streaming()
    const usage = { prompt_tokens: 40, completion_tokens: 2, prompt_tokens_details: { cached_tokens: 32 } }
    it.onResponseData(sse(content('x'), JSON.stringify({ choices: [], usage }), '[DONE]'), 110)
    expect(it.obs.cachedPromptTokens).toBe(32)
  })

  test("cached prompt tokens: llama.cpp's timings.cache_n where usage says nothing; usage wins where both do", () => {
    const timingsOnly = streaming()
    const timings = { cache_n: 12, prompt_n: 4, prompt_ms: 2 }
    timingsOnly.it.onResponseData(sse(JSON.stringify({ choices: [{ delta: { content: 'x' } }], timings }), '[DONE]'), 110)
    expect(timingsOnly.it.obs.cachedPromptTokens).toBe(12)

    // usage first, then a later timings chunk: usage still wins.
    const both = streaming()
    const usage = { prompt_tokens: 16, completion_tokens: 1, prompt_tokens_details: { cached_tokens: 10 } }
    both.it.onResponseData(sse(JSON.stringify({ choices: [], usage }), JSON.stringify({ choices: [], timings }), '[DONE]'), 110)
    expect(both.it.obs.cachedPromptTokens).toBe(10)
  })

  test.each([
    ['a negative count', { cached_tokens: -1 }],
    ['a fraction', { cached_tokens: 1.5 }],
    ['a string', { cached_tokens: '8' }],
    ['null details', null],
    ['details without the count', {}],
  ])('cached prompt tokens stay unknown (null) for %s', (_name, details) => {
    const { it } = streaming()
    const usage = { prompt_tokens: 16, completion_tokens: 1, prompt_tokens_details: details }
    it.onResponseData(sse(JSON.stringify({ choices: [], usage }), '[DONE]'), 110)
    expect(it.obs.cachedPromptTokens).toBeNull()
  })

  test('a request that was never reported sent counts as sent when dispatched', () => {
    const { it } = interpreter()
    it.onResponseStart(200, {}, 0)
    it.onResponseData(sse(content('x'), '[DONE]'), 110)
    expect(it.obs.sentAt).toBe(100)
  })
})

describe('the content capture', () => {
  test('keeps the first captureChars characters of content, never reasoning, and marks a longer content truncated', () => {
    const { it } = streaming(5)
    it.onResponseData(sse(reasoning('think'), content('hel'), content('lo wo'), content('rld'), '[DONE]'), 110)
    expect(it.obs).toMatchObject({ content: 'hello', contentTruncated: true, contentChunks: 3 })
  })

  test('a content exactly as long as the capture is complete', () => {
    const { it } = streaming(5)
    it.onResponseData(sse(content('hel'), content('lo'), '[DONE]'), 110)
    expect(it.obs).toMatchObject({ content: 'hello', contentTruncated: false })
  })

  test('a capture of 0 keeps nothing and truncates nothing', () => {
    const { it } = streaming(0)
    it.onResponseData(sse(content('hello'), '[DONE]'), 110)
    expect(it.obs).toMatchObject({ content: '', contentTruncated: false, contentChunks: 1 })
  })
})

describe('a stream that fails', () => {
  test.each([
    ['{"error":{"message":"out of memory"}}', 'the server sent an error event: out of memory'],
    ['{"error":"overloaded"}', 'the server sent an error event: overloaded'],
    ['{"error":{}}', 'the server sent an error event: unknown error'],
    // An ErrorResponse put bare on the data line (older engines' stream handlers).
    [
      '{"object":"error","message":"This model\'s maximum context length is 4096 tokens.","type":"BadRequestError","param":null,"code":400}',
      "the server sent an error event: This model's maximum context length is 4096 tokens.",
    ],
    ['{"object":"error","message":"","type":"InternalServerError","code":500}', 'the server sent an error event: unknown error'],
  ])('an in-stream error event %s fails it as STREAM_ERROR_EVENT and asks for the exchange to be aborted', (event, message) => {
    const { it, settlements } = streaming()
    it.onResponseData(sse(content('a'), event, content('b')), 120)
    expect(it.obs.error).toEqual({ code: 'STREAM_ERROR_EVENT', message, httpStatus: 200, retryAfterS: null })
    expect(it.obs).toMatchObject({ contentChunks: 1, endAt: 120 })
    expect(settlements).toHaveLength(1)
    expect(settlements[0]?.abortWith).toBeInstanceOf(ServegateError)
    expect(settlements[0]?.abortWith?.code).toBe('STREAM_ERROR_EVENT')
  })

  test('a data line that is not JSON is a STREAM_PROTOCOL error quoting its first 80 characters', () => {
    const { it, settlements } = streaming()
    const line = `{"choices":[${'x'.repeat(100)}`
    it.onResponseData(sse(line), 110)
    expect(it.obs.error).toMatchObject({ code: 'STREAM_PROTOCOL', message: `malformed data line (not JSON): ${line.slice(0, 80)}` })
    expect(settlements[0]?.abortWith?.code).toBe('STREAM_PROTOCOL')
  })

  test.each(['null', '42', '"text"'])('a data line of JSON %s is not a chunk: STREAM_PROTOCOL', (line) => {
    const { it } = streaming()
    it.onResponseData(sse(line), 110)
    expect(it.obs.error).toMatchObject({ code: 'STREAM_PROTOCOL', message: `data line is not a JSON object: ${line}` })
  })

  test('a response that ends without [DONE] or a finish_reason was dropped; its partial timings are kept', () => {
    const { it, settlements } = streaming()
    it.onResponseData(sse(content('a')), 110)
    it.onResponseEnd(130)
    expect(it.obs.error).toMatchObject({ code: 'STREAM_DROPPED', message: 'the stream ended without [DONE] or a finish_reason' })
    expect(it.obs).toMatchObject({ firstContentAt: 110, endAt: 130 })
    expect(settlements[0]?.abortWith?.code).toBe('STREAM_DROPPED')
  })

  test('a stream that finishes without a non-empty delta is an EMPTY_COMPLETION; nothing is left to abort', () => {
    const { it, settlements } = streaming()
    it.onResponseData(sse(content(''), '{"choices":[{"delta":{"content":""},"finish_reason":"stop"}]}', '[DONE]'), 110)
    expect(it.obs.error).toEqual({
      code: 'EMPTY_COMPLETION',
      message: 'the stream finished without a non-empty delta',
      httpStatus: 200,
      retryAfterS: null,
    })
    expect(settlements[0]?.abortWith).toBeNull()
  })

  test('a failure from outside (the deadline) settles it at its time; later reads are ignored', () => {
    const { it, settlements } = streaming()
    it.onResponseData(sse(content('a')), 110)
    it.fail('REQUEST_DEADLINE', 'no end of stream within the 400 ms request deadline', 500)
    it.onResponseData(sse(content('b'), '[DONE]'), 600)
    expect(it.obs.error).toEqual({
      code: 'REQUEST_DEADLINE',
      message: 'no end of stream within the 400 ms request deadline',
      httpStatus: 200,
      retryAfterS: null,
    })
    expect(it.obs).toMatchObject({ contentChunks: 1, endAt: 500 })
    expect(settlements).toHaveLength(1)
    expect(settlements[0]?.abortWith?.code).toBe('REQUEST_DEADLINE')
  })

  test('an error message is sanitized before it is recorded', () => {
    const { it } = streaming()
    it.onResponseData(sse('{"error":"denied for Bearer abcdefghijklmnop"}'), 110)
    expect(it.obs.error?.message).toBe('the server sent an error event: denied for Bearer [redacted]')
  })
})

describe('a non-2xx response', () => {
  test.each([
    ['{"error":{"message":"model not loaded"}}', 'HTTP 500: model not loaded'],
    ['{"detail":"bad request"}', 'HTTP 500: bad request'],
    ['upstream down', 'HTTP 500: upstream down'],
    ['', 'HTTP 500: (empty body)'],
  ])('its body %j is evidence, not a stream: HTTP_STATUS with %j', (body, message) => {
    const { it, settlements } = interpreter()
    it.onResponseStart(500, {}, 0)
    it.onResponseData(Buffer.from(body), 110)
    it.onResponseEnd(120)
    expect(it.obs.error).toEqual({ code: 'HTTP_STATUS', message, httpStatus: 500, retryAfterS: null })
    expect(it.obs.endAt).toBe(120)
    expect(settlements[0]?.abortWith).toBeNull()
  })

  test('an SSE body on an error status is not parsed', () => {
    const { it } = interpreter()
    it.onResponseStart(503, {}, 0)
    it.onResponseData(sse(content('a'), '[DONE]'), 110)
    expect(it.settled).toBe(false)
    it.onResponseEnd(120)
    expect(it.obs).toMatchObject({ contentChunks: 0, firstOutputAt: null, error: { code: 'HTTP_STATUS', httpStatus: 503 } })
  })

  test('a redirect is a failed request naming where it pointed, never followed', () => {
    const { it } = interpreter()
    it.onResponseStart(307, { location: 'http://10.0.0.9:8000/v1/chat/completions' }, 0)
    it.onResponseEnd(120)
    expect(it.obs.error).toEqual({
      code: 'HTTP_STATUS',
      message: 'HTTP 307: (empty body) (a redirect to 10.0.0.9:8000: never followed)',
      httpStatus: 307,
      retryAfterS: null,
    })
  })

  test('its body is kept only up to 4 KiB: later reads are not', () => {
    const { it } = interpreter()
    it.onResponseStart(500, {}, 0)
    it.onResponseData(Buffer.from(`{"message":"${'a'.repeat(4090)}`), 110)
    it.onResponseData(Buffer.from('"}'), 111)
    it.onResponseEnd(120)
    expect(it.obs.error?.message.startsWith('HTTP 500: {"message":"aaa')).toBe(true)
  })

  test("a 429 is HTTP_RATE_LIMITED and keeps Retry-After's seconds", () => {
    const { it } = interpreter()
    it.onResponseStart(429, { 'retry-after': '3' }, 0)
    it.onResponseData(Buffer.from('{"error":"slow down"}'), 110)
    it.onResponseEnd(120)
    expect(it.obs.error).toEqual({
      code: 'HTTP_RATE_LIMITED',
      message: 'HTTP 429: slow down (Retry-After 3 s)',
      httpStatus: 429,
      retryAfterS: 3,
    })
  })

  test('a Retry-After given as a date is read against the wall clock at the response start', () => {
    const { it } = interpreter()
    const date = 'Tue, 01 Dec 2026 12:00:00 GMT'
    it.onResponseStart(429, { 'retry-after': [date] }, Date.parse(date) - 5000)
    it.fail('REQUEST_DEADLINE', 'no end', 200)
    expect(it.obs.error).toMatchObject({ code: 'REQUEST_DEADLINE', httpStatus: 429, retryAfterS: 5 })
  })

  test('a 429 without Retry-After has no retry time', () => {
    const { it } = interpreter()
    it.onResponseStart(429, {}, 0)
    it.onResponseEnd(120)
    expect(it.obs.error).toEqual({ code: 'HTTP_RATE_LIMITED', message: 'HTTP 429: (empty body)', httpStatus: 429, retryAfterS: null })
  })
})

describe('a broken exchange', () => {
  const broken = (code: string | undefined, message: string): Error => Object.assign(new Error(message), code === undefined ? {} : { code })

  test('a refused connection before anything was sent is CONNECT_FAILED, naming the origin', () => {
    const { it, settlements } = interpreter()
    it.onResponseError(broken('ECONNREFUSED', 'connect ECONNREFUSED 127.0.0.1:9'), 105)
    expect(it.obs.error).toEqual({
      code: 'CONNECT_FAILED',
      message: `cannot connect to ${ORIGIN}: ECONNREFUSED`,
      httpStatus: null,
      retryAfterS: null,
    })
    expect(it.obs).toMatchObject({ sentAt: 100, endAt: 105 })
    expect(settlements[0]?.abortWith?.code).toBe('CONNECT_FAILED')
  })

  test('a connect error without a code is recognised by its message', () => {
    const { it } = interpreter()
    it.onResponseError(broken(undefined, 'getaddrinfo ENOTFOUND engine.invalid'), 105)
    expect(it.obs.error?.message).toBe(`cannot connect to ${ORIGIN}: getaddrinfo ENOTFOUND engine.invalid`)
  })

  test('a close before any response is CONNECTION_CLOSED, whether or not the request went out', () => {
    const unsent = interpreter()
    unsent.it.onResponseError(broken('UND_ERR_SOCKET', 'other side closed'), 105)
    expect(unsent.it.obs.error?.code).toBe('CONNECTION_CLOSED')
    expect(unsent.it.obs.error?.message).toBe('the server closed the connection before any response: UND_ERR_SOCKET')

    const sent = interpreter()
    sent.it.onRequestSent(101)
    sent.it.onResponseError(broken('ECONNRESET', 'read ECONNRESET'), 105)
    expect(sent.it.obs.error).toMatchObject({ code: 'CONNECTION_CLOSED', httpStatus: null })
  })

  test('a close after the response started is STREAM_DROPPED mid-stream; the partial timings are kept', () => {
    const { it } = streaming()
    it.onResponseData(sse(content('a')), 110)
    it.onResponseError(broken('ECONNRESET', 'read ECONNRESET'), 130)
    expect(it.obs.error).toEqual({
      code: 'STREAM_DROPPED',
      message: 'the connection closed mid-stream: ECONNRESET',
      httpStatus: 200,
      retryAfterS: null,
    })
    expect(it.obs).toMatchObject({ firstContentAt: 110, contentChunks: 1, endAt: 130 })
  })
})

describe('a reply that is not an event stream', () => {
  test('a charset parameter or a missing content type is still read as a stream', () => {
    for (const headers of [{ 'content-type': 'text/event-stream; charset=utf-8' }, {}]) {
      const { it } = interpreter()
      it.onResponseStart(200, headers, 0)
      it.onResponseData(sse(content('a'), '[DONE]'), 110)
      expect(it.obs.error).toBeNull()
    }
  })

  test('a text/plain 200 fails at its end as RESPONSE_NOT_STREAM with its first bytes, credentials scrubbed', () => {
    const { it, settlements } = interpreter()
    it.onResponseStart(200, { 'content-type': 'text/plain' }, 0)
    it.onResponseData(Buffer.from('upstream says: api_key=sk-abcdefghijklmnop is wrong'), 110)
    expect(settlements).toHaveLength(0)
    it.onResponseEnd(120)
    expect(it.obs.error).toEqual({
      code: 'RESPONSE_NOT_STREAM',
      message: 'HTTP 200 with content-type text/plain, not text/event-stream; it starts: upstream says: api_key=[redacted] is wrong',
      httpStatus: 200,
      retryAfterS: null,
    })
  })

  test('a long HTML page fails once its first 512 bytes are in, without waiting for the rest', () => {
    const { it, settlements } = interpreter()
    it.onResponseStart(200, { 'content-type': 'text/html' }, 0)
    it.onResponseData(Buffer.alloc(600, 0x3c), 110)
    expect(settlements).toHaveLength(1)
    expect(settlements[0]?.abortWith?.code).toBe('RESPONSE_NOT_STREAM')
  })

  test('a malformed status line (an HTTP parser error) is STREAM_PROTOCOL, not a close before any response', () => {
    const { it } = interpreter()
    it.onRequestSent(101)
    const err = Object.assign(new Error('Response does not match the HTTP/1.1 protocol (Invalid status code)'), { name: 'HTTPParserError' })
    it.onResponseError(err, 105)
    expect(it.obs.error?.code).toBe('STREAM_PROTOCOL')
  })
})
