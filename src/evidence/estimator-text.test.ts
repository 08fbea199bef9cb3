import { describe, expect, test } from 'vitest'
import { sampleEvidence } from '../../fixtures/evidence-fixture.ts'
import type { GateDecision } from '../schema/gate.ts'
import { resolveNoiseFloor } from '../gates/noise-floor.ts'
import type { Testbed } from '../schema/noise.ts'
import { estimatorText, noiseFloorText } from './estimator-text.ts'

const TESTBED: Testbed = {
  runner: null,
  gpu: { model: null, count: 0 },
  driver: null,
  engine: { kind: 'sim', version: null },
  model: 'm',
  cell: { concurrency: 1, requests: 16, maxTokens: 32 },
}

const withMethod = (method: string): GateDecision => {
  const d = sampleEvidence().gates[0]?.decision as GateDecision
  return { ...d, effect: { ...d.effect, method } }
}

describe('estimatorText', () => {
  test("the first clause of the gate's method, without asides", () => {
    expect(estimatorText(withMethod('geometric mean of 16 paired ratios (mean log-ratio), BCa bootstrap (2000 resamples, seed 1)'))).toBe(
      'geometric mean of 16 paired ratios',
    )
    expect(
      estimatorText(
        withMethod(
          'Hodges–Lehmann pseudo-median of 64 paired log-ratios, Wilcoxon signed-rank interval (exact; robust to stalls on one arm); launch noise 2% per launch added in quadrature',
        ),
      ),
    ).toBe('Hodges–Lehmann pseudo-median of 64 paired log-ratios')
    expect(
      estimatorText(
        withMethod(
          "ratio of the cells' aggregate output tok/s (the cell's completion tokens over its wall clock), 2170 / 2243; sampling spread",
        ),
      ),
    ).toBe("ratio of the cells' aggregate output tok/s")
    expect(estimatorText(withMethod('not estimable: too few paired requests'))).toBe('not estimable: too few paired requests')
  })

  test("a matcher's decision names its launch-noise floor and where it came from", () => {
    const d = withMethod('geometric mean of 64 paired ratios (mean log-ratio), BCa bootstrap (2000 resamples, seed 1)')
    const floor = resolveNoiseFloor({ metric: 'decodeTokPerS', testbed: TESTBED })
    expect(estimatorText({ ...d, noiseFloor: floor })).toBe(
      'geometric mean of 64 paired ratios; launch noise 2% (assumed: run servegate calibrate)',
    )
    expect(noiseFloorText({ ...floor, source: 'option', value: 0.03 })).toBe('launch noise 3% (spec option)')
    const measured = { path: 'p.json', measuredAt: '2026-12-01T10:00:00.000Z', launches: 5, sd: 0.02, upper: 0.031 }
    expect(noiseFloorText({ ...floor, source: 'measured', value: 0.031, measured })).toBe(
      'launch noise 3.1% (measured 2026-12-01, 5 launches)',
    )
    const history = { path: 'h.jsonl', runs: 12, sd: 0.02, upper: 0.028 }
    expect(noiseFloorText({ ...floor, source: 'history', value: 0.028, history })).toBe('launch noise 2.8% (12 runs of main)')
  })
})
