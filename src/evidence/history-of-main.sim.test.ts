/**
 * Done means (issue 36): ten runs of the demo's pair against the simulated engine, recorded as
 * main, make a history; the page and the board show the trend, a run on another branch shows its
 * point against it, and the launch noise learned from the history agrees with the noise injected.
 *
 * The demo's story shape (one request at a time, 1024-token prompts, 24 tokens out) is launched
 * once per arm against the sim, for real records. Each of the ten runs is then that launch at a
 * speed the sim's own launch draw gives (`launchSpeed`, 4% launch noise, a seed per run), with
 * each request's speed the sim's nominal one × 2% request noise of its own: this shared two-core
 * machine's timer jitter (a 150 tok/s sim read as 99–139 tok/s under load) would otherwise swamp
 * a 4% launch effect, and a fixed seed must give a fixed answer.
 */
import { mkdtemp, readFile, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { decisionMeta } from '../../fixtures/judged-meta.ts'
import { historySpread, MIN_HISTORY_RUNS } from '../gates/noise-floor.ts'
import { createRandom, normalVariate } from '../random.ts'
import { historyCellKey, readHistory } from '../record/history-store.ts'
import { runCell } from '../runner/measure-cell.ts'
import type { EvidenceIndex } from '../schema/evidence.ts'
import type { Testbed } from '../schema/noise.ts'
import type { RunRecord } from '../schema/run.ts'
import type { DeclaredCell } from '../schema/task-meta.ts'
import { launchSpeed } from '../sim/launch-speed.ts'
import { startSimServer } from '../sim/server.ts'
import { boardFiles, renderBoard } from './board.ts'
import { buildEvidence, type SpecFileInput } from './build.ts'
import { renderCharts } from './charts.ts'
import { recordHistory } from './history-of-main.ts'
import { renderHtml } from './html.ts'

const INJECTED = 0.04
const REQUEST_NOISE = 0.02
const RUNS = 10
const CELL = 'demo-decode-kernel'
const PLAN = { concurrency: 1, requests: 24, warmupRequests: 4, maxTokens: 24, workload: { promptTokens: 1024, seed: 7 } }
/** The demo's engines: v1 decodes at 300 tok/s, v2's new kernel at 600; both prefill at 20 000. */
const DECODE = { baseline: 300, candidate: 600 }
const PREFILL_TOK_PER_S = 20_000

/** One real launch of the demo's plan against a sim serving at `decodeTokPerS`. */
async function launch(decodeTokPerS: number): Promise<RunRecord> {
  const sim = await startSimServer({ model: 'demo-model', decodeTokPerS, prefillTokPerS: PREFILL_TOK_PER_S })
  try {
    return await runCell({ baseUrl: sim.url, model: 'demo-model', ...PLAN, usageCheck: { retokenize: false } })
  } finally {
    await sim.close()
  }
}

/** `record` as the sim at `decodeTokPerS` would serve it at the launch speed drawn from `seed`, each request with noise of its own. */
function atLaunch(record: RunRecord, decodeTokPerS: number, seed: number, run: number): RunRecord {
  const speed = launchSpeed({ launchNoise: INJECTED, launchSeed: seed })
  const random = createRandom(seed)
  const requests = record.requests.map((r) => {
    if (r.status !== 'ok') return r
    const decode = decodeTokPerS * speed * Math.exp(REQUEST_NOISE * normalVariate(random))
    const prefillMs = ((r.promptTokens ?? PLAN.workload.promptTokens) / (PREFILL_TOK_PER_S * speed)) * 1000
    const firstMs = prefillMs * Math.exp(REQUEST_NOISE * normalVariate(random))
    return { ...r, decodeTokPerS: decode, tpotMs: 1000 / decode, ttftMs: firstMs, timeToFirstOutputMs: firstMs }
  })
  return { ...record, runId: `${record.runId}-run${run}`, requests }
}

/** One run of the demo's pair, its spec file and its gated tests, as the reporter collects them. */
function demoRun(shells: { baseline: RunRecord; candidate: RunRecord }, run: number): { files: SpecFileInput[]; index: EvidenceIndex } {
  const baseline = atLaunch(shells.baseline, DECODE.baseline, 1000 + 2 * run, run)
  const candidate = atLaunch(shells.candidate, DECODE.candidate, 1001 + 2 * run, run)
  const cell: DeclaredCell = {
    id: CELL,
    kind: 'pair',
    required: true,
    ladder: null,
    engines: { baseline: 'sim-v1', candidate: 'sim-v2-decode-kernel' },
    status: 'measured',
    error: null,
    records: { baseline: [baseline], candidate: [candidate] },
  }
  const pair = { baseline: [baseline], candidate: [candidate] }
  const decisions = [
    decisionMeta(CELL, pair, { gate: 'toWinDecode', margin: 0.1 }),
    decisionMeta(CELL, pair, { gate: 'toHoldLatency', metric: 'timeToFirstOutput', percentile: 50, notWorseThanPct: 10 }),
  ]
  const file = 'benchmarks/demo/story.bench.ts'
  const files = [{ file, meta: { cells: [cell] } }]
  const tests = [{ file, name: 'v2 against v1', state: 'passed' as const, meta: { decisions, checks: [] } }]
  return { files, index: buildEvidence(files, tests, { suiteCommit: null, redact: false }).index }
}

let dir = ''
let path = ''
let main: EvidenceIndex[] = []
let candidate: { files: SpecFileInput[]; index: EvidenceIndex } | null = null

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'servegate-history-'))
  path = join(dir, 'history', 'main.jsonl')
  const noise = { history: path, historyBranch: 'main', runner: 'sim-ci' }
  const [baseline, candidateShell] = await Promise.all([launch(DECODE.baseline), launch(DECODE.candidate)])
  const shells = { baseline, candidate: candidateShell }
  main = []
  for (let run = 0; run < RUNS; run++) {
    const { files, index } = demoRun(shells, run)
    const history = await recordHistory({ noise, files, index, branch: 'main', commit: `c${run}` })
    main.push({ ...index, history })
  }
  candidate = demoRun(shells, RUNS)
}, 60_000)

