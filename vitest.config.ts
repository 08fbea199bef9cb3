import { defineConfig } from 'vitest/config'

export default defineConfig({
  test: {
    include: ['src/**/*.test.ts', 'matchers/**/*.test.ts', 'benchmarks/**/*.test.ts', 'scripts/**/*.test.ts'],
    testTimeout: 30_000,
    hookTimeout: 30_000,
    // Tests that measure timing share two cores with the simulated engine; run files one at a time.
    fileParallelism: false,
  },
})
