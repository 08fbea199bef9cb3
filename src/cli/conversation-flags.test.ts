import { readFile, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { describe, expect } from 'vitest'
import { RunRecord } from '../schema/run.ts'
import { test } from '../../fixtures/test-context.ts'

test.override('simOptions', { model: 'm', decodeTokPerS: 5_000, prefillTokPerS: 200_000 })

describe('servegate run --workload conversation', () => {
  test('sends sessions × turns requests with their history, and the record keeps the shape', async ({ cli, simEngine, tmpDir }) => {
    const out = join(tmpDir, 'chat.json')
    const argv = ['run', '--base-url', simEngine.url, '--model', 'm', '--workload', 'conversation', '--sessions', '3', '--turns', '2']
    const r = await cli([...argv, '--user-tokens', '24', '--system-tokens', '40', '--max-tokens', '4', '--concurrency', '2', '--out', out])
    expect(r.stderr).toBe('')
    expect(r.code).toBe(0)
    const record = RunRecord.parse(JSON.parse(await readFile(out, 'utf8')))
    expect(record.completed).toBe(6)
    expect(record.plan.workload.conversation).toMatchObject({
      sessions: 3,
      turns: 2,
      userTokens: 24,
      systemTokens: 40,
      history: 'replayed',
    })
    expect(record.metrics.byTurn?.map((t) => t.completed)).toEqual([3, 3])
  })

  test('a --requests that disagrees, or a conversation flag without the kind, stops before any request with exit 2', async ({
    cli,
    simEngine,
    tmpDir,
  }) => {
    const before = simEngine.stats().requests
    const base = ['run', '--base-url', simEngine.url, '--model', 'm', '--out', join(tmpDir, 'never.json')]
    const wrong = await cli([
      ...base,
      '--workload',
      'conversation',
      '--sessions',
      '3',
      '--turns',
      '2',
      '--user-tokens',
      '24',
      '--requests',
      '5',
    ])
    expect(wrong.code).toBe(2)
    expect(wrong.stderr).toMatch(/requests: a conversation sends sessions × turns = 6 requests, not 5/)
    const stray = await cli([...base, '--turns', '2'])
    expect(stray.code).toBe(2)
    expect(stray.stderr).toMatch(/workload\.turns: only a conversation takes turns/)
    expect(simEngine.stats().requests).toBe(before)
  })

  test('--conversations FILE sends the file’s turns; a bad file exits 2 naming its line before any request', async ({
    cli,
    simEngine,
    testDir,
  }) => {
    const file = join(import.meta.dirname, '../../fixtures/conversations/sharegpt.json')
    const out = join(testDir, 'file.json')
    const base = ['run', '--base-url', simEngine.url, '--model', 'm', '--workload', 'conversation', '--sessions', '2', '--turns', '3']
    const r = await cli([...base, '--conversations', file, '--max-tokens', '4', '--out', out])
    expect(r.stderr).toBe('')
    const record = RunRecord.parse(JSON.parse(await readFile(out, 'utf8')))
    expect(record.completed).toBe(6)
    expect(record.plan.workload.dataset).toMatchObject({ path: file, rows: 2 })
    const bad = join(testDir, 'bad.jsonl')
    await writeFile(bad, '{"messages":[{"role":"user","content":"hi"}]}\n{"conversations":[{"from":"robot","value":"x"}]}\n')
    const before = simEngine.stats().requests
    const refused = await cli([...base, '--conversations', bad, '--out', join(testDir, 'never.json')])
    expect(refused.code).toBe(2)
    expect(refused.stderr).toMatch(/bad\.jsonl:2: `conversations\[0\]\.from` is "robot"/)
    expect(simEngine.stats().requests).toBe(before)
  })
})
