import { readFile } from 'node:fs/promises'
import { join } from 'node:path'
import { describe, expect } from 'vitest'
import { RunRecord } from '../schema/run.ts'
import { startSimServer } from '../sim/server.ts'
import { test } from '../../fixtures/test-context.ts'

// A server whose usage lies on three replies in each way an adversarial pass found: −5, 10¹², 50×.
test.override('simOptions', {
  model: 'm',
  decodeTokPerS: 2_000,
  prefillTokPerS: 100_000,
  faults: [
    { kind: 'usage-negative', requests: [1] },
    { kind: 'usage-huge', requests: [3] },
    { kind: 'usage-inflated', requests: [5] },
  ],
})

describe('servegate run against a server whose usage lies', () => {
  test('the lies are counted failed by code, the figures stay sane, and summarize and compare read the record', async ({
    cli,
    simEngine,
    tmpDir,
  }) => {
    const out = join(tmpDir, 'lies.json')
    const r = await cli([
      'run',
      '--base-url',
      simEngine.url,
      '--model',
      'm',
      '--requests',
      '8',
      '--max-tokens',
      '8',
      '--prompt-tokens',
      '32',
      '--out',
      out,
    ])
    expect(r.stderr).toBe('')
    expect(r.stdout).toContain('failed requests (excluded from every distribution): USAGE_INVALID ×3')
    // Output throughput from the five honest replies, never from 10¹² tokens.
    const rates = [...r.stdout.matchAll(/output ([\d.]+) tok\/s/g)].map((m) => Number(m[1]))
    expect(rates.length).toBeGreaterThan(0)
    for (const rate of rates) expect(rate).toBeLessThan(100_000)
    const record = RunRecord.parse(JSON.parse(await readFile(out, 'utf8')))
    expect(record.failures).toEqual({ USAGE_INVALID: 3 })
    expect(record.requests.flatMap((q) => (q.reportedUsage === null ? [] : [q.reportedUsage.completionTokens])).sort()).toEqual([
      -5, 1e12, 400,
    ])

    const summarized = await cli(['summarize', out])
    expect(summarized.stderr).toBe('')
    expect(summarized.code).toBe(0)
    const compared = await cli(['compare', out, out])
    expect(compared.stderr).not.toMatch(/expected number/)
    expect([0, 1]).toContain(compared.code)
  })

  test('--max-tokens-per-chunk and --no-retokenize set the check the record states; a bad bound stops before any request', async ({
    cli,
    tmpDir,
  }) => {
    // A server of its own: the faults fall on its first arrivals.
    const sim = await startSimServer({
      model: 'm',
      decodeTokPerS: 2_000,
      faults: [
        { kind: 'usage-huge', requests: [1] },
        { kind: 'usage-inflated', requests: [2] },
      ],
    })
    try {
      const out = join(tmpDir, 'bound.json')
      const argv = ['run', '--base-url', sim.url, '--model', 'm', '--requests', '4', '--max-tokens', '8', '--prompt-tokens', '32']
      const r = await cli([...argv, '--max-tokens-per-chunk', '64', '--no-retokenize', '--out', out])
      expect(r.stderr).toBe('')
      const record = RunRecord.parse(JSON.parse(await readFile(out, 'utf8')))
      expect(record.plan.usageCheck).toMatchObject({ maxTokensPerChunk: 64, retokenize: false, tokenizer: null })
      // 400 tokens in 8 chunks is within 64 a chunk: only the 10¹² lie is caught.
      expect(record.failures).toEqual({ USAGE_INVALID: 1 })
      const before = sim.stats().requests
      const bad = await cli([...argv, '--max-tokens-per-chunk', '0', '--out', join(tmpDir, 'never.json')])
      expect(bad.code).toBe(2)
      expect(bad.stderr).toMatch(/--max-tokens-per-chunk/)
      expect(sim.stats().requests).toBe(before)
    } finally {
      await sim.close()
    }
  })
})
