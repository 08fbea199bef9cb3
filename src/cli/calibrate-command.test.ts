import { existsSync } from 'node:fs'
import { readFile, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { describe, expect } from 'vitest'
import { test } from '../../fixtures/test-context.ts'
import { resolveNoiseFloor } from '../gates/noise-floor.ts'
import { NoiseProfile } from '../schema/noise.ts'

/** Seeds 10…15 at 4% draw launches whose own sd is 4.9% (bound 7.2%): the bound covers 4% whatever the timer jitter adds. */
const SIM = { decodeTokPerS: 50, batchSlowdown: 0, launchNoise: 0.04, launchSeed: 10 }
// 20 ms steps, four streams that do not slow each other: 16 tokens a request outlast the timer jitter of a busy machine.
const CELL = ['--requests', '16', '--concurrency', '4', '--max-tokens', '16', '--prompt-tokens', '32']

describe('servegate calibrate', () => {
  test('against the sim at 4% launch noise: recovers it within its bound and writes a profile a gate uses', async ({ cli, tmpDir }) => {
    const out = join(tmpDir, 'noise.json')
    const r = await cli(['calibrate', '--sim', JSON.stringify(SIM), '--launches', '6', ...CELL, '--runner', 'ci-sim', '--out', out])
    expect(r.stderr).toBe('')
    expect(r.code).toBe(0)
    const profile = NoiseProfile.parse(JSON.parse(await readFile(out, 'utf8')))
    expect(profile.launches).toBe(6)
    expect(profile.testbed).toMatchObject({ runner: 'ci-sim', model: 'sim-model', cell: { concurrency: 4, requests: 16, maxTokens: 16 } })
    const decode = profile.metrics.decodeTokPerS as NoiseProfile['metrics'][string]
    // What the timer jitter of a busy machine adds only widens the spread: the bound covers the injected 4%.
    expect(decode.sd).toBeGreaterThan(0.02)
    expect(decode.sd).toBeLessThanOrEqual(decode.upper)
    expect(decode.upper).toBeGreaterThanOrEqual(0.04)
    for (const metric of ['ttftMs p95', 'effectivePrefillTokPerS', 'outputThroughputTokPerS'])
      expect(profile.metrics).toHaveProperty([metric])
    // A gate on the same testbed takes its floor from the profile, and says so.
    const floor = resolveNoiseFloor({ metric: 'decodeTokPerS', testbed: profile.testbed, profile: { path: out, profile } })
    expect(floor).toMatchObject({ source: 'measured', value: decode.upper })
    expect(r.stdout).toMatch(/^launch 6\/6: decode [\d.]+ tok\/s \(geometric mean\), TTFT p95 [\d.]+ ms$/m)
    expect(r.stdout).toMatch(/^decodeTokPerS +[\d.]+% +[\d.]+% +[\d.]+%$/m)
    expect(r.stdout).toMatch(
      /^ {2}decode \(decodeTokPerS\): detects a change of [\d.]+% or more at 16 paired requests per arm; a 5% change needs .*launches per arm/m,
    )
    expect(r.stdout).toContain('cell c4 × 16 requests, max_tokens 16')
    expect(r.stdout).toContain(`noise profile: ${out} (6 launches)`)
  }, 180_000)

  test.each([
    [[], /--engine FILE or --sim JSON is required/],
    [['--sim', '{}', '--launches', '1'], /^servegate: --launches: "1" is not valid; pass an integer from 2 to 100$/m],
    [['--sim', '{"decodeTokPerS":-1}'], /^servegate: --sim: .*decodeTokPerS/m],
    [['--sim', 'nope'], /--sim: not JSON; pass one JSON object of sim options/],
    [['--sim', '{}', '--target', '0'], /--target: "0" is not valid; pass a number > 0/],
    [['--base-url', 'http://127.0.0.1:1'], /base-url/],
  ])('%j is a usage error before anything launches (exit 2)', async (argv, message) => {
    const r = await (await import('../../fixtures/cli.ts')).cli(['calibrate', ...argv])
    expect(r.code).toBe(2)
    expect(r.stderr).toMatch(message)
  })

  test('a launch that fails stops the calibration: exit 1, naming the launch, and no profile', async ({ cli, tmpDir }) => {
    const engineFile = join(tmpDir, 'dying.json')
    const vllm = fileURLToPath(new URL('../../fixtures/fakes/vllm', import.meta.url))
    const config = { kind: 'vllm', executable: vllm, model: { id: 'fake/m' }, env: { FAKE_ENGINE_EXIT_ON_START: '3' }, logDir: tmpDir }
    await writeFile(engineFile, JSON.stringify(config))
    const out = join(tmpDir, 'never.json')
    const r = await cli(['calibrate', '--engine', engineFile, '--launches', '3', '--requests', '4', '--out', out])
    expect(r.code).toBe(1)
    expect(r.stderr).toMatch(/^servegate: calibration launch 1 of 3 failed: engine vllm exited during start-up with code 3/)
    expect(existsSync(out)).toBe(false)
  }, 60_000)

  test('--help names the flags and the profile', async ({ cli }) => {
    const r = await cli(['calibrate', '--help'])
    expect(r.code).toBe(0)
    for (const flag of ['--launches K', '--runner LABEL', '--target X', '--sim JSON', 'servegate-noise.json'])
      expect(r.stdout).toContain(flag)
  })
})
