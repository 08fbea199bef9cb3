/** The strict JSON that `servegate verify` reads: JSON.parse's values, and no object naming a key twice. */
import { describe, expect, test } from 'vitest'
import { duplicateKey, parseStrictJson } from './strict-json.ts'

describe('duplicateKey', () => {
  test('finds a repeated key at any depth, with its JSON path and line', () => {
    expect(duplicateKey('{"a":1,"a":2}')).toEqual({ key: 'a', path: '$.a', line: 1 })
    expect(duplicateKey('{"cells":[{"id":"x"},{"id":"y",\n"arms":[],\n"id":"z"}]}')).toEqual({
      key: 'id',
      path: '$.cells[1].id',
      line: 3,
    })
    expect(duplicateKey('[[0,{"":1,"":2}]]')).toEqual({ key: '', path: '$[0][1][""]', line: 1 })
    expect(duplicateKey('{"a b":{"c":1,"c":1}}')?.path).toBe('$["a b"].c')
  })

  test('compares keys as decoded: an escaped spelling of a key is the same key', () => {
    expect(duplicateKey('{"ttftMs":1,"\\u0074tftMs":2}')).toEqual({ key: 'ttftMs', path: '$.ttftMs', line: 1 })
    expect(duplicateKey('{"a\\"b":1,"a\\u0022b":2}')?.key).toBe('a"b')
    expect(duplicateKey('{"a\\\\":1,"a\\u005c":2}')?.key).toBe('a\\')
  })

  test('the same key in sibling objects, keys spelled alike in values, and strings holding braces are no duplicate', () => {
    expect(duplicateKey('{"a":{"k":1},"b":{"k":1},"c":[{"k":1},{"k":2}]}')).toBeNull()
    expect(duplicateKey('{"a":"a","b":["a","a"],"c":{"a":"b"}}')).toBeNull()
    expect(duplicateKey('{"a":"}{\\"a\\":1,","b":"\\\\","c":"[,]"}')).toBeNull()
    expect(duplicateKey('"a"')).toBeNull()
    expect(duplicateKey('[1,2,{}]')).toBeNull()
  })
})

describe('parseStrictJson', () => {
  test('gives what JSON.parse gives', () => {
    const text = JSON.stringify({ schema: 'x', requests: [{ index: 0, itlMs: [1.5, 2], text: 'é "q" \\' }], n: null })
    expect(parseStrictJson(text, 'r.json')).toEqual(JSON.parse(text))
    expect(parseStrictJson(Buffer.from(text), 'r.json')).toEqual(JSON.parse(text))
  })

  test('refuses a duplicated key naming the file, the key and its path', () => {
    expect(() => parseStrictJson('{\n  "promotion": {\n    "promotable": true,\n    "promotable": false\n  }\n}', 'index.json')).toThrow(
      'index.json: the key "promotable" appears twice in one object, at $.promotion.promotable (line 4); ' +
        'JSON readers differ on which value counts, so evidence holds each key once',
    )
  })

  test('refuses text that is not JSON and bytes that are not UTF-8, naming the file', () => {
    expect(() => parseStrictJson('{"a":1,}', 'a.json')).toThrow(/^a\.json: not JSON \(/)
    expect(() => parseStrictJson(Buffer.from([0x7b, 0x22, 0xff, 0x22, 0x3a, 0x31, 0x7d]), 'b.json')).toThrow('b.json: not UTF-8 text')
  })
})
