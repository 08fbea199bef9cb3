import { PassThrough } from 'node:stream'
import { describe, expect, test } from 'vitest'
import { parseSimArgs, simCommand } from './sim.ts'
import { ServegateError } from '../errors.ts'

function capture() {
  const stdout = new PassThrough()
  const stderr = new PassThrough()
  let out = ''
  stdout.on('data', (bytes: Buffer) => (out += bytes.toString()))
  return { io: { stdout, stderr }, out: () => out }
}

describe('simCommand', () => {
  test('prints the listening line, serves, and returns 0 when the signal aborts', async () => {
    const { io, out } = capture()
    const controller = new AbortController()
    const running = simCommand(['--port', '0', '--model', 'cli-model', '--output-tokens', '2'], io, controller.signal)
    await expect.poll(out).toMatch(/\n$/)
    const match = /^servegate sim listening on (http:\/\/127\.0\.0\.1:(\d+)) \(model cli-model\)\n$/.exec(out())
    expect(match).not.toBeNull()
    const res = await fetch(`${match?.[1]}/v1/completions`, {
      method: 'POST',
      body: JSON.stringify({ model: 'cli-model', prompt: 'hi', max_tokens: 5, stream: true }),
    })
    expect(await res.text()).toContain('data: [DONE]')
    controller.abort()
    await expect(running).resolves.toBe(0)
    await expect(fetch(`${match?.[1]}/health`)).rejects.toThrow()
  })

  test.each([
    [['--decode-tok-per-s', '-3'], /^--decode-tok-per-s: .*; use a number > 0/],
    [['--tokens-per-chunk', '1.5'], /^--tokens-per-chunk: .*; use an integer >= 1/],
    [['--port', 'abc'], /^--port: .*"abc".*; use an integer 0\.\.65535/],
    [['--fault', 'boom:1'], /^--fault: .*"boom".*; a fault kind is one of http500/],
    [['--fault', 'drop'], /^--fault: "drop" has no request indices; pass KIND:IDX\[,IDX\.\.\.\], e\.g\. --fault drop:0,3$/],
    [['--host', '0.0.0.0'], /^--host: .*; the sim serves loopback only/],
    [['--fast'], /^--fast: unknown flag; did you mean --host\? run `servegate sim --help`/],
    [['--xyzzy-plugh'], /^--xyzzy-plugh: unknown flag; run `servegate sim --help`/],
    [['--decode-tok-per-sec', '9'], /^--decode-tok-per-sec: unknown flag; did you mean --decode-tok-per-s\? run `servegate sim --help`/],
    [['--seed'], /^--seed: needs a value; pass it as --seed VALUE/],
    [['--prefix-cache-tokens', '8'], /^--prefix-cache-tokens: holds no whole block .*\(got "8"\); use 0 \(no prefix cache\)/],
  ])('%j is a one-line CONFIG_INVALID naming the flag and the fix', async (argv, message) => {
    const { io } = capture()
    const attempt = simCommand(argv, io, AbortSignal.abort())
    await expect(attempt).rejects.toBeInstanceOf(ServegateError)
    await expect(attempt).rejects.toMatchObject({ code: 'CONFIG_INVALID', message: expect.stringMatching(message) })
    await expect(attempt).rejects.toMatchObject({ message: expect.not.stringContaining('\n') })
  })

  test('--prefix-cache-tokens and --prefix-block-tokens turn the prefix cache on', () => {
    expect(parseSimArgs(['--prefix-cache-tokens', '65536', '--prefix-block-tokens', '32'])).toMatchObject({
      prefixCacheTokens: 65_536,
      prefixBlockTokens: 32,
    })
    expect(parseSimArgs([])).toMatchObject({ prefixCacheTokens: 0, prefixBlockTokens: 16 })
  })

  test('--help prints the flags and returns 0', async () => {
    const { io, out } = capture()
    await expect(simCommand(['--help'], io)).resolves.toBe(0)
    expect(out()).toContain('--decode-tok-per-s')
    expect(out()).toContain('--fault VALUE')
  })
})
