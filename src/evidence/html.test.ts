import { describe, expect, test } from 'vitest'
import type { EvidenceIndex } from '../schema/evidence.ts'
import type { Chart } from './charts.ts'
import { sampleEvidence } from '../../fixtures/evidence-fixture.ts'
import { renderHtml } from './html.ts'

const BOARD = [
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
const CHARTS: Chart[] = [
  {
    file: 'charts/a.svg',
    title: 'Throughput <by> "concurrency"',
    svg: '<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"><text>A</text></svg>',
  },
  { file: 'charts/b.svg', title: 'Ratio', svg: '<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"><text>B</text></svg>' },
]

describe('renderHtml', () => {
  test('a self-contained page: promotion status, counts, the board as HTML tables, the charts inline', () => {
    const html = renderHtml(sampleEvidence(), BOARD, CHARTS)
    expect(html).toMatch(/^<!doctype html>\n<html lang="en">/)
    expect(html).toContain('<title>servegate evidence: not promotable</title>')
    expect(html).toContain('<p class="promotion not-promotable">Not promotable</p>')
    expect(html).toContain('<li>required cell qwen3-8b-summary-ctx8192-c64 is pending: declared but never run in this run</li>')
    expect(html).toContain(
      '7 cells planned (7 required): 5 accepted, 1 failed, 0 blocked, 1 pending · 5 matched pairs · gates: 7 pass, 1 fail, 2 inconclusive',
    )
    expect(html).toMatch(/<table>\n<thead>\n<tr>\n<th>cell<\/th>/)
    expect(html).toContain('<td>qwen3-8b-summary-ctx1024-c1</td>')
    expect(html).toContain(
      `<figure id="chart-a">\n${CHARTS[0]?.svg}\n<figcaption>Throughput &lt;by&gt; &quot;concurrency&quot;</figcaption>\n</figure>`,
    )
    expect(html).toContain('<figure id="chart-b">')
    expect(html).not.toMatch(/<script|<link|(src|href)=["']?(https?:)?\/\//)
    expect(renderHtml(sampleEvidence(), BOARD, CHARTS)).toBe(html)
  })

  test('a promotable index says so, without reasons', () => {
    const index: EvidenceIndex = { ...sampleEvidence(), promotion: { promotable: true, reasons: [] } }
    const html = renderHtml(index, '', [])
    // Gates that failed under `.not` are counted as what they are, never as passed.
    expect(html).toMatch(
      /<p class="promotion promotable">Promotable: every required cell accepted and every gate&#39;s test held \(gates: \d+ pass, [1-9]\d* fail/,
    )
    expect(html).not.toContain('every gate passed')
    expect(html).not.toContain('<ul class="reasons">')
    expect(html).not.toContain('<section class="charts">')
  })

  test('text from the index and raw HTML in the board are escaped; links and images leave nothing to fetch', () => {
    const index = sampleEvidence()
    const hostile: EvidenceIndex = {
      ...index,
      provenance: { ...index.provenance, servegateVersion: '<b>1</b>' },
      promotion: { promotable: false, reasons: ['required cell <script>alert(1)</script> is failed: "x" & \'y\''] },
    }
    const html = renderHtml(hostile, BOARD, CHARTS)
    expect(html).not.toContain('<script')
    expect(html).not.toContain('<b>1</b>')
    expect(html).not.toContain('<img')
    expect(html).not.toContain('javascript:')
    expect(html).toContain('<li>required cell &lt;script&gt;alert(1)&lt;/script&gt; is failed: &quot;x&quot; &amp; &#39;y&#39;</li>')
    expect(html).toContain('<td>&lt;script&gt;alert(1)&lt;/script&gt;</td>')
    expect(html).toContain('&lt;img src=x onerror=alert(1)&gt;')
    expect(html).toContain('<a href="runs/c1/baseline-1.json">record</a> away trap remote')
  })
})
