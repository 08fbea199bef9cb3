import { describe, expect, test } from 'vitest'
import { classifyError } from './serving-bench.ts'

describe('classifyError', () => {
  const tb = (last: string): string => `Traceback (most recent call last):\n  File "x.py", line 1, in f\n    g()\n${last}\n`
  test.each([
    ['Never received a valid chunk to calculate TTFT.This response will be marked as failed!', 'EMPTY_COMPLETION', null],
    [tb('aiohttp.client_exceptions.ServerDisconnectedError: Server disconnected'), 'STREAM_DROPPED', null],
    [tb('aiohttp.client_exceptions.ClientConnectorError: Cannot connect to host 127.0.0.1:8000'), 'CONNECT_FAILED', null],
    [tb('TimeoutError'), 'REQUEST_DEADLINE', null],
    [tb('json.decoder.JSONDecodeError: Expecting value: line 1 column 1 (char 0)'), 'STREAM_PROTOCOL', null],
    [tb("KeyError: 'choices'"), 'INTERNAL', null],
    ['Too Many Requests', 'HTTP_RATE_LIMITED', 429],
    ['Service Unavailable: {"detail": "overloaded"}', 'HTTP_STATUS', 503],
    ['Bad Request', 'HTTP_STATUS', 400],
    ['something else entirely', 'INTERNAL', null],
  ])('%j is %s', (raw, code, httpStatus) => {
    const c = classifyError(raw)
    expect([c.code, c.httpStatus]).toEqual([code, httpStatus])
    expect(c.message).not.toMatch(/Traceback|\n/)
  })

  test('a credential in an error body is redacted', () => {
    expect(classifyError('Unauthorized: invalid api_key=sk-abcdef1234567890').message).toBe('Unauthorized: invalid api_key=[redacted]')
  })
})
