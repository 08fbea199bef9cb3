import { readdir, readFile, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { execa } from 'execa'
import { afterAll, beforeAll, describe, expect } from 'vitest'
import { test } from '../../fixtures/test-context.ts'
import { serializeRecord } from '../evidence/build.ts'
import { RunRecord } from '../schema/run.ts'

// A key whose URL-encoded and base64 forms differ from it; the engine secrets: one secret by its
// name, one listed in secretEnv and shorter than a name-matched secret may be.
const KEY = 'Zq9+pL/x=T&w7~u!sec'
const ENGINE_TOKEN = 'eng-TOKEN-1234567'
const LICENSE = 'lic#42'
const ENGINE = fileURLToPath(new URL('../../fixtures/fakes/key-quoting-engine.ts', import.meta.url))
const DATASET = fileURLToPath(new URL('../../fixtures/datasets/arithmetic.jsonl', import.meta.url))

function forms(secret: string): Record<string, string> {
  return { raw: secret, 'URL-encoded': encodeURIComponent(secret), base64: Buffer.from(secret).toString('base64') }
}

/** Every form of every secret found in a text, as `form of secret in where`. */
function leaks(where: string, text: string, secrets: readonly string[]): string[] {
  return secrets.flatMap((s) => Object.entries(forms(s)).flatMap(([form, v]) => (text.includes(v) ? [`${form} of ${s} in ${where}`] : [])))
}

async function filesUnder(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { recursive: true, withFileTypes: true })
  return entries.filter((e) => e.isFile()).map((e) => join(e.parentPath, e.name))
}

const CELL = ['--api-key-env', 'SG_LEAK_TEST_KEY', '--requests', '6', '--max-tokens', '8', '--no-calibrate', '--dataset', DATASET]

beforeAll(() => {
  process.env.SG_LEAK_TEST_KEY = KEY
})
afterAll(() => {
  delete process.env.SG_LEAK_TEST_KEY
})

describe('a server that quotes the key bare (401 body, SSE error event, malformed line, echoed reply, header)', () => {
  test('servegate run --base-url: no form of the key in the record, stdout or stderr', async ({ cli, tmpDir }) => {
    const server = execa(process.execPath, [ENGINE, '0'], { reject: false, buffer: false })
    try {
      const port = await new Promise<string>((resolve) => {
        let seen = ''
        server.stdout?.on('data', (b: Buffer) => {
          seen += b.toString()
          const m = /listening on (\d+)/.exec(seen)
          if (m) resolve(m[1] as string)
        })
      })
      const out = join(tmpDir, 'base-url', 'run.json')
      const base = ['run', '--base-url', `http://127.0.0.1:${port}`, '--model', 'm', ...CELL]
      const text = await cli([...base, '--out', out])
      const json = await cli([...base, '--json', '--out', join(tmpDir, 'base-url', 'run-json.json')])
      const record = RunRecord.parse(JSON.parse(await readFile(out, 'utf8')))
      // The server did quote the key in every place: each became a failure or a kept reply.
      expect(record.requests.map((r) => (r.status === 'failed' ? r.error.code : r.status))).toEqual([
        'HTTP_STATUS',
        'STREAM_ERROR_EVENT',
        'STREAM_PROTOCOL',
        'ok',
        'ok',
        'ok',
      ])
      expect(record.requests[3]?.outputText).toMatch(/44 echo \[redacted\]/)
      const found = [
        ...leaks('stdout', text.stdout + json.stdout, [KEY]),
        ...leaks('stderr', text.stderr + json.stderr, [KEY]),
        ...(await Promise.all((await filesUnder(tmpDir)).map(async (f) => leaks(f, await readFile(f, 'utf8'), [KEY])))).flat(),
        // The evidence serializes a record again: a key in it, however it got there, is scrubbed.
        ...leaks(
          'evidence',
          serializeRecord({ ...record, cellFailure: { code: 'INTERNAL', message: KEY, httpStatus: null, retryAfterS: null } }, false),
          [KEY],
        ),
      ]
      expect(found).toEqual([])
    } finally {
      server.kill()
      await server
    }
  })

  test('servegate run --engine: no form of the key or of the secret env in the record, the engine log, stdout or stderr', async ({
    cli,
    tmpDir,
  }) => {
    // The config holds the secrets as given; it is the one file here servegate did not write.
    const config = join(tmpDir, 'engine.json')
    const logDir = join(tmpDir, 'engine', 'logs')
    await writeFile(
      config,
      JSON.stringify({
        kind: 'command',
        argv: [process.execPath, ENGINE, '{port}', 'SG_ENGINE_TOKEN', 'LICENSE_BLOB'],
        model: { id: 'm' },
        env: { SG_ENGINE_TOKEN: ENGINE_TOKEN, LICENSE_BLOB: LICENSE },
        secretEnv: ['LICENSE_BLOB'],
        logDir,
      }),
    )
    const out = join(tmpDir, 'engine', 'run.json')
    const r = await cli(['run', '--engine', config, ...CELL, '--out', out])
    const record = RunRecord.parse(JSON.parse(await readFile(out, 'utf8')))
    expect(record.completed).toBe(3)
    const files = await filesUnder(join(tmpDir, 'engine'))
    const logs = files.filter((f) => f.endsWith('.log'))
    expect(logs).toHaveLength(1)
    // The log still says what the engine printed, with the secrets scrubbed out.
    expect(await readFile(logs[0] as string, 'utf8')).toMatch(/authorization: Bearer \[redacted\]/)
    const secrets = [KEY, ENGINE_TOKEN, LICENSE]
    const found = [
      ...leaks('stdout', r.stdout, secrets),
      ...leaks('stderr', r.stderr, secrets),
      ...(await Promise.all(files.map(async (f) => leaks(f, await readFile(f, 'utf8'), secrets)))).flat(),
    ]
    expect(found).toEqual([])
  })
})
