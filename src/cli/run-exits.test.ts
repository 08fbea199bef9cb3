import { alive, treePids } from '../../fixtures/processes.ts'
import { readFile, writeFile } from 'node:fs/promises'
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { execa } from 'execa'
import { describe, expect } from 'vitest'
import { RunRecord } from '../schema/run.ts'
import { test } from '../../fixtures/test-context.ts'

const BIN = fileURLToPath(new URL('../../bin/servegate.js', import.meta.url))
const FAKES = fileURLToPath(new URL('../../fixtures/fakes/', import.meta.url))

test.override('simOptions', { model: 'm', decodeTokPerS: 20, prefillTokPerS: 50_000, maxModelLen: 1024 })

const lines = async (path: string): Promise<number> => (await readFile(path, 'utf8').catch(() => '')).split('\n').filter(Boolean).length

describe('input is checked before the cell', () => {
  test.for<[string, (file: string) => string, RegExp]>([
    ['under a file', (file) => join(file, 'x.json'), /^servegate: --out: .*plain\.txt is a file, not a directory; /],
    ['a directory', (file) => dirname(file), /^servegate: --out: .* is a directory; pass a file path, e\.g\. .*\/run\.json\n$/],
  ])('--out %s fails in < 1 s with exit 2, naming the flag, before any engine starts', async ([, outOf, message], { cli, tmpDir }) => {
    const file = join(tmpDir, 'plain.txt')
    await writeFile(file, 'x')
    const pids = join(tmpDir, `pids-${Math.random()}.txt`)
    const config = join(tmpDir, 'engine.json')
    await writeFile(
      config,
      JSON.stringify({ kind: 'vllm', executable: join(FAKES, 'vllm'), model: { id: 'fake/m' }, env: { FAKE_ENGINE_PIDFILE: pids } }),
    )
    const started = performance.now()
    const r = await cli(['run', '--engine', config, '--out', outOf(file)])
    expect(performance.now() - started).toBeLessThan(1000)
    expect(r.code).toBe(2)
    expect(r.stderr).toMatch(message)
    expect(await lines(pids)).toBe(0)
  })

  test.for<[string[], RegExp]>([
    [['--requests', '1000001'], /^servegate: --requests: "1000001" is not valid; pass an integer from 1 to 1000000\n$/],
    [['--warmup', '100001'], /^servegate: --warmup: "100001" is not valid; pass an integer from 0 to 100000\n$/],
    [
      ['--dataset', '/nonexistent/d.jsonl'],
      /^servegate: --dataset: \/nonexistent\/d\.jsonl does not exist; pass the path of a JSONL dataset\n$/,
    ],
    [['--trace', '/tmp'], /^servegate: --trace: \/tmp is not a regular file; pass the path of a JSONL trace\n$/],
    [
      ['--max-tokens', '2000'],
      /^servegate: --max-tokens: 2000 does not fit the model's context of 1024 tokens \(max_model_len in GET \/v1\/models\); pass fewer than 1024\n$/,
    ],
    [
      ['--prompt-tokens', '1000', '--max-tokens', '100'],
      /^servegate: --prompt-tokens 1000 \+ --max-tokens 100 = 1100 exceeds the model's context of 1024 tokens \(max_model_len in GET \/v1\/models\); pass at most 924 prompt tokens or fewer max tokens\n$/,
    ],
  ])('%j fails up front with exit 2 and one line naming the limit', async ([flags, message], { cli, simEngine, tmpDir }) => {
    const r = await cli(['run', '--base-url', simEngine.url, '--model', 'm', '--out', join(tmpDir, 'never.json'), ...flags])
    expect(r.stderr).toMatch(message)
    expect(r.code).toBe(2)
  })
})

test(
  '--engine: sizes the launched model cannot hold fail before any request, exit 1 with the record (the engine was launched); the engine is gone',
  {
    timeout: 30_000,
  },
  async ({ cli, tmpDir }) => {
    const pids = join(tmpDir, 'context-pids.txt')
    const config = join(tmpDir, 'short-context.json')
    const env = { FAKE_ENGINE_PIDFILE: pids }
    await writeFile(
      config,
      JSON.stringify({ kind: 'vllm', executable: join(FAKES, 'vllm'), model: { id: 'fake/m' }, maxContext: 512, env }),
    )
    const out = join(tmpDir, 'short-context-run.json')
    const r = await cli(['run', '--engine', config, '--max-tokens', '600', '--out', out])
    expect(r.stderr).toMatch(
      /^servegate: the cell failed: CONFIG_INVALID: maxTokens \(--max-tokens\): 600 does not fit the model's context of 512 tokens \(max_model_len in GET \/v1\/models\); pass fewer than 512\n$/,
    )
    expect(r.code).toBe(1)
    const record = RunRecord.parse(JSON.parse(await readFile(out, 'utf8')))
    expect(record.cellFailure?.code).toBe('CONFIG_INVALID')
    expect(record.requests).toEqual([])
    expect(record.teardown?.portClosed).toBe(true)
    const tree = await treePids(pids)
    expect(tree.length).toBeGreaterThan(0)
    await expect.poll(() => tree.filter(alive), { timeout: 5000 }).toEqual([])
  },
)

