import { availableParallelism } from 'node:os'
import { configDefaults, defineConfig } from 'vitest/config'
import { servegate } from './src/vitest/index.ts'

const INCLUDE = ['src/**/*.test.ts', 'fixtures/*.test.ts', 'benchmarks/**/*.test.ts', 'scripts/**/*.test.ts']

/**
 * Test files that assert wall-clock bounds (a send lag, a latency, a deadline met in under a
 * second, a signal sent while a cell is still running) or judge what an engine measured (a 2×
 * decode win, a prefill win, a capacity bracket, a held latency). Another test file busy on the
 * same two cores would fail them, not the code: they run one file at a time, after every other
 * file.
 */
const TIMING = [
  'benchmarks/cell-bench.test.ts',
  'benchmarks/client-bench.test.ts',
  'benchmarks/python-client.test.ts',
  'benchmarks/servers/paced.test.ts',
  'src/cli/cli.test.ts',
  'src/cli/demo.test.ts',
  'src/cli/evidence-commands.test.ts',
  'src/cli/init.test.ts',
  'src/cli/network-time.test.ts',
  'src/cli/run-command.test.ts',
  'src/cli/run-exits.test.ts',
  'src/cli/shards.test.ts',
  'src/client/clock.test.ts',
  'src/client/read-batching.test.ts',
  'src/client/sse.test.ts',
  'src/client/staged-reads.test.ts',
  'src/client/stream-wire-faults.test.ts',
  'src/client/turn-slice.test.ts',
  'src/declare/staged-pair-declaration.test.ts',
  'src/declare/sweep-declaration.test.ts',
  'src/engines/kubernetes.test.ts',
  'src/engines/launch.test.ts',
  'src/engines/llama-server-load.test.ts',
  'src/evidence/board.test.ts',
  'src/evidence/charts.test.ts',
  'src/evidence/evidence.test.ts',
  'src/evidence/pr-comment.test.ts',
  'src/evidence/shards.test.ts',
  'src/evidence/stored-baseline-evidence.test.ts',
  'src/matchers/stored-baseline-pair.test.ts',
  'src/runner/capacity-search.test.ts',
  'src/runner/cell-load-meter.test.ts',
  'src/runner/cell-telemetry.test.ts',
  'src/runner/client-workers.test.ts',
  'src/runner/dispatch.test.ts',
  'src/runner/measure-cell.test.ts',
  'src/runner/network-probes.test.ts',
  'src/runner/open-loop.test.ts',
  'src/runner/phase-feed.test.ts',
  'src/sim/saturation.test.ts',
  'src/sim/server.test.ts',
  'src/vitest/plugin.test.ts',
  'src/workload/prepare.test.ts',
]

// One plugin instance for both projects, so the run has one evidence reporter and one progress
// display. Each project lists it itself (extends: false): vitest 5 does not apply a plugin's
// `test` options (the matchers' setup file, the provided options) to an inline project that
// shares the root's Vite server.
const plugin = servegate({ evidenceDir: 'evidence' })
const timeouts = { testTimeout: 30_000, hookTimeout: 30_000 }

export default defineConfig({
  test: {
    projects: [
      {
        extends: false,
        plugins: [plugin],
        test: {
          name: 'unit',
          include: INCLUDE,
          exclude: [...configDefaults.exclude, ...TIMING],
          // One worker more than cores: many of these files wait on child processes and sockets.
          maxWorkers: availableParallelism() + 1,
          // A worker runs file after file in one module graph instead of a new process per file
          // (spawning one and importing the matchers' setup cost about 0.4 s a file); each file
          // still runs its setup file, and the files that set env vars or fake timers restore them.
          isolate: false,
          sequence: { groupOrder: 0 },
          ...timeouts,
          // `vitest bench` runs the bench files once, in the timing project's bench variant.
          benchmark: { exclude: ['**'] },
        },
      },
      {
        extends: false,
        plugins: [plugin],
        test: {
          name: 'timing',
          include: TIMING,
          fileParallelism: false,
          sequence: { groupOrder: 1 },
          // A wall-clock bound judged on a shared runner can lose to a neighbour's burst (CI failed
          // three times so, each time on a different test); a real regression fails all three tries.
          retry: 2,
          ...timeouts,
        },
      },
    ],
  },
})
