import { PassThrough } from 'node:stream'
import { afterEach, describe, expect, test } from 'vitest'
import { parseSimArgs, simCommand } from '../cli/sim.ts'
import { launchSpeed } from './launch-speed.ts'
import { startSimServer, type SimServer } from './server.ts'

const servers: SimServer[] = []
afterEach(async () => {
  await Promise.all(servers.splice(0).map((server) => server.close()))
})

/** Milliseconds a streamed completion of `tokens` tokens takes on `server`, send to [DONE]. */
async function streamMs(server: SimServer, tokens: number): Promise<number> {
  const started = performance.now()
  const res = await fetch(`${server.url}/v1/completions`, {
    method: 'POST',
    body: JSON.stringify({ prompt: 'one two three', max_tokens: tokens, stream: true }),
  })
  expect(await res.text()).toContain('[DONE]')
  return performance.now() - started
}

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

  test("the server reports its draw and runs at it: a slow launch streams slower for the launch's life", async () => {
    // Seeds whose draws at 30% are far apart, so the timing difference dwarfs timer jitter.
    const seeds = Array.from({ length: 200 }, (_, seed) => seed)
    const slow = seeds.reduce((a, b) =>
      launchSpeed({ launchNoise: 0.3, launchSeed: b }) < launchSpeed({ launchNoise: 0.3, launchSeed: a }) ? b : a,
    )
    const fast = seeds.reduce((a, b) =>
      launchSpeed({ launchNoise: 0.3, launchSeed: b }) > launchSpeed({ launchNoise: 0.3, launchSeed: a }) ? b : a,
    )
    const start = async (seed: number) => {
      const server = await startSimServer({ decodeTokPerS: 400, launchNoise: 0.3, launchSeed: seed })
      servers.push(server)
      return server
    }
    const [a, b] = [await start(slow), await start(fast)]
    expect(a.launchSpeed).toBe(launchSpeed({ launchNoise: 0.3, launchSeed: slow }))
    expect(b.launchSpeed / a.launchSpeed).toBeGreaterThan(1.8)
    const ratio = (await streamMs(a, 80)) / (await streamMs(b, 80))
    // 80 steps at 400 tok/s × speed: the measured ratio follows the drawn one within timer jitter.
    expect(ratio).toBeGreaterThan((b.launchSpeed / a.launchSpeed) * 0.8)
    expect(ratio).toBeLessThan((b.launchSpeed / a.launchSpeed) * 1.2)
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
