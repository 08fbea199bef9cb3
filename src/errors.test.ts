import { describe, expect, test } from 'vitest'
import { sanitizeMessage, ServegateError } from './errors.ts'

describe('sanitizeMessage', () => {
  test.each([
    ['Authorization: Bearer abc.def-ghi', 'Authorization: [redacted]'],
    ['authorization=Basic dXNlcjpwYXNz', 'authorization=[redacted]'],
    ['{"api_key": "k-123456789"}', '{"api_key": "[redacted]"}'],
    ['invalid x-api-key=abcdef0123&q=1', 'invalid x-api-key=[redacted]&q=1'],
    ['token Bearer eyJhbGciOiJIUzI1NiJ9.e30 rejected', 'token Bearer [redacted] rejected'],
    ['key sk-proj-ABCDEFGH12345678 is invalid', 'key [redacted] is invalid'],
  ])('removes the credential from %j', (input, expected) => {
    expect(sanitizeMessage(input)).toBe(expected)
  })

  test('collapses whitespace and bounds the length', () => {
    expect(sanitizeMessage('a\n\n  b')).toBe('a b')
    const long = sanitizeMessage('x'.repeat(1000), 50)
    expect(long).toHaveLength(50)
    expect(long.endsWith('…')).toBe(true)
  })
})

test('ServegateError carries a stable code', () => {
  const err = new ServegateError('REQUEST_DEADLINE', 'late')
  expect(err).toBeInstanceOf(Error)
  expect(err.code).toBe('REQUEST_DEADLINE')
  expect(err.name).toBe('ServegateError')
})
