// Type tests of the load-shape spec API and matchers: checked by `tsc -p test-d` (npm run typecheck:dist) against the built .d.ts, as a
// consumer compiles them, never run.
import { expect, expectTypeOf } from 'vitest'
import { calibrate, type Calibration, capacity, type CapacitySearch, engine, type NoiseProfile, sweep } from 'servegate'
import type { CellResult, Lazy, PairResult, SweepResult } from 'servegate'

const model = { id: 'Qwen/Qwen3-8B', revision: '5112966d' }
const a = engine.vllm({ model })
const b = engine.sglang({ model })

const cells = sweep({ engine: a, ladder: { rates: [2, 4, 8], durationS: 20 }, arrival: { kind: 'poisson', ratePerS: 1, seed: 3 } })
expectTypeOf(cells).toExtend<PromiseLike<SweepResult<CellResult>>>()
expectTypeOf(cells.steps[0]!.result).toEqualTypeOf<Lazy<CellResult>>()
const pairs = sweep({ baseline: a, candidate: b, ladder: { concurrencies: [1, 4], requestsPerSlot: 16 } })
expectTypeOf(pairs).toExtend<PromiseLike<SweepResult<PairResult>>>()
// @ts-expect-error: a ladder has rates or concurrencies
sweep({ engine: a, ladder: { rps: [1] } })
// @ts-expect-error: gamma arrivals need their burstiness
sweep({ engine: a, ladder: { rates: [1] }, arrival: { kind: 'gamma', ratePerS: 1 } })

const c = capacity({ engine: a, slo: { ttftMs: 500, tpotMs: 50 }, bracket: { start: 4, max: 64 }, workload: { promptTokens: 1024 } })
expectTypeOf(c).toExtend<PromiseLike<CapacitySearch>>()
// @ts-expect-error: a capacity search needs its SLO
capacity({ engine: a, bracket: { start: 4 } })

const noise = calibrate({ engine: a, launches: 5, concurrency: 8, requests: 64, out: 'servegate-noise.json' })
expectTypeOf(noise).toExtend<PromiseLike<Calibration>>()
expectTypeOf<Calibration['profile']>().toEqualTypeOf<NoiseProfile>()
// @ts-expect-error: launches is a number
calibrate({ engine: a, launches: '5' })

async function matchers(): Promise<void> {
  const measured = await cells
  expect(measured).toMeetSLO({ ttftMs: 500, tpotMs: 50, percentile: 95, atRate: 4 })
  expect(await pairs).toMeetSLO({ e2eMs: 20_000, atConcurrency: 4 })
  expect(await c).toSustainMoreThan(await c, { by: 0.1 })
  // @ts-expect-error: the objectives are numbers of ms
  expect(measured).toMeetSLO({ ttftMs: '500ms' })
  // @ts-expect-error: the margin is a number
  expect(await c).toSustainMoreThan(await c, { by: '10%' })
}
void matchers
