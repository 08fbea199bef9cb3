/**
 * The plugin's options reach the bench run: `benchTimeoutMs` is the tests' timeout under
 * `vitest bench` (a test awaiting a pair waits while the engines load), `nvidiaSmi` is the
 * one nvidia-smi of the workers' environment, and `inconclusive` is the matchers' policy.
 */
import { readdir, readFile, rm } from 'node:fs/promises'
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { execa } from 'execa'
import { expect, test } from 'vitest'
import { readIndex, verifyEvidence } from '../evidence/verify.ts'
import { RunRecord } from '../schema/run.ts'
import { BENCH_WORKER_NODE_FLAGS, resolveServegateOptions } from './plugin-options.ts'

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

test('the nvidiaSmi option reaches both the manifest and the GPU sampler, with no nvidia-smi on PATH', async () => {
  const evidence = join(ROOT, '.servegate', 'gpu-suite-evidence')
  await rm(evidence, { recursive: true, force: true })
  const calls = join(ROOT, '.servegate', 'gpu-suite-nvidia-smi-calls.log')
  await rm(calls, { force: true })
  const run = await execa(process.execPath, [VITEST, 'bench', '--run', '--root', 'fixtures/gpu-suite'], {
    cwd: ROOT,
    env: {
      SERVEGATE_NVIDIA_SMI: join(ROOT, 'fixtures', 'fakes', 'nvidia-smi'),
      SERVEGATE_EVIDENCE_DIR: evidence,
      FAKE_NVIDIA_SMI_CALL_LOG: calls,
      FORCE_COLOR: '0',
    },
    reject: false,
    timeout: 120_000,
    cleanup: true,
  })
  expect(run.exitCode, run.stdout + run.stderr).toBe(0)
  expect(await readdir(join(evidence, 'runs', 'cell'))).toEqual(['on-gpu-0.json'])
  const record = RunRecord.parse(JSON.parse(await readFile(join(evidence, 'runs', 'cell', 'on-gpu-0.json'), 'utf8')))
  expect(record.manifest?.gpus.status).toBe('ok')
  const gpu = record.telemetry?.gpu
  expect(gpu?.status).toBe('ok')
  if (gpu?.status === 'ok') expect(gpu.summary.status).toBe('ok')
  // The manifest's facts query and the sampler's polls: both ran the configured fake.
  const lines = (await readFile(calls, 'utf8')).trim().split('\n')
  expect(lines.some((l) => l.includes('driver_version'))).toBe(true)
  expect(lines.some((l) => l.includes('timestamp,power.draw'))).toBe(true)
}, 120_000)

test("servegate({ inconclusive: 'pass' }) reaches the matchers: an undecided win passes, and the evidence says which policy decided", async () => {
  const run = (inconclusive: string, evidence: string) =>
    execa(process.execPath, [VITEST, 'bench', '--run', '--root', 'fixtures/policy-suite'], {
      cwd: ROOT,
      env: { SERVEGATE_INCONCLUSIVE: inconclusive, SERVEGATE_EVIDENCE_DIR: evidence, FORCE_COLOR: '0', GITHUB_STEP_SUMMARY: '' },
      reject: false,
      timeout: 120_000,
      cleanup: true,
    })
  const passing = join(ROOT, '.servegate', 'policy-suite-pass-evidence')
  const byDefault = join(ROOT, '.servegate', 'policy-suite-default-evidence')
  // One after the other: two suites of two engines at once on two cores would be the noise.
  const pass = await run('pass', passing)
  const fail = await run('', byDefault)
  expect(pass.exitCode, pass.stdout + pass.stderr).toBe(0)
  expect(fail.exitCode, fail.stdout + fail.stderr).toBe(1)
  expect(fail.stdout + fail.stderr).toMatch(/Policy: +inconclusive fails: the default for a superiority claim/)
  const [plugin, own] = (await readIndex(passing)).gates
  expect(plugin).toMatchObject({
    decision: { outcome: 'inconclusive' },
    policy: { inconclusive: 'pass', from: 'plugin' },
    passed: true,
    testPassed: true,
  })
  expect(own).toMatchObject({ policy: { inconclusive: 'fail', from: 'gate' }, passed: false, isNot: true, testPassed: true })
  expect((await readIndex(byDefault)).gates.map((g) => [g.policy, g.testPassed])).toEqual([
    [{ inconclusive: 'fail', from: 'default' }, false],
    [{ inconclusive: 'fail', from: 'gate' }, true],
  ])
  // The verdicts the matchers recorded are decided again from the records, policy included.
  expect(await verifyEvidence(passing)).toMatchObject({ problems: [] })
  expect(await verifyEvidence(byDefault)).toMatchObject({ problems: [] })
}, 120_000)

