import { expectedEvidence } from '../../fixtures/expected-evidence.ts'
import { beforeAll, describe, expect, test } from 'vitest'
import { expectInert, hostileManifest, hostileName } from '../../fixtures/hostile-markdown.ts'
import { checkMeta, decisionMeta } from '../../fixtures/judged-meta.ts'
import { measuredArm } from '../../fixtures/manifest.ts'
import type { EvidenceIndex } from '../schema/evidence.ts'
import type { RunRecord } from '../schema/run.ts'
import type { DeclaredCell } from '../schema/task-meta.ts'
import { boardFiles, renderBoard } from './board.ts'
import { buildEvidence, type TestInput } from './build.ts'
import { mermaidCharts } from './mermaid.ts'
import { GITHUB_COMMENT_LIMIT, PR_COMMENT_MARKER, renderPrComment } from './pr-comment.ts'

let baseline: RunRecord
let candidate: RunRecord

beforeAll(async () => {
  baseline = await measuredArm(300)
  candidate = await measuredArm(600)
}, 60_000)

function pairCell(id: string): DeclaredCell {
  return {
    id,
    kind: 'pair',
    required: true,
    ladder: null,
    engines: { baseline: 'sim-300', candidate: 'sim-600' },
    status: 'measured',
    error: null,
    records: { baseline: [baseline], candidate: [candidate] },
  }
}

/**
 * `n` pairs, each with a matched-pair check and three gates as the matchers record them: a decode
 * win that holds, a TTFT hold, and a decode win at a 10× margin the candidate cannot show.
 */
function evidence(n: number): EvidenceIndex {
  const cells = Array.from({ length: n }, (_, i) => pairCell(`qwen3-8b-ctx1024-c${i}`))
  const pair = { baseline: [baseline], candidate: [candidate] }
  const tests = cells.flatMap((c): TestInput[] => {
    const test = (name: string, meta: NonNullable<TestInput['meta']>, passed: boolean): TestInput => ({
      file: 'a.bench.ts',
      name: `${c.id} > ${name}`,
      state: passed ? 'passed' : 'failed',
      meta,
    })
    const matched = checkMeta(c.id, 'toBeMatchedPair', pair)
    const win = decisionMeta(c.id, pair, { gate: 'toWinDecode', launchNoise: 0 })
    const hold = decisionMeta(c.id, pair, { gate: 'toHoldLatency', metric: 'ttft', percentile: 95, notWorseThanPct: 10 })
    const lost = decisionMeta(c.id, pair, { gate: 'toWinDecode', launchNoise: 0, margin: 9 })
    return [
      test('is matched', { decisions: [], checks: [matched] }, matched.passed),
      test('wins decode', { decisions: [win], checks: [] }, win.passed),
      test('holds p95 TTFT', { decisions: [hold], checks: [] }, hold.passed),
      test('wins decode 10×', { decisions: [lost], checks: [] }, lost.passed),
    ]
  })
  return buildEvidence([{ file: 'a.bench.ts', meta: { cells } }], tests, { suiteCommit: null, redact: false }).index
}

/** The rows of the gate table (the first table of the comment). */
function gateTable(comment: string): string[][] {
  const lines = comment.split('\n')
  const start = lines.findIndex((l) => l.startsWith('| cell | gate (metric) |'))
  const rows: string[][] = []
  for (const line of lines.slice(start + 2)) {
    if (!line.startsWith('| ')) break
    rows.push(
      line
        .slice(2, -2)
        .split(' | ')
        .map((c) => c.trim()),
    )
  }
  return rows
}

