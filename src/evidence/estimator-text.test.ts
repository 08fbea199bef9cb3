import { describe, expect, test } from 'vitest'
import { sampleEvidence } from '../../fixtures/evidence-fixture.ts'
import type { GateDecision } from '../schema/gate.ts'
import { estimatorText } from './estimator-text.ts'

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
          'Hodges–Lehmann pseudo-median of 64 paired log-ratios with the Wilcoxon signed-rank interval (exact; robust to stalls on one arm); launch noise 2% per launch added in quadrature',
        ),
      ),
    ).toBe('Hodges–Lehmann pseudo-median of 64 paired log-ratios with the Wilcoxon signed-rank interval')
    expect(
      estimatorText(
        withMethod(
          "ratio of the cells' aggregate output tok/s (the cell's completion tokens over its wall clock), 2170 / 2243; sampling spread",
        ),
      ),
    ).toBe("ratio of the cells' aggregate output tok/s")
    expect(estimatorText(withMethod('not estimable: too few paired requests'))).toBe('not estimable: too few paired requests')
  })
})
