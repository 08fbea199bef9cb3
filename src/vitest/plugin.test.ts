/**
 * The plugin's options reach the bench run: `benchTimeoutMs` is the tests' timeout under
 * `vitest bench` (a test awaiting a pair waits while the engines load).
 */
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { execa } from 'execa'
import { expect, test } from 'vitest'

const ROOT = fileURLToPath(new URL('../../', import.meta.url))
const VITEST = join(dirname(createRequire(import.meta.url).resolve('vitest/package.json')), 'vitest.mjs')

function bench(timeoutMs: number) {
  return execa(process.execPath, [VITEST, 'bench', '--run', '--root', 'fixtures/timeout-suite'], {
    cwd: ROOT,
    env: {
      SERVEGATE_BENCH_TIMEOUT_MS: String(timeoutMs),
      SERVEGATE_EVIDENCE_DIR: join(ROOT, '.servegate', 'timeout-suite-evidence'),
      FORCE_COLOR: '0',
    },
    reject: false,
    timeout: 120_000,
    cleanup: true,
  })
}

test("benchTimeoutMs is the timeout of a bench test: 500 ms fails a 1.5 s test that vitest's own 60 s would pass", async () => {
  const short = await bench(500)
  expect(short.exitCode).toBe(1)
  expect(short.stdout + short.stderr).toMatch(/timed out in 500ms/)
  const long = await bench(10_000)
  expect(long.exitCode, long.stdout + long.stderr).toBe(0)
}, 120_000)
