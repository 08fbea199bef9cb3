import { readFile } from 'node:fs/promises'
import { join } from 'node:path'
import { PassThrough } from 'node:stream'
import { fileURLToPath } from 'node:url'
import { expect } from 'vitest'
import { test } from '../../fixtures/test-context.ts'
import { RunRecord } from '../schema/run.ts'
import { simCommand } from './sim.ts'

const TRACE = fileURLToPath(new URL('../../fixtures/traces/mooncake-blocks.jsonl', import.meta.url))

/** `servegate sim ARGV` until the test ends: the URL it listens on. */
async function servegateSim(argv: string[], onCleanup: (cleanup: () => Promise<void>) => void): Promise<string> {
  const stdout = new PassThrough()
  let out = ''
  stdout.on('data', (bytes: Buffer) => (out += bytes.toString()))
  const stop = new AbortController()
  const running = simCommand(['--port', '0', ...argv], { stdout, stderr: new PassThrough() }, stop.signal)
  onCleanup(async () => {
    stop.abort()
    await running
  })
  await expect.poll(() => out).toMatch(/\n$/)
  return /listening on (\S+)/.exec(out)?.[1] as string
}

test('servegate run --trace --trace-block-tokens against servegate sim --prefix-cache-tokens: the cached share is the trace’s reuse share', async ({
  cli,
  tmpDir,
  onTestFinished,
}) => {
  const cache = ['--prefix-cache-tokens', '1048576', '--prefix-block-tokens', '512']
  const url = await servegateSim(['--model', 'm', ...cache, '--prefill-tok-per-s', '1000000', '--decode-tok-per-s', '2000'], onTestFinished)
  const out = join(tmpDir, 'trace-reuse.json')
  const r = await cli([
    'run',
    '--base-url',
    url,
    '--model',
    'm',
    '--api',
    'completions',
    '--trace',
    TRACE,
    '--trace-block-tokens',
    '512',
    '--trace-time-scale',
    '0.01',
    '--out',
    out,
  ])
  expect(r.stderr).toBe('')
  expect(r.code).toBe(0)
  expect(r.stdout).toMatch(/^open loop: trace replay \(time ×0\.01\), reuse share 65\.2% \(512-token blocks\) · 24 of 24 rows of /m)
  const record = RunRecord.parse(JSON.parse(await readFile(out, 'utf8')))
  expect(record.plan.arrival?.trace?.blockTokens).toBe(512)
  const reuseShare = record.plan.arrival?.reuseShare as number
  expect(Math.abs((record.metrics.cachedPromptShare as number) - reuseShare)).toBeLessThanOrEqual(0.02)
})
