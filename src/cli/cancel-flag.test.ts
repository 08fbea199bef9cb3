import { readFile } from 'node:fs/promises'
import { join } from 'node:path'
import { describe, expect } from 'vitest'
import { RunRecord } from '../schema/run.ts'
import { test } from '../../fixtures/test-context.ts'
import { cancelFlag } from './cell-flags.ts'

test.override('simOptions', { model: 'm', decodeTokPerS: 100, prefillTokPerS: 200_000 })

describe('--cancel SHARE@MS', () => {
  test('parses a share and a delay; anything else names the form', () => {
    expect(cancelFlag('0.25@300')).toEqual({ share: 0.25, afterMs: 300 })
    expect(cancelFlag('1@0')).toEqual({ share: 1, afterMs: 0 })
    expect(cancelFlag(undefined)).toBeUndefined()
    for (const bad of ['0@300', '1.5@300', '0.2', '0.2@', '@300', '0.2@-1', '0.2@300@1', 'a@b'])
      expect(() => cancelFlag(bad)).toThrow(/--cancel: ".*" is not valid; pass SHARE@MS with 0 < SHARE ≤ 1 and MS ≥ 0/)
  })

  test('servegate run records the cancelled requests and the engine going back to idle', async ({ cli, simEngine, tmpDir }) => {
    const out = join(tmpDir, 'cancel.json')
    const argv = ['run', '--base-url', simEngine.url, '--model', 'm', '--requests', '8', '--concurrency', '4', '--max-tokens', '40']
    const r = await cli([...argv, '--seed', '3', '--cancel', '0.5@100', '--out', out])
    expect(r.code).toBe(0)
    const record = RunRecord.parse(JSON.parse(await readFile(out, 'utf8')))
    expect(record.plan.cancel).toMatchObject({ share: 0.5, afterMs: 100, seed: 3 })
    expect(record.cancelled).toBe(record.plan.cancel?.indices.length)
    expect(record.failed).toBe(0)
    expect(record.drain?.passed).toBe(true)
    expect(r.stdout).toMatch(new RegExp(`, ${record.cancelled} cancelled`))
    expect(r.stdout).toMatch(/cancel 50\.0% after 100 ms: \d+ chosen, \d+ aborted while streaming .* engine back to idle in/)
  })

  test('a bad value stops before any request with exit 2', async ({ cli, simEngine, tmpDir }) => {
    const before = simEngine.stats().requests
    const r = await cli(['run', '--base-url', simEngine.url, '--model', 'm', '--cancel', '2@100', '--out', join(tmpDir, 'never.json')])
    expect(r.code).toBe(2)
    expect(r.stderr).toMatch(/--cancel: "2@100" is not valid/)
    expect(simEngine.stats().requests).toBe(before)
  })
})