afterAll(async () => {
  await rm(dir, { recursive: true, force: true })
})

describe('ten runs of the demo against the sim, recorded as main', () => {
  test('make a history of ten lines, one per run, each with both arms’ gated figures', async () => {
    expect(main.every((index) => index.history?.appended === true && index.history.reason === null)).toBe(true)
    const runs = await readHistory(path)
    expect(runs.map((r) => r.commit)).toEqual(Array.from({ length: RUNS }, (_, i) => `c${i}`))
    expect(runs[0]?.cells.map((c) => c.cell)).toEqual([historyCellKey(CELL, 'baseline'), historyCellKey(CELL, 'candidate')])
    expect(Object.keys(runs[0]?.cells[1]?.metrics ?? {}).sort()).toEqual(['decodeTokPerS', 'timeToFirstOutputMs p50'])
    expect(runs[0]?.cells[1]?.testbed.runner).toBe('sim-ci')
  })

  test('the launch noise learned from them agrees with the 4% the sim injected', async () => {
    const runs = await readHistory(path)
    expect(runs.length).toBeGreaterThanOrEqual(MIN_HISTORY_RUNS)
    const testbed = runs[0]?.cells[1]?.testbed as Testbed
    const spread = historySpread(runs, historyCellKey(CELL, 'candidate'), 'decodeTokPerS', testbed)
    expect(spread).not.toHaveProperty('reason')
    if ('reason' in spread) return
    expect(spread.runs).toBe(RUNS)
    expect(spread.sd).toBeGreaterThan(0.01)
    expect(spread.sd).toBeLessThanOrEqual(spread.upper)
    expect(spread.upper).toBeGreaterThanOrEqual(INJECTED)
  })

  test('a run on another branch is not appended, and shows its point against main’s trend on the board and the page', async () => {
    const run = candidate as { files: SpecFileInput[]; index: EvidenceIndex }
    const noise = { history: path, historyBranch: 'main', runner: 'sim-ci' }
    const history = await recordHistory({ noise, ...run, branch: 'faster-decode', commit: 'pr' })
    expect(history).toMatchObject({ appended: false, reason: 'a run on faster-decode, not main', branch: 'faster-decode' })
    expect((await readHistory(path)).length).toBe(RUNS)
    const decode = history.trend.find((t) => t.cell === historyCellKey(CELL, 'candidate') && t.metric === 'decodeTokPerS')
    expect(decode?.main.map((p) => p.commit)).toEqual(Array.from({ length: RUNS }, (_, i) => `c${i}`))
    expect(decode?.current?.commit).toBe('pr')
    const point = decode?.main[0]
    expect(point?.low).toBeLessThan(point?.value as number)
    expect(point?.high).toBeGreaterThan(point?.value as number)

    const index = { ...run.index, history }
    const board = renderBoard(index, boardFiles(index))
    expect(board).toContain('## Trend of main')
    expect(board).toContain('not appended to the history of main')
    expect(board).toMatch(/\| demo-decode-kernel\/candidate \| decodeTokPerS \| sim-ci · .* \| 10 \| [▁-█]{10} ▸ [▁-█] \|/)

    const charts = await renderCharts(index)
    const trend = charts.find((c) => c.file === 'charts/trend-of-main.svg')
    expect(trend?.svg).toContain('demo-decode-kernel/candidate · decodeTokPerS')
    const html = renderHtml(index, board, charts)
    expect(html).toContain('<section id="trend">')
    expect(html).toContain('<table id="trend-table">')
    expect(html).toContain('id="chart-trend-of-main"')
  })
})

test('the file is plain JSONL: one run a line', async () => {
  const text = await readFile(path, 'utf8')
  expect(text.trimEnd().split('\n')).toHaveLength(RUNS)
})