describe('renderPrComment', () => {
  test('starts with the marker, then the headline and one gate table row per gate, with figures, Δ and verdict', () => {
    const index = evidence(1)
    const comment = renderPrComment(index)
    expect(comment.startsWith(`${PR_COMMENT_MARKER}\n## servegate: ❌ not promotable\n`)).toBe(true)
    const g = index.statistics.gates
    expect(g.fail).toBe(1)
    expect(comment).toContain(
      `Gates: ${g.pass} ✅ pass, 1 ❌ fail, ${g.inconclusive} ⚠️ inconclusive · cells: 1 accepted, 0 failed, 0 blocked, 0 pending of 1`,
    )
    const rows = gateTable(comment)
    expect(rows).toHaveLength(3)
    const [b, k] = [index.cells[0]?.arms[0], index.cells[0]?.arms[1]]
    const fig = (x: number | null | undefined) => String(Number((x ?? Number.NaN).toPrecision(3)))
    const win = index.gates[2]?.decision
    const pct = (ratio: number | null | undefined) => `${(((ratio ?? Number.NaN) - 1) * 100).toFixed(1)}%`
    expect(rows.find((r) => r[1] === 'toWinDecode (decodeTokPerS)' && r[6] === '✅ pass')).toEqual([
      'qwen3-8b-ctx1024-c0',
      'toWinDecode (decodeTokPerS)',
      `${fig(b?.timings.decodeTokPerS.p50)} tok/s`,
      `${fig(k?.timings.decodeTokPerS.p50)} tok/s`,
      expect.stringMatching(/^\+\d+\.\d%$/),
      expect.stringMatching(/^\[\+\d+\.\d%, \+\d+\.\d%\]$/),
      '✅ pass',
      expect.stringMatching(/^Hodges–Lehmann pseudo-median of \d+ paired log-ratios$/),
    ])
    expect(rows.find((r) => r[1] === 'toHoldLatency (ttftMs p95)')).toEqual([
      'qwen3-8b-ctx1024-c0',
      'toHoldLatency (ttftMs p95)',
      `${fig(b?.timings.ttftMs.p95)} ms`,
      `${fig(k?.timings.ttftMs.p95)} ms`,
      expect.stringMatching(/^[+-]?\d+\.\d%$/),
      expect.stringMatching(/^\[[+-]?\d+\.\d%, [+-]?\d+\.\d%\]$/),
      expect.stringMatching(/^(✅ pass|⚠️ inconclusive \(test passed\))$/),
      expect.any(String),
    ])
    const lost = rows.find((r) => r[6] === '❌ fail')
    expect(lost?.[4]).toBe(`+${pct(win?.effect.estimate)}`.replace('+-', '-'))
  })

  test('then the verdict with numbered reasons, each with its figures, then the whole board collapsed', () => {
    const index = evidence(2)
    const comment = renderPrComment(index, { charts: '' })
    expect(comment).toContain('**Not promotable**: 2 reasons.')
    expect(comment).toMatch(
      /^1\. toWinDecode on qwen3-8b-ctx1024-c0 did not pass in "qwen3-8b-ctx1024-c0 > wins decode 10×": fail: decodeTokPerS \d\.\d{3}× \[\d\.\d{3}×, \d\.\d{3}×\] at \d+%, 12 paired \(12\/12\)$/m,
    )
    expect(comment).toMatch(/^2\. toWinDecode on qwen3-8b-ctx1024-c1 did not pass/m)
    const board = renderBoard(index, boardFiles(index))
    expect(
      comment.endsWith(`<summary>The full board: what was measured, pair checks, every table</summary>\n\n${board}\n\n</details>\n`),
    ).toBe(true)
    // The table and the verdict come before the board, once.
    expect(comment.indexOf('| cell | gate (metric) |')).toBeLessThan(comment.indexOf('<details>'))
    expect(comment.split('**Not promotable**')).toHaveLength(3)
  })

  test('an inconclusive gate reads as inconclusive, never as a pass', () => {
    const index = evidence(1)
    const entry = index.gates[0] as EvidenceIndex['gates'][number]
    const undecided = { ...entry, decision: { ...entry.decision, outcome: 'inconclusive' as const }, testPassed: true }
    const rows = gateTable(renderPrComment({ ...index, gates: [undecided] }))
    expect(rows[0]?.[6]).toBe('⚠️ inconclusive (test passed)')
  })

  test('a promotable index says so; charts go between the verdict and the board', () => {
    const index = evidence(1)
    const promotable = { ...index, gates: index.gates.filter((g) => g.testPassed), promotion: { promotable: true, reasons: [] } }
    const chart = '```mermaid\nxychart-beta\n  bar [1, 2]\n```'
    const comment = renderPrComment(promotable, { charts: chart })
    expect(comment).toContain('## servegate: ✅ promotable')
    expect(comment).toContain('**Promotable**: every required cell accepted')
    expect(comment.indexOf(chart)).toBeGreaterThan(comment.indexOf('**Promotable**'))
    expect(comment.indexOf(chart)).toBeLessThan(comment.indexOf('<details>'))
    expect(renderPrComment(promotable, { charts: '' }).split('```mermaid')).toHaveLength(
      renderBoard(promotable, []).split('```mermaid').length,
    )
  })

  test('by default the key Mermaid charts sit above the fold, and the board below leaves its own out', () => {
    const index = evidence(3)
    const key = mermaidCharts(index, { maxCharts: 1 })
    expect(key).toContain('```mermaid')
    const comment = renderPrComment(index)
    expect(comment.indexOf(key.trim())).toBeGreaterThan(comment.indexOf('**Not promotable**'))
    expect(comment.indexOf(key.trim())).toBeLessThan(comment.indexOf('<details>'))
    expect(comment.slice(comment.indexOf('<details>'))).not.toContain('```mermaid')
    // Given no room, the charts give way before any reason or gate row; the board then keeps its own.
    // (The board is cut before anything above it: a limit the top with its charts cannot meet.)
    const tight = renderPrComment(index, { limit: comment.indexOf('<details>') + 300 - Math.floor(key.length / 2) })
    expect(tight.slice(0, tight.indexOf('<details>'))).not.toContain('```mermaid')
    expect(gateTable(tight)).toHaveLength(index.gates.length)
  })

  test("a board over GitHub's limit is cut inside <details>, saying what was cut and where the full board is; the gate table is whole", () => {
    const index = evidence(50)
    const board = renderBoard(index, boardFiles(index))
    expect(board.length).toBeGreaterThan(GITHUB_COMMENT_LIMIT)
    const comment = renderPrComment(index, { charts: '', boardLocation: '`evidence/README.md` in the evidence artifact' })
    expect(comment.length).toBeLessThanOrEqual(GITHUB_COMMENT_LIMIT)
    expect(comment.length).toBeGreaterThan(GITHUB_COMMENT_LIMIT - 2000)
    expect(gateTable(comment)).toHaveLength(index.gates.length)
    expect(comment).toContain('**Not promotable**: 50 reasons.')
    expect(comment).toMatch(/^50\. toWinDecode on qwen3-8b-ctx1024-c9 did not pass/m)
    expect(comment).toMatch(
      new RegExp(
        `\\n\\n… the board is cut here: \\d+ of its ${board.length} characters left out to stay within GitHub's 65536-character comment limit\\. ` +
          'The full board is `evidence/README.md` in the evidence artifact\\.\\n\\n</details>\\n$',
      ),
    )
    const kept = comment.slice(comment.indexOf('</summary>\n\n') + '</summary>\n\n'.length, comment.indexOf('\n\n… the board is cut here'))
    // A cut inside a chart's fenced block closes the fence, so the note is not read as code.
    const fenced = kept.split('\n').filter((l) => l.startsWith('```')).length % 2 === 0
    expect(fenced).toBe(true)
    const unfenced = kept.endsWith('\n```') && !board.startsWith(kept) ? kept.slice(0, -4) : kept
    expect(unfenced.length).toBeGreaterThan(20_000)
    expect(board.startsWith(unfenced)).toBe(true)
    const left = Number(/cut here: (\d+) of/.exec(comment)?.[1])
    expect(left).toBe(board.length - unfenced.length - 1)
  })

  test('wherever the cut falls, blank lines included, the note counts exactly the characters not shown', () => {
    const index = evidence(2)
    // With no charts above the board, the board keeps its own.
    const board = renderBoard(index, boardFiles(index))
    const full = renderPrComment(index, { charts: '' })
    const start = full.length - Math.floor(board.length / 2)
    let afterBlankLine = 0
    for (let limit = start; limit < start + 600; limit++) {
      const comment = renderPrComment(index, { charts: '', limit })
      const kept = comment.slice(
        comment.indexOf('</summary>\n\n') + '</summary>\n\n'.length,
        comment.indexOf('\n\n… the board is cut here'),
      )
      // A cut inside a chart's fenced block closes the fence, which the board does not have there.
      const shown = kept.endsWith('\n```') && !board.startsWith(kept) ? kept.slice(0, -4) : kept
      expect(board.startsWith(shown)).toBe(true)
      if (board.startsWith(`${shown}\n\n`)) afterBlankLine++
      // What is shown, its line's newline, and what the note counts make the whole board.
      expect(Number(/cut here: (\d+) of/.exec(comment)?.[1])).toBe(board.length - shown.length - 1)
    }
    expect(afterBlankLine).toBeGreaterThan(0)
  })

  test('with more reasons than fit beside the whole gate table, the last reasons are counted, not listed', () => {
    const index = evidence(120)
    const comment = renderPrComment(index)
    expect(comment.length).toBeLessThanOrEqual(GITHUB_COMMENT_LIMIT)
    expect(gateTable(comment)).toHaveLength(index.gates.length)
    const listed = comment.split('\n').filter((l) => /^\d+\. toWinDecode on /.test(l)).length
    expect(listed).toBeGreaterThan(0)
    expect(comment).toContain(`… and ${120 - listed} more reason(s).`)
  })

  test('a gate table longer than the limit by itself loses its last rows with a count, and the comment still fits', () => {
    const index = evidence(4)
    const comment = renderPrComment(index, { limit: 1500 })
    expect(comment.length).toBeLessThanOrEqual(1500)
    const rows = gateTable(comment)
    expect(rows.length).toBeGreaterThan(0)
    expect(rows.length).toBeLessThan(index.gates.length)
    expect(comment).toContain(`… and ${index.gates.length - rows.length} more gate row(s); every gate is in the board.`)
  })
})

