import { expectedEvidence, UNFAIR_CELL } from '../../fixtures/expected-evidence.ts'
import { createHash } from 'node:crypto'
import { describe, expect, test } from 'vitest'
import type { EvidenceIndex, GateEntry } from '../schema/evidence.ts'
import type { EvidenceFile } from './build.ts'
import type { Chart } from './charts.ts'
import { sampleEvidence } from '../../fixtures/evidence-fixture.ts'
import { renderHtml } from './html.ts'

const BOARD = [
  '# servegate evidence',
  '',
  '## Board',
  '',
  '| cell | disposition |',
  '|---|---|',
  '| qwen3-8b-summary-ctx1024-c1 | accepted |',
  '| <script>alert(1)</script> | failed |',
  '',
  '[record](runs/c1/baseline-1.json) [away](https://example.com/x) [trap](javascript:alert(1)) ![remote](https://example.com/x.png)',
  '',
  '<img src=x onerror=alert(1)>',
].join('\n')
const svg = (text: string) => `<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"><text>${text}</text></svg>`
const CHARTS: Chart[] = [
  { file: 'charts/a.svg', title: 'Throughput <by> "concurrency"', svg: svg('A') },
  { file: 'charts/b.svg', title: 'Ratio', svg: svg('B') },
  { file: 'charts/cells/qwen3-8b-summary-ctx1024-c4.svg', title: 'TTFT CDF', svg: svg('C'), cell: 'qwen3-8b-summary-ctx1024-c4' },
]
const FAILED_CELL = 'qwen3-8b-summary-ctx8192-c16'
const LOG_TAIL = 'loading weights\ntorch.OutOfMemoryError: CUDA out of memory <tried 2.00 GiB>'

/** The failed candidate's run record, as far as the page reads it. */
function failedRun(): EvidenceFile {
  const record = {
    failures: { ENGINE_EXITED: 1, REQUEST_ABORTED: 511 },
    cellFailure: { code: 'ENGINE_EXITED', message: `engine photon exited mid-cell with code 1; log tail:\n${LOG_TAIL}`, httpStatus: null },
    requests: [],
  }
  return { path: `runs/${FAILED_CELL}/candidate-1.json`, content: JSON.stringify(record) }
}

const count = (html: string, re: RegExp) => html.match(new RegExp(re, 'g'))?.length ?? 0

/** The rows of a table by id, each as its cells' text. */
function rowsOf(html: string, id: string): string[][] {
  const table = new RegExp(`<table id="${id}"[^>]*>([\\s\\S]*?)</table>`).exec(html)?.[1] ?? ''
  const body = /<tbody>([\s\S]*?)<\/tbody>/.exec(table)?.[1] ?? ''
  return [...body.matchAll(/<tr>([\s\S]*?)<\/tr>/g)].map((r) =>
    [...(r[1] as string).matchAll(/<td[^>]*>([\s\S]*?)<\/td>/g)].map((c) => c[1] as string),
  )
}

function headOf(html: string, id: string): string[] {
  const table = new RegExp(`<table id="${id}"[^>]*>([\\s\\S]*?)</table>`).exec(html)?.[1] ?? ''
  return [...table.matchAll(/<th(?:\s[^>]*)?>(?:<button type="button">)?([^<]*)/g)].map((m) => m[1] as string)
}

