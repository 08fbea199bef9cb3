import { describe, expect, test } from 'vitest'
import { createRandom } from '../random.ts'
import { normalCdf } from './distributions.ts'
import { groupSequentialBoundaries, lookConfidence, spentAlpha } from './sequential.ts'
import { clopperPearson } from './tests.ts'

function standardNormal(random: () => number): number {
  return Math.sqrt(-2 * Math.log(1 - random())) * Math.cos(2 * Math.PI * random())
}

/** Share of Brownian paths (the canonical joint distribution) that cross any boundary. */
function simulatedCrossing(fractions: readonly number[], z: readonly number[], paths: number, seed: number): number {
  const random = createRandom(seed)
  let crossed = 0
  for (let p = 0; p < paths; p++) {
    let s = 0
    let t = 0
    for (let k = 0; k < fractions.length; k++) {
      const next = fractions[k] as number
      s += Math.sqrt(next - t) * standardNormal(random)
      t = next
      if (s / Math.sqrt(t) > (z[k] as number)) {
        crossed++
        break
      }
    }
  }
  return crossed
}

describe('spentAlpha', () => {
  test('spends all of α at t = 1 and nothing at 0, increasing in between', () => {
    for (const kind of ['pocock', 'obrien-fleming'] as const) {
      expect(spentAlpha(kind, 0.025, 1)).toBeCloseTo(0.025, 15)
      expect(spentAlpha(kind, 0.025, 0)).toBe(0)
      expect(spentAlpha(kind, 0.025, 0.3)).toBeLessThan(spentAlpha(kind, 0.025, 0.6))
    }
    // O'Brien–Fleming-type spends far less early than Pocock-type.
    expect(spentAlpha('obrien-fleming', 0.01, 0.125)).toBeLessThan(1e-10)
    expect(spentAlpha('pocock', 0.01, 0.125)).toBeGreaterThan(0.0019)
  })
})

describe('groupSequentialBoundaries', () => {
  // Lan & DeMets (1983) spending, five equally spaced looks, one-sided α = 0.025 (two-sided 0.05): the
  // published boundaries (DeMets & Lan 1994, Stat Med 13:1341; also printed by R's ldbounds and gsDesign).
  test("O'Brien–Fleming type, K = 5, α = 0.025: 4.877, 3.357, 2.680, 2.290, 2.031 (ldbounds)", () => {
    const z = groupSequentialBoundaries([0.2, 0.4, 0.6, 0.8, 1], 0.025, 'obrien-fleming').map((l) => l.z)
    ;[4.877, 3.357, 2.68, 2.29, 2.031].forEach((expected, i) => expect(z[i]).toBeCloseTo(expected, 3))
  })

  test('Pocock type, K = 5, α = 0.025: 2.438, 2.427, 2.410, 2.397, 2.386 (ldbounds)', () => {
    const z = groupSequentialBoundaries([0.2, 0.4, 0.6, 0.8, 1], 0.025, 'pocock').map((l) => l.z)
    ;[2.438, 2.427, 2.41, 2.397, 2.386].forEach((expected, i) => expect(z[i]).toBeCloseTo(expected, 3))
  })

  test('one look is the fixed design', () => {
    const [look] = groupSequentialBoundaries([1], 0.01)
    expect(look?.z).toBeCloseTo(2.3263478740408408, 12)
    expect(lookConfidence(look?.z as number)).toBeCloseTo(0.98, 12)
  })

  test("by simulation (fixed seed): the overall type-I error at the boundaries stays ≤ α (servegate's looks 16/32/64/128)", () => {
    const fractions = [16 / 128, 32 / 128, 64 / 128, 1]
    const paths = 200_000
    for (const [alpha, spending] of [
      [0.01, 'pocock'],
      [0.025, 'pocock'],
      [0.01, 'obrien-fleming'],
    ] as const) {
      const looks = groupSequentialBoundaries(fractions, alpha, spending)
      const crossed = simulatedCrossing(
        fractions,
        looks.map((l) => l.z),
        paths,
        20_240_601,
      )
      // The 99.9% Clopper–Pearson lower bound of the simulated rate must not exceed α…
      expect(clopperPearson(crossed, paths, 0.998).low).toBeLessThanOrEqual(alpha)
      // …and the design spends nearly all of it (not a uselessly conservative boundary).
      expect(clopperPearson(crossed, paths, 0.998).high).toBeGreaterThanOrEqual(alpha * 0.9)
      expect(looks.at(-1)?.cumulativeAlpha).toBeCloseTo(alpha, 15)
    }
  })

  test('a nominal level per look of 1 − Φ(z); Pocock-type boundaries stay nearly flat', () => {
    const looks = groupSequentialBoundaries([0.25, 0.5, 0.75, 1], 0.01)
    for (const l of looks) expect(l.nominalAlpha).toBeCloseTo(normalCdf(-l.z), 15)
    for (const l of looks) expect(Math.abs(l.z - (looks[0]?.z as number))).toBeLessThan(0.1)
  })

  test('refuses fractions that do not increase within (0, 1]', () => {
    expect(() => groupSequentialBoundaries([0.5, 0.5], 0.01)).toThrow(RangeError)
    expect(() => groupSequentialBoundaries([0.5, 1.2], 0.01)).toThrow(RangeError)
    expect(() => groupSequentialBoundaries([], 0.01)).toThrow(RangeError)
  })
})
