import { afterEach, describe, expect, test } from 'vitest'
import { createEnvironment, type Environment } from '../runner/environment.ts'
import { runEngineCell } from '../runner/runner.ts'
import type { Manifest } from '../schema/manifest.ts'
import type { RunRecord } from '../schema/run.ts'
import type { DeclaredCell } from '../schema/task-meta.ts'
import { type SimServer, startSimServer } from '../sim/server.ts'
import { armSummary } from './arm-summary.ts'
import { boardFiles, renderBoard } from './board.ts'
import { buildEvidence } from './build.ts'
import { renderHtml } from './html.ts'

const servers: SimServer[] = []
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.close()))
})

const noGpu = async (): Promise<Manifest['gpus']> => ({ status: 'absent', reason: 'test: no GPU probe' })
const env: Environment = { ...createEnvironment(), gpuFacts: noGpu, telemetry: false }

/** A shared-prefix cell on a sim, its prefix cache of `prefixCacheTokens` (0: off); `groups` false sends unique prompts. */
async function measured(prefixCacheTokens: number, groups = true): Promise<RunRecord> {
  const sim = await startSimServer({ model: 'm', prefixCacheTokens, prefillTokPerS: 1_000_000, decodeTokPerS: 4000 })
  servers.push(sim)
  const workload = groups
    ? { kind: 'shared-prefix' as const, groups: 1, promptsPerGroup: 4, systemTokens: 256, questionTokens: 16, seed: 5 }
    : { promptTokens: 64 }
  return runEngineCell(
    env,
    { kind: 'external', baseUrl: sim.url, model: { id: 'm' } },
    { maxTokens: 2, usageCheck: { retokenize: false }, workload },
  )
}

function evidence(baseline: RunRecord, candidate: RunRecord) {
  const cell: DeclaredCell = {
    id: 'gsp',
    kind: 'pair',
    required: true,
    ladder: null,
    engines: { baseline: 'sim-nocache', candidate: 'sim-cache' },
    status: 'measured',
    error: null,
    records: { baseline: [baseline], candidate: [candidate] },
  }
  return buildEvidence([{ file: 'a.bench.ts', meta: { cells: [cell] } }], [], { suiteCommit: null, redact: false }).index
}

describe('the prefix cache on the board and the page', () => {
  test('each arm’s hit share as its engine reported it, and the reset before the cell', async () => {
    const index = evidence(await measured(0), await measured(1 << 16))
    const md = renderBoard(index, boardFiles(index))
    const at = md.split('\n').findIndex((l) => l.startsWith('## Prefix cache'))
    expect(at).toBeGreaterThan(0)
    const rows = md.split('\n').slice(at + 2, at + 6)
    expect(rows[0]).toBe('| arm | cached share | cached tokens | reset |')
    expect(rows[2]).toBe('| gsp · baseline | not reported | — | reset |')
    expect(rows[3]).toMatch(/^\| gsp · candidate \| \d\d\.\d% \| \d+ \| reset \|$/)

    const html = renderHtml(index, md, [])
    expect(html).toContain('<h3>Prefix cache (the share of prompt tokens the engine reported serving from its cache)</h3>')
    expect(html).toMatch(/<td>baseline<\/td><td class="num" data-sort="">not reported<\/td>.*<td>reset<\/td><td>no ok request reported/)
  })

  test('nothing to show where no engine reported a figure and nothing was reset', async () => {
    const plain = await measured(0, false)
    expect(armSummary(plain, 'cell', 1, { path: 'a', bytes: 1, sha256: 'x' })).not.toHaveProperty('prefixCache')
    const index = evidence(plain, plain)
    expect(renderBoard(index, boardFiles(index))).not.toContain('## Prefix cache')
  })
})