async function workerFlags(env: Record<string, string>): Promise<string[]> {
  const out = join(ROOT, '.servegate', `node-flags-${Object.values(env).join('_').replace(/\W+/g, '')}.json`)
  await rm(out, { force: true })
  const run = await execa(process.execPath, [VITEST, 'bench', '--run', '--root', 'fixtures/node-flags-suite'], {
    cwd: ROOT,
    env: { ...env, SERVEGATE_FLAGS_OUT: out, SERVEGATE_EVIDENCE_DIR: join(ROOT, '.servegate', 'node-flags-evidence'), FORCE_COLOR: '0' },
    reject: false,
    timeout: 120_000,
    cleanup: true,
  })
  expect(run.exitCode, run.stdout + run.stderr).toBe(0)
  return JSON.parse(await readFile(out, 'utf8')) as string[]
}

test('the bench workers get the V8 flags the client memory figures are measured under, the project keeping its own', async () => {
  expect(await workerFlags({})).toEqual(expect.arrayContaining([...BENCH_WORKER_NODE_FLAGS]))
  // A flag the project sets stays as it set it; the others are added.
  const own = await workerFlags({ SERVEGATE_EXEC_ARGV: JSON.stringify(['--max-semi-space-size=8']) })
  expect(own.filter((f) => f.startsWith('--max-semi-space-size'))).toEqual(['--max-semi-space-size=8'])
  expect(own).toContain('--wasm-tiering-budget=2000000000')
  // So does one set in NODE_OPTIONS (a command-line flag would override it).
  const fromEnv = await workerFlags({ NODE_OPTIONS: '--max-semi-space-size=8' })
  expect(fromEnv.filter((f) => f.startsWith('--max-semi-space-size'))).toEqual([])
  expect(fromEnv).toContain('--wasm-tiering-budget=2000000000')
  // Worker threads refuse V8 flags: the threads pool runs without them.
  expect((await workerFlags({ SERVEGATE_POOL: 'threads' })).filter((f) => f.startsWith('--max-semi') || f.startsWith('--wasm'))).toEqual([])
  expect(await workerFlags({ SERVEGATE_WORKER_NODE_FLAGS: '[]' })).not.toContain('--max-semi-space-size=2')
}, 240_000)

test('a workerNodeFlags entry that is not a flag is refused, naming the field', () => {
  expect(() => resolveServegateOptions({ workerNodeFlags: ['max-semi-space-size=2'] })).toThrow(
    /servegate\(options\)\.workerNodeFlags\.0: a Node flag/,
  )
})

test('a worker flag this Node does not take stops the run before any worker starts, naming it', async () => {
  const run = await execa(process.execPath, [VITEST, 'bench', '--run', '--root', 'fixtures/node-flags-suite'], {
    cwd: ROOT,
    env: {
      SERVEGATE_WORKER_NODE_FLAGS: JSON.stringify(['--no-such-v8-flag-here=1']),
      SERVEGATE_FLAGS_OUT: join(ROOT, '.servegate', 'node-flags-refused.json'),
      SERVEGATE_EVIDENCE_DIR: join(ROOT, '.servegate', 'node-flags-evidence'),
      FORCE_COLOR: '0',
    },
    reject: false,
    timeout: 120_000,
    cleanup: true,
  })
  expect(run.exitCode).not.toBe(0)
  expect(run.stdout + run.stderr).toMatch(/workerNodeFlags: --no-such-v8-flag-here=1 is not an option of this Node/)
}, 120_000)
