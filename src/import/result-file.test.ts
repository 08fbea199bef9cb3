import { describe, expect, test } from 'vitest'
import { normalizePythonJson, parseBenchmarkLines, pickLine } from './result-file.ts'

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
