import { expect, test } from 'vitest'
import { expectedText } from './expected-text.ts'

test('a held .not reads as expected: a gate as a non-win, each check in its own word', () => {
  expect(expectedText('toWinDecode')).toBe('expected non-win ✓')
  expect(expectedText('toHoldLatency')).toBe('expected non-win ✓')
  expect(expectedText('toBeMatchedPair')).toBe('expected mismatch ✓')
  expect(expectedText('toPassCanaries')).toBe('expected canary failure ✓')
  expect(expectedText('toReachConcurrency')).toBe('expected shortfall ✓')
})
