import { defineConfig } from 'vitest/config'
import { servegate } from './src/vitest/index.ts'

export default defineConfig({
  plugins: [servegate({ evidenceDir: 'evidence' })],
  test: {
    include: ['src/**/*.test.ts', 'fixtures/*.test.ts', 'benchmarks/**/*.test.ts', 'scripts/**/*.test.ts'],
    testTimeout: 30_000,
    hookTimeout: 30_000,
    // Tests that measure timing share two cores with the simulated engine; run files one at a time.
    fileParallelism: false,
  },
})
