import { expect, test } from 'vitest'
import { BENCH_WORKER_NODE_FLAGS } from '../src/node-flags.ts'
import { soak, soakReport } from './soak-bench.ts'

// Structural only: the soak runs `servegate run` in a process of its own and reports its figures.
// Memory thresholds are the benchmark's job (npm run bench:soak), never a CI assertion on a
// shared machine.
test.skipIf(process.platform !== 'linux')(
  'a 20-second soak runs the CLI under the client flags and prints RSS after warm-up, at the end and the growth',
  async () => {
    const figures = await soak(20 / 60, 50, { log: () => {} })
    const report = soakReport(figures)
    console.log(report)
    expect(figures.requests).toBe(1000)
    expect(figures.completed).toBe(1000)
    expect(figures.nodeFlags).toEqual(BENCH_WORKER_NODE_FLAGS)
    expect(figures.samples).toBeGreaterThanOrEqual(5)
    expect(figures.finish.recordMB).toBeGreaterThan(0)
    expect(report).toMatch(/RSS after warm-up [\d.]+ MB, at the end [\d.]+ MB/)
    expect(report).toMatch(/growth -?[\d.]+ MB/)
    expect(report).toMatch(/peak RSS of the CLI over the run [\d.]+ MB/)
  },
  120_000,
)
