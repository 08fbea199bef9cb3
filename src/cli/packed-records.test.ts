/**
 * Records whose gaps are packed (`itlPacked`) are read by every command as records that keep
 * `itlMs` arrays (older servegate versions) are: summarize, compare and import give the same
 * figures for either.
 */
import { readFile, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { describe, expect } from 'vitest'
import { test } from '../../fixtures/test-context.ts'
import { parseRunRecord, parseRunText } from '../record/record-io.ts'
import type { RunRecord } from '../schema/run.ts'

const VLLM_DETAILED = fileURLToPath(new URL('../../fixtures/import/vllm-save-detailed.json', import.meta.url))

test.override('simOptions', { model: 'm', decodeTokPerS: 800, prefillTokPerS: 50_000, seed: 5 })

/** The record as servegate 0.1.0 wrote it: indented JSON, the gaps as `itlMs` arrays, no `itlPacked`. */
function olderLayout(record: RunRecord): string {
  const requests = record.requests.map(({ itlPacked: _packed, ...r }) => r)
  return `${JSON.stringify({ ...record, requests }, null, 2)}\n`
}

describe('packed records through the CLI', () => {
  test('run writes packed gaps; summarize and compare read them as they read an older record with itlMs arrays', async ({
    cli,
    simEngine,
    tmpDir,
  }) => {
    const packed = join(tmpDir, 'packed.json')
    const argv = ['--model', 'm', '--concurrency', '2', '--requests', '8', '--max-tokens', '24', '--prompt-tokens', '32', '--no-calibrate']
    const r = await cli(['run', '--base-url', simEngine.url, ...argv, '--out', packed])
    expect(r.stderr).toBe('')
    expect(r.code).toBe(0)
    const text = await readFile(packed, 'utf8')
    expect(text).not.toMatch(/"itlMs":\s*\[/)
    expect(text.match(/"itlPacked":\{"unit":"us","codec":"delta-zigzag-leb128","count":\d+,"base64":"[^"]*"\}/g)).toHaveLength(8)
    const record = parseRunRecord(JSON.parse(text), packed)
    expect(record.metrics.distributions.itlMs.samples).toBeGreaterThanOrEqual(8 * 20)
    expect(record.requests.every((q) => q.itlPacked === null && (q.itlMs?.length ?? 0) > 0)).toBe(true)

    const older = join(tmpDir, 'older.json')
    await writeFile(older, olderLayout(record))
    expect(parseRunRecord(JSON.parse(await readFile(older, 'utf8')), older)).toEqual(record)

    // summarize recomputes every distribution from the requests, the pooled gaps included.
    const [fromPacked, fromOlder] = await Promise.all([cli(['summarize', packed]), cli(['summarize', older])])
    expect([fromPacked.code, fromOlder.code]).toEqual([0, 0])
    const itl = record.metrics.distributions.itlMs
    expect(fromPacked.stdout).toMatch(new RegExp(`^itl ms \\(all gaps\\)\\s+${itl.samples}\\s`, 'm'))
    expect(fromOlder.stdout.replaceAll(older, packed)).toBe(fromPacked.stdout)
    const json = await Promise.all([cli(['summarize', packed, '--json']), cli(['summarize', older, '--json'])])
    expect(json[1].stdout).toBe(json[0].stdout)

    const compared = await cli(['compare', older, packed, '--allow-unmatched'])
    expect(compared.stderr).not.toMatch(/internal error|FILE_INVALID/)
    expect(compared.code).toBe(0)
  })

  test('a record with corrupt packed gaps is a one-line error naming the file, the request and the field', async ({ cli, tmpDir }) => {
    const record = parseRunText(await readFile(VLLM_DETAILED, 'utf8'), VLLM_DETAILED, { from: 'vllm' })
    const good = join(tmpDir, 'imported.json')
    expect((await cli(['import', VLLM_DETAILED, '--from', 'vllm', '--out', good])).code).toBe(0)
    const text = await readFile(good, 'utf8')
    // The import round-trips: its file reads back as the record imported in memory.
    expect(parseRunRecord(JSON.parse(text), good)).toEqual(record)
    expect(text).toMatch(/"itlPacked":\{"unit":"us"/)
    const bad = join(tmpDir, 'corrupt.json')
    await writeFile(bad, text.replace(/("index":1,.*"base64":")([^"]+)"/, '$1$2*"'))
    const s = await cli(['summarize', bad])
    expect(s.code).toBe(1)
    expect(s.stderr).toMatch(
      /^servegate: .*corrupt\.json: not a valid servegate\.run\/v1 record: ✖ request 1: itlPacked\.base64 is not standard padded base64 .*→ at requests\[1\]\.itlPacked\.base64\n$/,
    )
  })
})
