import { expect, test } from 'vitest'
import { expectedText } from './expected-text.ts'

test('a held .not reads as expected: a win as a non-win, each other gate and check in its own words', () => {
  expect(expectedText('toWinDecode')).toBe('expected non-win ✓')
  expect(expectedText('toSustainMoreThan')).toBe('expected non-win ✓')
  expect(expectedText('toHoldLatency')).toBe('expected latency not held ✓')
  expect(expectedText('toMeetSLO')).toBe('expected SLO miss ✓')
  expect(expectedText('toBeMatchedPair')).toBe('expected mismatch ✓')
  expect(expectedText('toPassCanaries')).toBe('expected canary failure ✓')
  expect(expectedText('toReachConcurrency')).toBe('expected concurrency not reached ✓')
})
