import { describe, expect, test } from 'vitest'
import { classifyError, normalizePythonJson, parseBenchmarkLines, pickLine, summaryDistribution } from './serving-bench.ts'

describe('normalizePythonJson', () => {
  test('rewrites bare NaN and ±Infinity, never inside strings', () => {
    const text = '{"a": NaN, "b": Infinity, "c": -Infinity, "d": "NaN \\" Infinity", "e": [NaN]}'
    expect(JSON.parse(normalizePythonJson(text))).toEqual({ a: null, b: 'Infinity', c: '-Infinity', d: 'NaN " Infinity', e: [null] })
  })
})

describe('parseBenchmarkLines and pickLine', () => {
  test('a pretty-printed document is one run; JSON Lines are one run per line', () => {
    expect(parseBenchmarkLines('{\n  "a": 1\n}\n', 'f', 'fix')).toEqual([{ line: 1, value: { a: 1 } }])
    const runs = parseBenchmarkLines('{"a": 1}\n\n{"a": 2}\n', 'f', 'fix')
    expect(runs).toEqual([
      { line: 1, value: { a: 1 } },
      { line: 3, value: { a: 2 } },
    ])
    expect(pickLine(runs, 'f', undefined).line).toBe(3)
    expect(pickLine(runs, 'f', 1).value).toEqual({ a: 1 })
  })

  test('an empty file says so', () => {
    expect(() => parseBenchmarkLines('\n\n', 'f.jsonl', 'pass a results file')).toThrow(/^f\.jsonl is empty; pass a results file$/)
  })
})

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

describe('summaryDistribution', () => {
  test("turns numpy's population std into the sample std and keeps only given percentiles", () => {
    const d = summaryDistribution(
      {
        mean: 10,
        median: 9,
        std: 2,
        percentiles: new Map([
          [99, 20],
          [0, 1],
        ]),
        max: null,
      },
      5,
    )
    expect(d).toEqual({
      samples: 5,
      mean: 10,
      stddev: 2 * Math.sqrt(5 / 4),
      ci95Low: null,
      ci95High: null,
      min: 1,
      p25: null,
      p50: 9,
      p75: null,
      p90: null,
      p95: null,
      p99: 20,
      max: null,
    })
  })

  test('no samples, no figures', () => {
    expect(summaryDistribution({ mean: 0, median: 0, std: 0, percentiles: new Map(), max: null }, 0)).toMatchObject({
      samples: 0,
      mean: null,
      p50: null,
    })
  })
})
