import { expect, test } from 'vitest'
import { soak, soakReport } from './soak-bench.ts'

// Structural only: the soak runs and reports its figures. Memory thresholds are the benchmark's
// job (npm run bench:soak), never a CI assertion on a shared machine.
test('a 20-second soak runs its cell and prints RSS after warm-up, at the end and the growth', async () => {
  const figures = await soak(20 / 60, 50, () => {})
  const report = soakReport(figures)
  console.log(report)
  expect(figures.requests).toBe(1000)
  expect(figures.samples).toBeGreaterThanOrEqual(5)
  expect(report).toMatch(/RSS after warm-up [\d.]+ MB, at the end [\d.]+ MB/)
  expect(report).toMatch(/growth -?[\d.]+ MB/)
}, 120_000)
