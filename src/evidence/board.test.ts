import { readFileSync } from 'node:fs'
import { mkdtemp, readFile, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { expectInert, hostileManifest, hostileName } from '../../fixtures/hostile-markdown.ts'
import { checkMeta, decisionMeta } from '../../fixtures/judged-meta.ts'
import { measuredArm, testManifest } from '../../fixtures/manifest.ts'
import { parseRunText } from '../record/record-io.ts'
import { failedCellRecord } from '../runner/run-record.ts'
import type { RunRecord } from '../schema/run.ts'
import type { DeclaredCell } from '../schema/task-meta.ts'
import { boardFiles, glanceLines, renderBoard } from './board.ts'
import { expectedEvidence, UNFAIR_CELL } from '../../fixtures/expected-evidence.ts'
import { sampleEvidence } from '../../fixtures/evidence-fixture.ts'
import { mermaidCharts } from './mermaid.ts'
import { buildEvidence, type SpecFileInput, type TestInput } from './build.ts'
import { readIndex } from './verify.ts'
import { writeEvidence } from './write.ts'

const ARITHMETIC = join(import.meta.dirname, '../../fixtures/datasets/arithmetic.jsonl')

let baseline: RunRecord
let candidate: RunRecord
let quizBaseline: RunRecord
let quizCandidate: RunRecord

beforeAll(async () => {
  baseline = await measuredArm(300)
  candidate = await measuredArm(600)
  // A dataset workload: the simulated engine answers arithmetic, so each arm has an accuracy.
  const quiz = { workload: { kind: 'dataset' as const, datasetPath: ARITHMETIC, seed: 7 }, requests: 27 }
  quizBaseline = await measuredArm(300, quiz)
  quizCandidate = await measuredArm(600, quiz)
}, 60_000)

/** The same records on another GPU driver, or on another device of the same model. */
function onGpu(record: RunRecord, device: { driverVersion?: string; uuid?: string }): RunRecord {
  const m = testManifest()
  if (m.gpus.status !== 'ok') throw new Error('testManifest has GPUs')
  return { ...record, manifest: { ...m, gpus: { status: 'ok', devices: m.gpus.devices.map((d) => ({ ...d, ...device })) } } }
}

function pairCell(id: string, b: RunRecord, c: RunRecord): DeclaredCell {
  return {
    id,
    kind: 'pair',
    required: true,
    ladder: null,
    engines: { baseline: 'vllm-main', candidate: 'vllm-pr' },
    status: 'measured',
    error: null,
    records: { baseline: [b], candidate: [c] },
  }
}

/** A suite of pairs, each with its matched-pair check and a decode gate, as the matchers record them. */
function suite(cells: DeclaredCell[]): { files: SpecFileInput[]; tests: TestInput[] } {
  const tests = cells.flatMap((cell): TestInput[] => {
    const pair = { baseline: cell.records.baseline ?? [], candidate: cell.records.candidate ?? [] }
    if (pair.baseline.some((r) => r.cellFailure !== null) || pair.candidate.some((r) => r.cellFailure !== null)) {
      const check = checkMeta(cell.id, 'toBeMatchedPair', pair)
      return [{ file: 'a.bench.ts', name: `${cell.id} > is matched`, state: 'failed', meta: { decisions: [], checks: [check] } }]
    }
    const check = checkMeta(cell.id, 'toBeMatchedPair', pair)
    const win = decisionMeta(cell.id, pair, { gate: 'toWinDecode', launchNoise: 0 })
    return [
      {
        file: 'a.bench.ts',
        name: `${cell.id} > is matched`,
        state: check.passed ? 'passed' : 'failed',
        meta: { decisions: [], checks: [check] },
      },
      {
        file: 'a.bench.ts',
        name: `${cell.id} > wins decode`,
        state: win.passed ? 'passed' : 'failed',
        meta: { decisions: [win], checks: [] },
      },
    ]
  })
  return { files: [{ file: 'a.bench.ts', meta: { cells } }], tests }
}

function board(cells: DeclaredCell[], extra: TestInput[] = []): string {
  const { files, tests } = suite(cells)
  const { index } = buildEvidence(files, [...tests, ...extra], { suiteCommit: null, redact: false })
  return renderBoard(index, boardFiles(index))
}

/** The board's headings, in order. */
const headings = (md: string) => md.split('\n').filter((l) => /^#{1,6} /.test(l))

/** The lines of the section under `heading`, up to the next heading of the same or a higher level. */
function sectionOf(md: string, heading: string): string {
  const lines = md.split('\n')
  const start = lines.indexOf(heading)
  if (start < 0) throw new Error(`no section ${heading}`)
  const level = /^#+/.exec(heading)?.[0].length ?? 1
  const end = lines.findIndex((l, i) => i > start && new RegExp(`^#{1,${level}} `).test(l))
  return lines.slice(start, end < 0 ? undefined : end).join('\n')
}

describe('the board says what was measured', () => {
  test('the GPUs, driver, host and harness, and per arm the engine, version, commit and model revision', () => {
    const md = board([pairCell('c4', baseline, candidate)])
    const measured = sectionOf(md, '## What was measured')
    const m = testManifest()
    expect(measured).toContain('| GPUs | 1× NVIDIA H100 80GB HBM3, 79.6 GiB | all 2 launches |')
    expect(measured).toContain('| GPU driver | 550.54.15 | all 2 launches |')
    expect(measured).toContain(`| host | ${m.host.os} ${m.host.kernel} ${m.host.arch}, `)
    expect(measured).toContain(`(${m.host.cpus} CPUs)`)
    expect(measured).toContain(`| harness | servegate 0.1.0, hash ${'h'.repeat(12)}… | all 2 launches |`)
    expect(measured).toContain('| baseline | vllm-main | vllm | 0.11.0 | — | m | abc | — | all 1 |')
    expect(measured).toContain('| candidate | vllm-pr | vllm | 0.11.0 | — | m | abc | — | all 1 |')
  })

  test('a fact that differs between launches gets a row per value, naming where each was seen', () => {
    const md = board([pairCell('same', baseline, candidate), pairCell('newer', baseline, onGpu(candidate, { driverVersion: '560.28.03' }))])
    const measured = sectionOf(md, '## What was measured')
    expect(measured).toContain('| GPU driver | 550.54.15 | same · baseline, same · candidate, newer · baseline |')
    expect(measured).toContain('| GPU driver | 560.28.03 | newer · candidate |')
  })

  test('a record without a manifest is named as unknown, not left out', () => {
    const md = board([pairCell('bare', { ...baseline, manifest: null }, candidate)])
    expect(sectionOf(md, '## What was measured')).toContain('No manifest, so hardware and software unknown: bare · baseline.')
  })
})

describe('pair checks per fact', () => {
  test('counts each fact over the pairs compared, names where it failed, and lists pairs that could not be compared', () => {
    const crashed = failedCellRecord(
      { baseUrl: 'http://127.0.0.1:1', model: 'm' },
      { code: 'ENGINE_EXITED', message: 'engine vllm exited during start-up with code 3', httpStatus: null, retryAfterS: null },
    )
    const md = board([
      pairCell('a', baseline, candidate),
      pairCell('drv', baseline, onGpu(candidate, { driverVersion: '560.28.03' })),
      pairCell('dev', baseline, onGpu(candidate, { uuid: 'GPU-2' })),
      pairCell('dead', baseline, crashed),
    ])
    const checks = sectionOf(md, '## Pair checks per fact (3 pair(s) compared of 4)')
    expect(checks).toContain('| GPU driver | 2/3 | drv |')
    expect(checks).toContain('| request stream sha256 | 3/3 | — |')
    expect(checks).toContain('| GPU model and memory | 3/3 | — |')
    // Another device of the same model is a matched pair, and the board still shows it.
    expect(checks).toContain('| GPU UUID (same devices on both arms; not required for a match) | 2/3 | dev |')
    expect(checks).toContain('- Not compared (an arm failed, so no fact can be): dead.')
  })
})

describe('requests and accuracy', () => {
  test('completed and failed per arm and per cell', () => {
    const crashed = failedCellRecord(
      { baseUrl: 'http://127.0.0.1:1', model: 'm' },
      { code: 'ENGINE_EXITED', message: 'engine vllm exited during start-up with code 3', httpStatus: null, retryAfterS: null },
    )
    const md = board([pairCell('a', baseline, candidate), pairCell('dead', baseline, crashed)])
    const requests = sectionOf(md, '## Requests completed and failed')
    expect(requests).toContain('| baseline | 24 | 0 | 2 launch(es) in 2 cell(s) | 0 |')
    expect(requests).toContain('| candidate | 12 | 0 | 2 launch(es) in 2 cell(s) | 1 |')
    expect(requests).toContain('| a · candidate | 12 | 0 |  |')
    expect(requests).toContain('| dead · candidate | 0 | 0 | ENGINE_EXITED: engine vllm exited during start-up with code 3 |')
  })

  test('a summary-only SGLang import records failed null, and the board says "unknown", never 0', () => {
    // A real SGLang bench_serving line written without --output-details: it records no failed count.
    const path = join(import.meta.dirname, '../../fixtures/reference/wild/sglang-10-datacrunch-2024-12-online.jsonl')
    const imported = parseRunText(readFileSync(path, 'utf8'), path, { from: 'sglang', line: 1, model: 'm' })
    expect(imported.importedFrom?.perRequest).toBe(false)
    expect(imported.failed).toBeNull()
    const md = board([pairCell('imported', imported, candidate)])
    const requests = sectionOf(md, '## Requests completed and failed')
    expect(requests).toContain('| baseline | 300 | unknown | 1 launch(es) in 1 cell(s) | 0 |')
    expect(requests).toContain('| imported · baseline | 300 | unknown |  |')
    expect(requests).toContain('| imported · candidate | 12 | 0 |  |')
  })

  test('an import that never recorded its input tokens fails the input-tokens pair check on the board, never passes it', () => {
    // AIPerf's aggregate without total_isl and total_osl: its token totals are unknown, not 0.
    const path = join(import.meta.dirname, '../../fixtures/import/aiperf-run/profile_export_aiperf.json')
    const { total_isl: _i, total_osl: _o, ...agg } = JSON.parse(readFileSync(path, 'utf8')) as Record<string, unknown>
    const imported = parseRunText(JSON.stringify(agg), path, { from: 'aiperf', model: 'm' })
    expect(imported.metrics.totalPromptTokens).toBeNull()
    const cells = [pairCell('imported', imported, candidate)]
    expect(sectionOf(board(cells), '## Pair checks per fact (1 pair(s) compared of 1)')).toContain('| input tokens | 0/1 | imported |')
    // The check the board counts says why: the total is unknown, so nothing could be compared.
    const { files, tests } = suite(cells)
    const [cell] = buildEvidence(files, tests, { suiteCommit: null, redact: false }).index.cells
    expect(cell?.checks[0]?.findings).toContain(
      "input tokens: unknown for baseline (its source recorded no total input tokens), so the arms' input tokens cannot be compared",
    )
  })

  test('accuracy per arm with its Wilson interval, and the accuracy gap in points, never as a ratio', () => {
    const pair = { baseline: [quizBaseline], candidate: [quizCandidate] }
    const gap = decisionMeta('quiz', pair, { gate: 'toStayWithinAccuracyGap' })
    const test: TestInput = {
      file: 'a.bench.ts',
      name: 'quiz > stays within the accuracy gap',
      state: gap.passed ? 'passed' : 'failed',
      meta: { decisions: [gap], checks: [] },
    }
    const md = board([pairCell('quiz', quizBaseline, quizCandidate)], [test])
    const audit = sectionOf(md, '## Quality audit')
    const accuracy = quizBaseline.metrics.accuracy
    expect(accuracy?.samples).toBe(27)
    const pct = (x: number | null | undefined) => `${((x ?? Number.NaN) * 100).toFixed(1)}%`
    expect(audit).toContain(
      `| quiz · baseline | ${pct(accuracy?.rate)} [${pct(accuracy?.wilson95Low)}, ${pct(accuracy?.wilson95High)}] | ${accuracy?.correct}/27 |`,
    )
    const row = audit.split('\n').find((l) => l.startsWith('| quiz | ')) ?? ''
    expect(row).toMatch(/^\| quiz \| -?\d+\.\d pt \[-?\d+\.\d pt, -?\d+\.\d pt\] (pass|fail|inconclusive) \| /)
    expect(row).not.toContain('×')
    // Nowhere on the board does a points figure carry a ratio sign.
    expect(md).not.toMatch(/\d× \[[^\]]*pt/)
  })

  test('ratios carry ×, times ms, rates tok/s', () => {
    const md = board([pairCell('c4', baseline, candidate)])
    const decode = sectionOf(md, '### Decode tok/s (p50 per request)')
    expect(decode).toMatch(/\| c4 \| [\d.]+ \| [\d.]+ \| \d\.\d{3}× \[\d\.\d{3}×, \d\.\d{3}×\] pass \|/)
    expect(md).toContain('| arm | TTFT ms | TPOT ms | e2e ms | ITL jitter ms (sd) |')
    expect(sectionOf(md, '## Every gate')).toMatch(
      /\| c4 \| toWinDecode \| pass \| \d\.\d{3}× \[\d\.\d{3}×, \d\.\d{3}×\] \| Hodges–Lehmann pseudo-median of 12 paired log-ratios \| 12 paired \| passed \|/,
    )
  })
})

describe('zero, one or many pairs', () => {
  test('no cell: says so once, with no pair tables and no empty tables', () => {
    const { index } = buildEvidence([], [], { suiteCommit: null, redact: false })
    const md = renderBoard(index, [])
    expect(md).toContain('Nothing: no cell ran.')
    expect(md).toContain('No cells were planned.')
    expect(md).toContain('1. no cells were planned')
    for (const absent of ['## Pair checks per fact', '### Decode tok/s', '## Latency', '## Requests completed and failed'])
      expect(md).not.toContain(absent)
    expect(md).not.toContain('_none_')
  })

  test.each([1, 2, 12])('%i pair(s): every heading once, every count over all pairs', (n) => {
    const cells = Array.from({ length: n }, (_, i) => pairCell(`c${i}`, baseline, candidate))
    const md = board(cells)
    const h = headings(md)
    expect(new Set(h).size).toBe(h.length)
    expect(h).toContain('## What was measured')
    expect(md).toContain(`| GPU driver | 550.54.15 | ${n === 1 ? 'all 2 launches' : `all ${2 * n} launches`} |`)
    expect(sectionOf(md, `## Pair checks per fact (${n} pair(s) compared of ${n})`)).toContain(`| GPU driver | ${n}/${n} | — |`)
    expect(md).toContain(`**Promotable**: every required cell accepted`)
    expect(md.match(/every required cell accepted/g)).toHaveLength(1)
  })

  test('a not-promotable board gives its reasons once, numbered, each with its figures', () => {
    const cells = [pairCell('c', baseline, candidate)]
    const { files, tests } = suite(cells)
    const pair = { baseline: [baseline], candidate: [candidate] }
    // A 10× margin the candidate cannot show: the gate fails, and so does its test.
    const lost = decisionMeta('c', pair, { gate: 'toWinDecode', launchNoise: 0, margin: 9 })
    const extra: TestInput = { file: 'a.bench.ts', name: 'c > wins decode 10×', state: 'failed', meta: { decisions: [lost], checks: [] } }
    const { index } = buildEvidence(files, [...tests, extra], { suiteCommit: null, redact: false })
    const md = renderBoard(index, boardFiles(index))
    expect(md).toContain('**Not promotable**: 1 reason.')
    expect(md).toMatch(
      /^1\. toWinDecode on c did not pass in "c > wins decode 10×": fail: decodeTokPerS \d\.\d{3}× \[\d\.\d{3}×, \d\.\d{3}×\] at \d+%, 12 paired \(12\/12\)$/m,
    )
    expect(md.match(/did not pass in "c > wins decode 10×"/g)).toHaveLength(1)
  })
})

describe('rendered from the index alone', () => {
  let dir = ''
  afterAll(async () => {
    if (dir !== '') await rm(dir, { recursive: true, force: true })
  })

  test("boardFiles(index) of the written index gives back the directory's README.md byte for byte", async () => {
    dir = await mkdtemp(join(tmpdir(), 'servegate-board-'))
    const { files, tests } = suite([pairCell('c4', baseline, candidate)])
    const chart = { file: 'charts/c4.svg', svg: '<svg xmlns="http://www.w3.org/2000/svg"/>' }
    const renderers = { charts: async () => [chart] as never[], html: () => '<!doctype html>' }
    await writeEvidence(dir, buildEvidence(files, tests, { suiteCommit: null, redact: false }), renderers, { signingKey: null })
    const index = await readIndex(dir)
    const written = await readFile(join(dir, 'README.md'), 'utf8')
    expect(renderBoard(index, boardFiles(index))).toBe(written)
    expect(written).toContain('| charts/c4.svg |')
    expect(written).not.toContain('| README.md |')
  })

  test("charts given as Markdown appear once, under their own heading; by default the index's Mermaid charts, '' for none", () => {
    const { files, tests } = suite([pairCell('c4', baseline, candidate)])
    const { index } = buildEvidence(files, tests, { suiteCommit: null, redact: false })
    const chart = '```mermaid\nxychart-beta\n  bar [1, 2]\n```'
    const md = renderBoard(index, [], { charts: chart })
    expect(sectionOf(md, '## Charts')).toBe(`## Charts\n\n${chart}\n`)
    expect(md.split(chart)).toHaveLength(2)
    expect(renderBoard(index, [], { charts: '' })).not.toContain('## Charts')
    const own = mermaidCharts(index)
    expect(own === '' ? !renderBoard(index, []).includes('## Charts') : renderBoard(index, []).includes(own.trim())).toBe(true)
  })
})

describe('names from outside render as text', () => {
  test('hostile engine, model, GPU, cell, test and failure names add no tag, link, row or column to the board', () => {
    // The same hostile manifest on both arms, so the pair still matches and its gates and tables are drawn.
    const manifest = hostileManifest()
    const [b, c] = [
      { ...baseline, manifest },
      { ...candidate, manifest },
    ]
    const crashed = failedCellRecord(
      { baseUrl: 'http://127.0.0.1:1', model: 'm' },
      { code: 'ENGINE_EXITED', message: hostileName('failure'), httpStatus: null, retryAfterS: null },
    )
    const cells = [
      {
        ...pairCell(hostileName('cell'), b, c),
        ladder: hostileName('ladder'),
        engines: { baseline: hostileName('baseline'), candidate: hostileName('candidate') },
      },
      pairCell(hostileName('dead'), b, crashed),
    ]
    const { files, tests } = suite(cells)
    const failed: TestInput = { file: 'a.bench.ts', name: hostileName('test'), state: 'failed', meta: undefined }
    const { index } = buildEvidence(files, [...tests, failed], { suiteCommit: hostileName('suite'), redact: false })
    const md = renderBoard(index, boardFiles(index))
    expectInert(md)
    // Every place a name is shown: the tables, the reasons, the glance lines, the charts' notes.
    for (const place of ['cell', 'dead', 'baseline', 'model', 'version', 'gpu', 'driver', 'cpu', 'failure', 'test', 'suite'])
      expect(md).toContain(`${place}&lt;svg onload=alert(1)>`)
  })
})

describe('expected outcomes read as expected', () => {
  const index = expectedEvidence()
  const md = renderBoard(index, [])

  test('the at-a-glance lines count a held .not as expected, not as a fail or a non-win', () => {
    const lines = glanceLines(index)
    expect(lines).toContain(
      'Expected, asserted with .not and held: qwen3-8b-summary-ctx1024-c16 (toWinDecode: expected non-win ✓), ' +
        `qwen3-8b-summary-ctx8192-c1 (toWinDecode: expected non-win ✓), ${UNFAIR_CELL} (toBeMatchedPair: expected mismatch ✓).`,
    )
    expect(lines).toContain('Gates: 7 pass, 0 fail, 1 inconclusive, 2 expected non-win ✓ (asserted with .not); quality warnings: 0.')
    expect(lines.find((l) => l.startsWith('Pair checks:'))).toMatch(
      /^Pair checks: \d+ passed, 0 failed, 1 expected mismatch ✓ \(asserted with \.not\);/,
    )
    expect(lines.find((l) => l.startsWith('Cells:'))).toMatch(/; 3 not accepted are optional and block nothing\)\.$/)
    expect(lines).toContain('Wins, decode: 3 of 5 matched cells (2 expected non-win ✓, asserted with .not).')
    // Only the TTFT hold that passes by policy is left to read, not the expected non-wins.
    expect(lines.find((l) => l.startsWith('Not wins or not held:'))).toBe(
      'Not wins or not held: qwen3-8b-summary-ctx1024-c16 (toHoldLatency).',
    )
    expect(lines[0]).toMatch(
      /the 3 that did not pass held as asserted: 2 expected non-win ✓, 1 inconclusive that passes by policy with a warning\)\.$/,
    )
  })

  test('findings, the gate table and the cell table say what a .not expected; nothing is marked as blocking', () => {
    expect(md).toContain('- **expected non-win ✓** qwen3-8b-summary-ctx8192-c1: toWinDecode: decodeTokPerS')
    expect(md).toContain(`- **expected mismatch ✓** ${UNFAIR_CELL}: toBeMatchedPair: ${'model fingerprint'}`)
    expect(md).toContain('- **cell-not-accepted (optional: does not block)** qwen3-8b-summary-ctx8192-c16:')
    expect(sectionOf(md, '## Every gate')).toMatch(/\| qwen3-8b-summary-ctx8192-c1 \| toWinDecode \| fail: expected non-win ✓ \|/)
    expect(sectionOf(md, '## Cells (a sweep or capacity search keeps its cells together on one ladder)')).toContain(
      `| ${UNFAIR_CELL} |  | pair | failed: expected mismatch ✓ (optional) |`,
    )
    expect(md).not.toContain('❌')
  })

  test('what blocks promotion is marked ❌, and only that', () => {
    const failing = renderBoard(sampleEvidence(), [])
    expect(failing).toContain('- ❌ **cell-not-accepted** qwen3-8b-summary-ctx8192-c16:')
    expect(failing).toContain('- ❌ **non-win** qwen3-8b-summary-ctx8192-c1:')
    expect(failing).toMatch(/- \*\*inconclusive\*\* qwen3-8b-summary-ctx1024-c16: toHoldLatency/)
  })
})
