import { PassThrough } from 'node:stream'
import { afterEach, describe, expect, test } from 'vitest'
import { parseSimArgs, simCommand } from '../cli/sim.ts'
import { launchSpeed } from './launch-speed.ts'
import { seededLaunch, simCommandConfig } from './sim-engine.ts'
import { startSimServer, type SimServer } from './server.ts'

const servers: SimServer[] = []
afterEach(async () => {
  await Promise.all(servers.splice(0).map((server) => server.close()))
})

describe('launch noise', () => {
  test('without it every launch runs at the speed it was given', () => {
    expect(launchSpeed({ launchNoise: 0, launchSeed: 3 })).toBe(1)
    expect(launchSpeed({ launchNoise: 0, launchSeed: null })).toBe(1)
  })

  test('a seed gives the same draw every time; seeds 0, 1, 2… give draws whose log has sd launchNoise', () => {
    expect(launchSpeed({ launchNoise: 0.04, launchSeed: 11 })).toBe(launchSpeed({ launchNoise: 0.04, launchSeed: 11 }))
    const logs = Array.from({ length: 4000 }, (_, seed) => Math.log(launchSpeed({ launchNoise: 0.04, launchSeed: seed })))
    const mean = logs.reduce((a, b) => a + b, 0) / logs.length
    const sd = Math.sqrt(logs.reduce((s, x) => s + (x - mean) ** 2, 0) / (logs.length - 1))
    expect(Math.abs(mean)).toBeLessThan(0.003)
    expect(sd).toBeGreaterThan(0.038)
    expect(sd).toBeLessThan(0.042)
  })

  test('without a seed each launch draws anew', () => {
    const draws = new Set(Array.from({ length: 20 }, () => launchSpeed({ launchNoise: 0.04, launchSeed: null })))
    expect(draws.size).toBe(20)
  })

  test("the server reports its draw and runs at it: the engine's own prefill time is the prompt over the drawn speed", async () => {
    const server = await startSimServer({ prefillTokPerS: 1000, launchNoise: 0.3, launchSeed: 4 })
    servers.push(server)
    expect(server.launchSpeed).toBe(launchSpeed({ launchNoise: 0.3, launchSeed: 4 }))
    expect(server.launchSpeed).not.toBe(1)
    // The sim's tokenizer counts words: 60 prompt tokens, prefilled at 1000 × speed tokens/s.
    const prompt = Array.from({ length: 60 }, (_, i) => `w${i}`).join(' ')
    const res = await fetch(`${server.url}/v1/completions`, {
      method: 'POST',
      body: JSON.stringify({ prompt, max_tokens: 2, stream: true }),
    })
    expect(await res.text()).toContain('[DONE]')
    const metrics = await (await fetch(`${server.url}/metrics`)).text()
    const sum = Number(/^vllm:request_prefill_time_seconds_sum\{[^}]*\} (\S+)$/m.exec(metrics)?.[1])
    expect(sum).toBeCloseTo(60 / (1000 * server.launchSpeed), 9)
  })
})

describe('servegate sim --launch-noise', () => {
  test('the flags set the options and a bad value names the flag and the fix', () => {
    expect(parseSimArgs(['--launch-noise', '0.04', '--launch-seed', '5'])).toMatchObject({ launchNoise: 0.04, launchSeed: 5 })
    expect(parseSimArgs([])).toMatchObject({ launchNoise: 0, launchSeed: null })
    expect(() => parseSimArgs(['--launch-noise', '2'])).toThrow(/^--launch-noise: .*\(got "2"\); use a number from 0 to 1/)
  })

  test('the listening line shows the launch speed it drew', async () => {
    const stdout = new PassThrough()
    let out = ''
    stdout.on('data', (bytes: Buffer) => (out += bytes.toString()))
    const controller = new AbortController()
    const argv = ['--port', '0', '--model', 'm', '--launch-noise', '0.04', '--launch-seed', '9']
    const running = simCommand(argv, { stdout, stderr: new PassThrough() }, controller.signal)
    await expect.poll(() => out).toMatch(/\n$/)
    const expected = launchSpeed({ launchNoise: 0.04, launchSeed: 9 }).toFixed(4)
    expect(out).toMatch(
      new RegExp(
        `^servegate sim listening on http://127\\.0\\.0\\.1:\\d+ \\(model m, launch speed ×${expected.replace('.', '\\.')}\\)\\n$`,
      ),
    )
    controller.abort()
    await expect(running).resolves.toBe(0)
  })
})

describe('seededLaunch', () => {
  test('launch i of a seeded sim draws from launchSeed + i; other engines and unseeded sims are left as they are', () => {
    const sim = simCommandConfig({ sim: { launchNoise: 0.04, launchSeed: 7 } })
    const optionsOf = (argv: string[]) => JSON.parse(argv[argv.indexOf('--options') + 1] as string) as Record<string, unknown>
    expect(seededLaunch(sim, 0)).toBe(sim)
    expect(optionsOf(seededLaunch(sim, 3).argv)).toEqual({ launchNoise: 0.04, launchSeed: 10 })
    const random = simCommandConfig({ sim: { launchNoise: 0.04 } })
    expect(seededLaunch(random, 3)).toBe(random)
    const other = { kind: 'command', argv: ['vllm', 'serve', '--options', '{"launchSeed":1}'] }
    expect(seededLaunch(other, 3)).toBe(other)
  })
})
