import { describe, expect, test } from 'vitest'
import { detectableChange } from './detectable-change.ts'

describe('detectable change', () => {
  test('one launch per arm: z-sum times the gate’s sd, the floor in quadrature', () => {
    const d = detectableChange({ requestSd: 0.1, launchNoise: 0.02, requests: 64, target: 0.15 })
    // (2.326 + 0.842) · √(0.01/64 + 2·0.0004) = 3.168 · 0.03092
    expect(d.detectable).toBeCloseTo(Math.expm1(3.1679 * Math.sqrt(0.01 / 64 + 0.0008)), 3)
    // n = s² / ((ln 1.15 / 3.168)² − 2·0.0004) = 0.01 / 0.001147
    expect(d.requestsForTarget).toBe(9)
    // r = 2: (t₀.₉₉ + t₀.₈) on 2 df = 8.03, × √(0.000956/2) = 0.176 > ln 1.15; r = 3 on 4 df: 0.084
    expect(d.launchesForTarget).toBe(3)
    // The 2% floor alone puts a 5% change out of reach of one launch per arm, at any size.
    expect(detectableChange({ requestSd: 0.1, launchNoise: 0.02, requests: 64, target: 0.05 }).requestsForTarget).toBeNull()
  })

  test('a floor wider than the target leaves only more launches; more noise needs more of them', () => {
    const wide = detectableChange({ requestSd: 0.1, launchNoise: 0.04, requests: 64, target: 0.05 })
    expect(wide.requestsForTarget).toBeNull()
    expect(wide.detectable).toBeGreaterThan(0.18)
    const narrow = detectableChange({ requestSd: 0.1, launchNoise: 0.02, requests: 64, target: 0.05 })
    expect(wide.launchesForTarget).toBeGreaterThan(narrow.launchesForTarget ?? Infinity)
  })
})
