import { describe, expect, test } from 'vitest'
import { renderNoiseFloor, runNoiseFloorBench } from './noise-floor-bench.ts'

describe('noise-floor bench (tiny size, structural asserts)', () => {
  const result = runNoiseFloorBench({ trials: 60, launchSd: 0.04, launches: 5, requests: 64, seed: 3 })

  test('each trial judges one A/A pair three ways; the measured floor is never below the assumed one', () => {
    for (const s of [result.measured, result.assumed, result.otherTestbed, result.boundCovers]) {
      expect(s.trials).toBe(60)
      expect(s.low).toBeLessThanOrEqual(s.rate)
      expect(s.high).toBeGreaterThanOrEqual(s.rate)
    }
    // The floor is the larger of the bound and 2%, so it passes no pair that the 2% floor would not.
    expect(result.measured.count).toBeLessThanOrEqual(result.assumed.count)
    expect(result.floorQuartiles[0]).toBeGreaterThanOrEqual(0.02)
    expect(result.floorQuartiles[0]).toBeLessThanOrEqual(result.floorQuartiles[2])
  })

  test('a profile of another testbed is not used: the floor is assumed, and the decision names the command', () => {
    expect(result.otherTestbed.source).toBe('assumed')
    expect(result.otherTestbed.count).toBe(result.assumed.count)
    expect(result.otherTestbed.text).toMatch(/is for another testbed \(GPU: .*; run `servegate calibrate` to measure it$/)
  })

  test('the 80% bound covers the injected sd in most trials', () => {
    expect(result.boundCovers.rate).toBeGreaterThan(0.6)
  })

  test('the report names every figure the docs quote', () => {
    const text = renderNoiseFloor(result)
    for (const line of [
      'floor from the measured profile (80% bound): false pass',
      'floor assumed at 2%:',
      'profile of another testbed',
      "the profile's 80% bound ≥ the injected 4%",
    ]) {
      expect(text).toContain(line)
    }
  })
})
