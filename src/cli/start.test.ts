import { readFile } from 'node:fs/promises'
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { execa, type ResultPromise } from 'execa'
import { afterAll, beforeAll, describe, expect } from 'vitest'
import { test } from '../../fixtures/test-context.ts'
import { BENCH_WORKER_NODE_FLAGS } from '../node-flags.ts'
import { RunRecord } from '../schema/run.ts'
import { cliNodeFlagsToAdd, NO_REEXEC_ENV } from './start.ts'

const BIN = fileURLToPath(new URL('../../bin/servegate.js', import.meta.url))

describe('cliNodeFlagsToAdd', () => {
  test('a command that runs cells gets every client flag; one that measures nothing gets none', () => {
    for (const command of ['run', 'capacity', 'demo']) expect(cliNodeFlagsToAdd(command, [], {})).toEqual(BENCH_WORKER_NODE_FLAGS)
    for (const command of ['sim', 'summarize', 'verify', '--version', undefined]) expect(cliNodeFlagsToAdd(command, [], {})).toEqual([])
  })

  test('a flag the user set in execArgv or NODE_OPTIONS stays theirs; the re-executed CLI adds nothing', () => {
    const env = { NODE_OPTIONS: '--max-semi-space-size=8 --enable-source-maps' }
    expect(cliNodeFlagsToAdd('run', ['--heap-growing-percent=30', '--memory-reducer'], env)).toEqual(['--wasm-tiering-budget=2000000000'])
    expect(cliNodeFlagsToAdd('run', [], { [NO_REEXEC_ENV]: '1' })).toEqual([])
  })
})

/** The Node flags of a running process, from its command line (Linux). */
async function nodeFlagsOf(pid: number): Promise<string[]> {
  const argv = (await readFile(`/proc/${pid}/cmdline`, 'utf8')).split('\0')
  return argv.slice(1, argv.indexOf(BIN))
}

// An endpoint that lists the model and holds every completion open: the CLI waits mid-cell
// until the test interrupts it.
describe.skipIf(process.platform !== 'linux')('bin/servegate.js', () => {
  let server: Server
  let url = ''
  let streams = 0
  beforeAll(async () => {
    server = createServer((req, res) => {
      req.resume()
      // A completion is held open (a request in flight); the tokenizer endpoints are absent, as on many servers.
      if (req.method === 'POST' && req.url?.endsWith('/completions') === true) streams++
      else if (req.method === 'POST') res.writeHead(404).end()
      else if (req.url === '/v1/models') res.writeHead(200, { 'content-type': 'application/json' }).end('{"data":[{"id":"m"}]}')
      else res.writeHead(404).end()
    })
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  })
  afterAll(async () => {
    server.closeAllConnections()
    await new Promise((r) => server.close(r))
  })

  /**
   * `servegate run` as a user starts it, under `node` with `nodeFlags`, once its first request
   * waits (wrapped: an async function would await the child itself, a thenable, to its exit).
   */
  async function startRun(out: string, nodeFlags: string[] = [], env: Record<string, string> = {}): Promise<{ child: ResultPromise }> {
    const before = streams
    const argv = ['run', '--base-url', url, '--model', 'm', '--requests', '2', '--no-calibrate', '--out', out]
    const child = execa(process.execPath, [...nodeFlags, BIN, ...argv], { reject: false, env })
    await expect.poll(() => streams, { timeout: 20_000, interval: 50 }).toBeGreaterThan(before)
    return { child }
  }

  test(
    '`run` runs under the client flags in the process that was started (same pid); Ctrl-C still writes the record, exit 130',
    { timeout: 30_000 },
    async ({ tmpDir }) => {
      const out = join(tmpDir, 'flags.json')
      const { child } = await startRun(out)
      expect(await nodeFlagsOf(child.pid as number)).toEqual(BENCH_WORKER_NODE_FLAGS)
      child.kill('SIGINT')
      const result = await child
      expect(result.stderr).toMatch(/servegate: interrupted by SIGINT; the requests measured so far are in the record/)
      expect(result.exitCode).toBe(130)
      const record = RunRecord.parse(JSON.parse(await readFile(out, 'utf8')))
      expect(record.failures.REQUEST_ABORTED).toBeGreaterThan(0)
    },
  )

  test('a flag set in NODE_OPTIONS or on the command line wins; SIGTERM exits 143', { timeout: 30_000 }, async ({ tmpDir }) => {
    const { child } = await startRun(join(tmpDir, 'user-flags.json'), ['--heap-growing-percent=30'], {
      NODE_OPTIONS: '--max-semi-space-size=8',
    })
    expect(await nodeFlagsOf(child.pid as number)).toEqual([
      '--heap-growing-percent=30',
      '--wasm-tiering-budget=2000000000',
      '--no-memory-reducer',
    ])
    child.kill('SIGTERM')
    expect((await child).exitCode).toBe(143)
  })

  test('a command that measures nothing (`sim`) runs as started', { timeout: 30_000 }, async () => {
    const child = execa(process.execPath, [BIN, 'sim', '--port', '0', '--model', 'm'], { reject: false })
    await new Promise<void>((resolve) => child.stdout.on('data', (b: Buffer) => b.toString().includes('listening') && resolve()))
    expect(await nodeFlagsOf(child.pid as number)).toEqual([])
    child.kill('SIGTERM')
    await child
  })

  test('an exit code comes through the re-execution: a bad flag exits 2', async () => {
    const result = await execa(process.execPath, [BIN, 'run', '--base-url', url, '--model', 'm', '--requests', '0'], { reject: false })
    expect(result.stderr).toMatch(/^servegate: --requests: "0" is not valid/)
    expect(result.exitCode).toBe(2)
  })
})