describe('renderHtml', () => {
  test('one header, summary cards, the reasons once, then the tables, the cells, the charts and the board', () => {
    const index = sampleEvidence()
    const html = renderHtml(index, BOARD, CHARTS, [failedRun()])
    expect(html).toMatch(/^<!doctype html>\n<html lang="en">/)
    expect(html).toContain('<title>servegate evidence: not promotable</title>')
    expect(count(html, /<h1[ >]/)).toBe(1)
    // The board's own h1 and h2 sit under the page's h2.
    expect(html).toContain('<h3>servegate evidence</h3>')
    expect(html).toContain('<h4>Board</h4>')
    expect(html).toContain('<section class="card not-promotable" id="card-promotable"><h2>Promotable</h2><p class="figure">no</p>')
    expect(html).toMatch(
      /id="card-gates"><h2>Gates<\/h2><ul class="counts"><li><strong>7<\/strong> pass<\/li><li><strong>1<\/strong> fail<\/li><li><strong>2<\/strong> inconclusive<\/li>/,
    )
    expect(html).toMatch(
      /id="card-cells"><h2>Cells<\/h2><ul class="counts"><li><strong>5<\/strong> accepted<\/li><li><strong>1<\/strong> failed<\/li><li><strong>0<\/strong> blocked<\/li><li><strong>1<\/strong> pending<\/li><\/ul><p>of 7 planned \(7 required\)/,
    )
    expect(html).toContain('id="card-pairs"><h2>Matched pairs</h2><p class="figure">5 of 7</p>')
    // Each reason once on the page (the board's copy is its own text).
    for (const reason of index.promotion.reasons) expect(count(html, new RegExp(escapeRe(escapeHtmlText(reason))))).toBe(1)
    const order = ['<header>', 'class="cards"', 'id="reasons"', 'id="gates"', 'id="cells"', 'id="per-cell"', 'id="charts"', 'id="board"']
    expect(order.map((s) => html.indexOf(s))).toEqual(order.map((s) => html.indexOf(s)).sort((a, b) => a - b))
    expect(order.every((s) => html.includes(s))).toBe(true)
    expect(renderHtml(index, BOARD, CHARTS, [failedRun()])).toBe(html)
  })

  test('the gate table: cell, gate, each arm in its unit, Δ and interval as percentages of a ratio, the verdict', () => {
    const html = renderHtml(sampleEvidence(), '', [])
    expect(headOf(html, 'gate-table')).toEqual([
      'cell',
      'gate',
      'baseline',
      'candidate',
      'Δ (gate estimate)',
      'interval',
      'estimator',
      'verdict',
    ])
    const rows = rowsOf(html, 'gate-table')
    expect(rows).toHaveLength(sampleEvidence().gates.length)
    // ctx1024 c1: decode 1.12× [1.08, 1.16], a pass; TTFT p95 0.92× [0.88, 0.96], a pass.
    const [decode, ttft] = rows
    expect(decode?.slice(0, 2)).toEqual(['qwen3-8b-summary-ctx1024-c1', 'toWinDecode (decodeTokPerS)'])
    expect(decode?.[2]).toMatch(/^\d+(\.\d+)? tok\/s$/)
    expect(decode?.slice(4)).toEqual(['+12.0%', '[+8.0%, +16.0%] at 95%', 'geometric mean of 64 paired ratios', 'pass; test passed'])
    expect(ttft?.[2]).toMatch(/^\d+(\.\d+)? ms$/)
    expect(ttft?.slice(4)).toEqual(['−8.0%', '[−12.0%, −4.0%] at 95%', 'geometric mean of 64 paired ratios', 'pass; test passed'])
    expect(rows.map((r) => r[7])).toContain('fail; test FAILED')
    expect(rows.map((r) => r[7])).toContain('inconclusive (passes by policy); test passed')
    // Red only where the test failed (it blocks promotion); amber for an inconclusive that passes by policy.
    expect(html).toContain('<td class="verdict-blocks">fail; test FAILED</td>')
    expect(html).toContain('<td class="verdict-note">inconclusive (passes by policy); test passed</td>')
    expect(html).toMatch(/<td class="num" data-sort="1\.12">\+12\.0%<\/td>/)
    expect(html).toContain('<table id="gate-table" class="sortable">')
    expect(html).toContain('<th aria-sort="none"><button type="button">Δ (gate estimate)</button></th>')
  })

  test('an accuracy gap reads in points, its arms in %', () => {
    const index = sampleEvidence()
    const first = index.gates[0] as GateEntry
    const accuracy: GateEntry = {
      ...first,
      decision: {
        ...first.decision,
        gate: 'toStayWithinAccuracyGap',
        kind: 'non-regression',
        metric: 'accuracy',
        outcome: 'fail',
        effect: { ...first.decision.effect, estimate: -66.7, low: -83.3, high: -38.9, unit: 'points' },
        accuracy: {
          unit: 'request',
          confidence: 0.95,
          method: 'Wilson',
          baseline: { correct: 9, scored: 10, rate: 0.9, low: 0.6, high: 0.98 },
          candidate: { correct: 2, scored: 10, rate: 0.2, low: 0.06, high: 0.5 },
          improved: false,
          questionsNeeded: null,
        },
      },
    }
    const [row] = rowsOf(renderHtml({ ...index, gates: [accuracy] }, '', []), 'gate-table')
    expect(row?.slice(2, 6)).toEqual(['90 %', '20 %', '−66.7 pt', '[−83.3 pt, −38.9 pt] at 95%'])
    expect(row?.join(' ')).not.toContain('×')
  })

  test('an arm whose source never recorded its failed count reads "unknown" in the cell table, never 0', () => {
    const index = sampleEvidence()
    const [first, ...others] = index.cells
    if (first === undefined) throw new Error('the sample has cells')
    const cell = { ...first, arms: first.arms.map((a, i) => (i === 0 ? { ...a, failed: null } : a)) }
    const [row] = rowsOf(renderHtml({ ...index, cells: [cell, ...others] }, '', []), 'cell-table')
    const head = headOf(renderHtml(index, '', []), 'cell-table')
    expect(row?.[head.indexOf('requests failed')]).toBe('unknown')
  })

  test('the cell table and a drill-down per cell: percentiles per arm with units, failures by code, the log tail', () => {
    const index = sampleEvidence()
    const html = renderHtml(index, '', CHARTS, [failedRun()])
    expect(rowsOf(html, 'cell-table').map((r) => r.slice(0, 2))).toEqual(index.cells.map((c) => [c.id, c.disposition]))
    expect(count(html, /<details class="cell" /)).toBe(index.cells.length)
    const failed = new RegExp(`<details class="cell" id="cell-${FAILED_CELL}">([\\s\\S]*?)</details>`).exec(html)?.[1] ?? ''
    // A required cell that failed blocks promotion: red.
    expect(failed).toContain('<span class="badge failed blocks">failed</span>')
    expect(rowsOf(failed, `failures-${FAILED_CELL}`)).toEqual([
      ['candidate', 'ENGINE_EXITED', '1'],
      ['candidate', 'REQUEST_ABORTED', '511'],
    ])
    expect(failed).toContain(
      '<pre class="log-tail">loading weights\ntorch.OutOfMemoryError: CUDA out of memory &lt;tried 2.00 GiB&gt;</pre>',
    )
    const dist = rowsOf(failed, `dist-${FAILED_CELL}`)
    expect(dist.find((r) => r[0] === 'TTFT (ms)' && r[1] === 'baseline')?.[2]).toMatch(/^\d+(\.\d+)? ms$/)
    expect(dist.find((r) => r[0] === 'decode (tok/s)' && r[1] === 'candidate')?.slice(2, 6)).toEqual(['—', '—', '—', '0'])
    const c4 = /<details class="cell" id="cell-qwen3-8b-summary-ctx1024-c4">([\s\S]*?)<\/details>/.exec(html)?.[1] ?? ''
    expect(c4).toContain('<figure id="chart-qwen3-8b-summary-ctx1024-c4">')
    expect(c4).toMatch(
      /<li class="verdict-pass">qwen3-8b summary ctx1024 c4 &gt; wins decode by 5%: toWinDecode 1\.080× \[1\.060×, 1\.100×\]/,
    )
    // The index's charts sit in their own section; the cell's chart only in its cell.
    const charts = /<section class="charts" id="charts">([\s\S]*?)<\/section>/.exec(html)?.[1] ?? ''
    expect([...charts.matchAll(/<figure id="([^"]+)"/g)].map((m) => m[1])).toEqual(['chart-a', 'chart-b'])
    expect(charts).toContain('<figcaption>Throughput &lt;by&gt; &quot;concurrency&quot;</figcaption>')
    // Without its run record the failure is counted, and the page says where the codes would be.
    expect(renderHtml(index, '', [])).toContain('<td>not read (the run record was not given)</td>')
  })

  test('a promotable index says so on its card, with no reasons section', () => {
    const index: EvidenceIndex = { ...sampleEvidence(), promotion: { promotable: true, reasons: [] } }
    const html = renderHtml(index, '', [])
    expect(html).toMatch(
      /<section class="card promotable" id="card-promotable"><h2>Promotable<\/h2><p class="figure">yes<\/p><p>every required cell accepted and every gate&#39;s test held \(gates: \d+ pass, [1-9]\d* fail/,
    )
    expect(html).not.toContain('id="reasons"')
    expect(html).not.toContain('id="charts"')
    expect(html).not.toContain('id="board"')
  })

  test('its one script is the sorter, allowed by its hash; nothing is loaded from the network', () => {
    const html = renderHtml(sampleEvidence(), BOARD, CHARTS)
    const scripts = [...html.matchAll(/<script>([\s\S]*?)<\/script>/g)].map((m) => m[1] as string)
    expect(scripts).toHaveLength(1)
    expect(count(html, /<script/)).toBe(1)
    const hash = createHash('sha256')
      .update(scripts[0] as string)
      .digest('base64')
    expect(html).toContain(
      `<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; img-src 'self' data:; script-src 'sha256-${hash}'">`,
    )
    expect(html).not.toMatch(/<link|(src|href)=["']?(https?:)?\/\//)
  })

  test('text from the index, the records and the board is escaped; links and images leave nothing to fetch', () => {
    const index = sampleEvidence()
    const hostile: EvidenceIndex = {
      ...index,
      cells: index.cells.map((c, i) => (i === 0 ? { ...c, reason: '<img src=x onerror=alert(2)>' } : c)),
      provenance: { ...index.provenance, servegateVersion: '<b>1</b>' },
      promotion: { promotable: false, reasons: ['required cell <script>alert(1)</script> is failed: "x" & \'y\''] },
    }
    const run = failedRun()
    const hostileRun = { ...run, content: run.content.replace('loading weights', '</pre><script>alert(3)</script>') }
    const html = renderHtml(hostile, BOARD, CHARTS, [hostileRun])
    expect(count(html, /<script/)).toBe(1)
    expect(html).not.toContain('<b>1</b>')
    expect(html).not.toContain('<img')
    expect(html).not.toContain('javascript:')
    expect(html).toContain('<li>required cell &lt;script&gt;alert(1)&lt;/script&gt; is failed: &quot;x&quot; &amp; &#39;y&#39;</li>')
    expect(html).toContain('<td>&lt;script&gt;alert(1)&lt;/script&gt;</td>')
    expect(html).toContain('&lt;img src=x onerror=alert(1)&gt;')
    expect(html).toContain('&lt;/pre&gt;&lt;script&gt;alert(3)&lt;/script&gt;')
    expect(html).toContain('<a href="runs/c1/baseline-1.json">record</a> away trap remote')
  })
})

function escapeRe(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')
}

function escapeHtmlText(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;').replace(/'/g, '&#39;')
}

describe('expected outcomes and optional cells', () => {
  const index = expectedEvidence()
  const html = renderHtml(index, '', [])

  test('a .not that held reads "expected non-win ✓" in neutral grey; nothing is marked as blocking', () => {
    const rows = rowsOf(html, 'gate-table')
    const decode = rows.find((r) => r[0] === 'qwen3-8b-summary-ctx8192-c1' && r[1] === 'toWinDecode (decodeTokPerS)')
    expect(decode?.[7]).toBe('expected non-win ✓ (fail, asserted with .not)')
    expect(html).toContain('<td class="verdict-expected">expected non-win ✓ (fail, asserted with .not)</td>')
    expect(html).toMatch(
      /id="card-gates"><h2>Gates<\/h2><ul class="counts"><li><strong>7<\/strong> pass<\/li><li><strong>0<\/strong> fail<\/li>/,
    )
    expect(html).toContain('<li><strong>2</strong> expected non-win ✓</li>')
    expect(html).not.toMatch(/class="[^"]*verdict-blocks|class="badge [a-z]+ blocks"/)
  })

  test('an optional cell that failed is not red: an expected mismatch is neutral, an engine failure amber, each saying it blocks nothing', () => {
    expect(html).toContain(`<span class="badge failed expected">failed: expected mismatch ✓ (optional)</span>`)
    expect(html).toContain('<span class="badge failed note">failed (optional: does not block)</span>')
    expect(html).toContain('<li class="verdict-expected">toBeMatchedPair expected mismatch ✓ (asserted with .not): model fingerprint')
    expect(rowsOf(html, 'cell-table').find((r) => r[0] === UNFAIR_CELL)?.[1]).toBe('failed: expected mismatch ✓ (optional)')
    expect(html).toContain('; 3 not accepted are optional and block nothing</p>')
  })
})