describe('names from outside in the PR comment', () => {
  test('a name cannot close the <details> block, open a tag or add a gate row', () => {
    const manifest = hostileManifest()
    const pair = { baseline: [{ ...baseline, manifest }], candidate: [{ ...candidate, manifest }] }
    const id = hostileName('cell')
    const cell = { ...pairCell(id), engines: { baseline: hostileName('baseline'), candidate: hostileName('candidate') }, records: pair }
    const lost = decisionMeta(id, pair, { gate: 'toWinDecode', launchNoise: 0, margin: 9 })
    const win = decisionMeta(id, pair, { gate: 'toWinDecode', launchNoise: 0 })
    const tests: TestInput[] = [
      { file: 'a.bench.ts', name: hostileName('won'), state: 'passed', meta: { decisions: [win], checks: [] } },
      { file: 'a.bench.ts', name: hostileName('lost'), state: 'failed', meta: { decisions: [lost], checks: [] } },
    ]
    const index = buildEvidence([{ file: 'a.bench.ts', meta: { cells: [cell] } }], tests, { suiteCommit: null, redact: false }).index
    const comment = renderPrComment(index)
    expect(gateTable(comment)).toHaveLength(2)
    expect(comment).toMatch(/^1\. toWinDecode on cell&lt;svg onload=alert\(1\)>/m)
    expectInert(comment, {
      [PR_COMMENT_MARKER]: 1,
      '<details>': 1,
      '<summary>': 1,
      '</summary>': 1,
      '</details>': 1,
    })
  })
})

describe('expected outcomes', () => {
  test('a .not that held reads as what it expected, never as a ❌ fail', () => {
    const comment = renderPrComment(expectedEvidence(), { charts: '' })
    const top = comment.slice(0, comment.indexOf('<details>'))
    expect(top).toContain('## servegate: ✅ promotable')
    expect(top).toContain('Gates: 7 ✅ pass, 0 ❌ fail, 1 ⚠️ inconclusive, 2 expected non-win ✓ (.not held) · ')
    const verdicts = gateTable(comment).map((r) => r[6])
    expect(verdicts.filter((v) => v?.startsWith('expected'))).toEqual([
      'expected non-win ✓ (inconclusive, .not)',
      'expected non-win ✓ (fail, .not)',
    ])
    expect(verdicts.filter((v) => v?.includes('❌'))).toEqual([])
  })
})
