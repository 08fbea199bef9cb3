import { afterAll, expect, test } from 'vitest'
import { testManifest } from '../../fixtures/manifest.ts'
import { runCell } from '../runner/measure-cell.ts'
import type { RunRecord } from '../schema/run.ts'
import type { DeclaredCell } from '../schema/task-meta.ts'
import { type SimServer, startSimServer } from '../sim/server.ts'
import { boardFiles, renderBoard } from './board.ts'
import { buildEvidence } from './build.ts'
import { renderHtml } from './html.ts'

const servers: SimServer[] = []
afterAll(async () => {
  await Promise.all(servers.map((s) => s.close()))
})

async function conversationArm(model: string): Promise<RunRecord> {
  const sim = await startSimServer({ model, decodeTokPerS: 5_000, prefillTokPerS: 200_000 })
  servers.push(sim)
  const workload = { kind: 'conversation', sessions: 3, turns: 3, userTokens: 32, seed: 3 } as const
  const record = await runCell({ baseUrl: sim.url, model, concurrency: 3, maxTokens: 4, workload })
  return { ...record, manifest: testManifest() }
}

test('the board draws each arm’s TTFT p50 by turn for a conversation', async () => {
  const [b, c] = [await conversationArm('base'), await conversationArm('cand')]
  const cell: DeclaredCell = {
    id: 'chat-3x3',
    kind: 'pair',
    required: true,
    ladder: null,
    engines: { baseline: 'sim-a', candidate: 'sim-b' },
    status: 'measured',
    error: null,
    records: { baseline: [b], candidate: [c] },
  }
  const { index } = buildEvidence([{ file: 'a.bench.ts', meta: { cells: [cell] } }], [], { suiteCommit: null, redact: false })
  const md = renderBoard(index, boardFiles(index))
  const lines = md.split('\n')
  const at = lines.indexOf('## TTFT by turn (conversations; ms, p50 over the ok requests of each turn)')
  expect(at).toBeGreaterThan(0)
  const rows = lines.slice(at + 1).filter((l) => l.startsWith('|'))
  expect(rows[0]).toBe('| arm | turn 1 | turn 2 | turn 3 |')
  const p50 = (r: RunRecord, turn: number) => r.metrics.byTurn?.[turn - 1]?.ttftMs.p50 as number
  expect(rows.slice(2, 4).map((r) => r.split(' | ')[0])).toEqual(['| chat-3x3 · baseline', '| chat-3x3 · candidate'])
  for (const [row, r] of [
    [rows[2], b],
    [rows[3], c],
  ] as const) {
    const cells = (row as string)
      .split('|')
      .slice(2, -1)
      .map((s) => Number(s.trim()))
    cells.forEach((v, k) => expect(v).toBeCloseTo(p50(r, k + 1), -Math.floor(Math.log10(p50(r, k + 1))) + 2))
  }
  // The page's cell drill-down holds the same figures, a row per arm and turn.
  const html = renderHtml(index, md, [])
  const turns = /<table id="turns-chat-3x3"[\s\S]*?<\/table>/.exec(html)?.[0] ?? ''
  expect(turns.match(/<tr/g)).toHaveLength(1 + 6)
  expect(html).toContain('<h3>TTFT by turn (a prefix cache pays from turn 2)</h3>')
})
