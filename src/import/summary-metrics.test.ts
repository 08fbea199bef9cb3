import { describe, expect, test } from 'vitest'
import { summaryDistribution } from './summary-metrics.ts'

describe('summaryDistribution', () => {
  test("turns numpy's population std into the sample std and keeps only given percentiles", () => {
    const d = summaryDistribution(
      {
        mean: 10,
        median: 9,
        std: 2,
        percentiles: new Map([
          [99, 20],
          [0, 1],
        ]),
        max: null,
      },
      5,
    )
    expect(d).toEqual({
      samples: 5,
      mean: 10,
      stddev: 2 * Math.sqrt(5 / 4),
      ci95Low: null,
      ci95High: null,
      min: 1,
      p25: null,
      p50: 9,
      p75: null,
      p90: null,
      p95: null,
      p99: 20,
      max: null,
    })
  })

  test('no samples, no figures', () => {
    expect(summaryDistribution({ mean: 0, median: 0, std: 0, percentiles: new Map(), max: null }, 0)).toMatchObject({
      samples: 0,
      mean: null,
      p50: null,
    })
  })
})