describe('exit codes of a cell that ran', () => {
  test('every request refused (all 401): exit 3, the record is written, the first failure is named', async ({ cli, tmpDir }) => {
    const server: Server = createServer((req, res) => {
      req.resume()
      res.writeHead(401, { 'content-type': 'application/json' }).end('{"error":{"message":"invalid api key"}}')
    })
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
    try {
      const out = join(tmpDir, 'all-401.json')
      const r = await cli(['run', '--base-url', url, '--model', 'm', '--requests', '4', '--no-calibrate', '--out', out])
      expect(r.stderr).toMatch(
        /^servegate: the cell measured nothing: all 4 requests failed \(4 HTTP_STATUS\); the first: HTTP 401: invalid api key\n$/,
      )
      expect(r.code).toBe(3)
      const record = RunRecord.parse(JSON.parse(await readFile(out, 'utf8')))
      expect(record.failures).toEqual({ HTTP_STATUS: 4 })
    } finally {
      server.closeAllConnections()
      await new Promise((r) => server.close(r))
    }
  })

  test(
    'Ctrl-C during engine start-up: exit 130, the record says interrupted, not ENGINE_EXITED',
    { timeout: 30_000 },
    async ({ tmpDir }) => {
      const pids = join(tmpDir, 'startup-pids.txt')
      const config = join(tmpDir, 'never-ready.json')
      const env = { FAKE_ENGINE_PIDFILE: pids, FAKE_ENGINE_NEVER_READY: '1' }
      await writeFile(
        config,
        JSON.stringify({ kind: 'vllm', executable: join(FAKES, 'vllm'), model: { id: 'fake/m' }, env, logDir: join(tmpDir, 'logs') }),
      )
      const out = join(tmpDir, 'startup-ctrlc.json')
      const child = execa(process.execPath, [BIN, 'run', '--engine', config, '--out', out], { reject: false })
      await expect.poll(() => lines(pids), { timeout: 20_000 }).toBe(3)
      await new Promise((r) => setTimeout(r, 500))
      child.kill('SIGINT')
      const result = await child
      expect(result.stderr).toMatch(
        /servegate: interrupted by SIGINT before the cell ran \(REQUEST_ABORTED: start-up of engine vllm was interrupted\)/,
      )
      expect(result.exitCode).toBe(130)
      const record = RunRecord.parse(JSON.parse(await readFile(out, 'utf8')))
      expect(record.cellFailure?.code).toBe('REQUEST_ABORTED')
    },
  )

  test(
    'SIGHUP mid-cell (a dropped SSH session): the partial record is written, exit 129',
    { timeout: 30_000 },
    async ({ simEngine, tmpDir }) => {
      const out = join(tmpDir, 'sighup.json')
      const argv = [
        'run',
        '--base-url',
        simEngine.url,
        '--model',
        'm',
        '--requests',
        '8',
        '--max-tokens',
        '60',
        '--prompt-tokens',
        '32',
        '--out',
        out,
      ]
      const child = execa(process.execPath, [BIN, ...argv], { reject: false })
      // Mid-cell: once the first request is on disk (a fixed wait can land before start-up on a busy machine).
      await expect.poll(() => lines(`${out}.requests.jsonl`), { timeout: 20_000, interval: 100 }).toBeGreaterThan(0)
      child.kill('SIGHUP')
      const result = await child
      expect(result.stderr).toMatch(/servegate: interrupted by SIGHUP; the requests measured so far are in the record/)
      expect(result.exitCode).toBe(129)
      const record = RunRecord.parse(JSON.parse(await readFile(out, 'utf8')))
      expect(record.requests.length + record.unsent).toBe(8)
      expect(record.failures.REQUEST_ABORTED).toBeGreaterThan(0)
    },
  )
})
