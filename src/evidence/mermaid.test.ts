import { describe, expect, test } from 'vitest'
import type { EvidenceCell, EvidenceIndex } from '../schema/evidence.ts'
import { mermaidCharts } from './mermaid.ts'
import { sampleEvidence } from '../../fixtures/evidence-fixture.ts'
import { chartEvidence, UNCHECKED, UNMATCHED, worstCaseEvidence } from '../../fixtures/chart-evidence.ts'

/** The bodies of the fenced mermaid blocks. */
function blocks(markdown: string): string[] {
  return [...markdown.matchAll(/```mermaid\n([\s\S]*?)```/g)].map((m) => m[1] as string)
}

/** The quoted strings of a block's lines. */
function strings(block: string): string[] {
  return [...block.matchAll(/"([^"]*)"/g)].map((m) => m[1] as string)
}

describe('mermaidCharts', () => {
  test('a horizontal xychart per metric: a bar per matched pair, candidate as % of baseline, a parity line at 100', () => {
    const markdown = mermaidCharts(chartEvidence())
    // Each heading says what its Δ compares: not the gate's own estimate, which the gate table shows.
    expect(markdown.match(/^### .*$/gm)).toEqual([
      "### Decode tok/s p50: candidate as % of baseline (the ratio of the arms' p50s; the gate table's Δ is each gate's own estimate)",
      "### Output throughput tok/s: candidate as % of baseline (the ratio of the cells' aggregates; the gate table's Δ is each gate's own estimate)",
      "### Effective prefill tok/s p50: candidate as % of baseline (the ratio of the arms' p50s; the gate table's Δ is each gate's own estimate)",
    ])
    expect(blocks(markdown)).toHaveLength(3)
    expect(blocks(markdown)[0]).toBe(
      [
        'xychart-beta horizontal',
        '  title "Decode tok/s p50, candidate as % of baseline, cells qwen3-8b-summary-…"',
        '  x-axis ["…-ctx1024-c1 +12.0%", "…-ctx1024-c4 +8.0%", "…-ctx1024-c16 +3.0%", "…-ctx1024-r2 +8.0%", "…-ctx1024-r4 +24.6%", ' +
          '"…-ctx1024-r8 +35.0%", "…-ctx8192-c1 -4.0%", "…-ctx8192-c4 +10.0%"]',
        '  y-axis "% of baseline" 0 --> 150',
        '  bar [112, 108, 103, 108, 124.6, 135, 96, 110]',
        '  line [100, 100, 100, 100, 100, 100, 100, 100]',
        '',
      ].join('\n'),
    )
  })

  test('failed, unmatched, unchecked and pending cells are not drawn but listed with their dispositions and reasons', () => {
    const markdown = mermaidCharts(chartEvidence())
    for (const block of blocks(markdown)) expect(block).not.toMatch(/ctx2048|ctx8192-c16|ctx8192-c64/)
    expect(markdown.slice(markdown.lastIndexOf('```') + 3).trim()).toBe(
      [
        'Not drawn (4 cells):',
        `- ${UNCHECKED} (accepted): accepted, but no toBeMatchedPair check ran on it, so it is not known to be an identity-matched pair`,
        `- ${UNMATCHED} (failed): not a matched pair: requestStreamSha256 differs: baseline 1f0c… ≠ candidate 9ad2… (different prompts)`,
        '- qwen3-8b-summary-ctx8192-c16 (failed): candidate: ENGINE_EXITED: photon exited with code 1 before the first request completed ' +
          '(CUDA out of memory allocating the KV cache)',
        '- qwen3-8b-summary-ctx8192-c64 (pending): declared but never run in this run',
      ].join('\n'),
    )
  })

  test('empty when no matched pair has a figure to draw', () => {
    const index = sampleEvidence()
    expect(mermaidCharts({ ...index, cells: index.cells.filter((c) => c.disposition !== 'accepted') })).toBe('')
    expect(mermaidCharts({ ...index, cells: [] })).toBe('')
    const singles = index.cells.map((c): EvidenceCell => ({ ...c, kind: 'cell', arms: c.arms.map((a) => ({ ...a, arm: 'cell' })) }))
    expect(mermaidCharts({ ...index, cells: singles })).toBe('')
  })

  test('names from the index never break a quoted string or the fence, and show as text outside it', () => {
    const index = chartEvidence()
    const hostile: EvidenceIndex = {
      ...index,
      cells: index.cells.map((c, i) => ({
        ...c,
        id: c.disposition === 'accepted' ? c.id : `${c.id} \`x\``,
        engines: { baseline: `vllm "nightly" \`\`\` ${i % 2}`, candidate: 'photon `rc`\n"x"' },
      })),
    }
    const markdown = mermaidCharts(hostile)
    expect(blocks(markdown)).toHaveLength(3)
    for (const block of blocks(markdown)) {
      expect(block).not.toContain('`')
      for (const line of block.split('\n').filter((l) => l.includes('"')))
        expect(line).toMatch(/^ {2}[a-z-]+ \[?("[^"`\n]*"(, )?)+\]?( 0 --> \d+)?$/)
    }
    expect(markdown.split('```').length).toBe(2 * 3 + 1)
    // Outside the fence a name is escaped text (src/evidence/markdown-text.ts): its backticks render as backticks.
    expect(markdown).toContain('- qwen3-8b-summary-ctx8192-c64 \\`x\\` (pending)')
  })

  test('each bar names its cell: several engine pairs, or cells of one context and load, read apart', () => {
    const index = sampleEvidence()
    const other = index.cells.map((c) => ({ ...c, id: `${c.id}-sglang`, engines: { ...c.engines, baseline: 'sglang' } }))
    const labels = strings(blocks(mermaidCharts({ ...index, cells: [...index.cells, ...other] }))[0] as string)
    expect(labels.slice(1, 3)).toEqual(['…-ctx1024-c1-sglang +12.0%', '…-ctx1024-c4-sglang +8.0%'])
    expect(labels).toContain('…-ctx1024-c1 +12.0%')
    // Two cells of one context and load (e.g. from two spec files) are told apart by their ids, not "#2".
    const twin = { ...(index.cells[0] as EvidenceCell), id: 'qwen3-8b-summary-ctx1024-c1~2' }
    const twins = strings(blocks(mermaidCharts({ ...index, cells: [...index.cells, twin] }))[0] as string)
    expect(twins.slice(1, 3)).toEqual(['…-ctx1024-c1 +12.0%', '…-ctx1024-c1~2 +12.0%'])
    // One bar: the whole id.
    const one = { ...index, cells: index.cells.filter((c) => c.id === 'qwen3-8b-summary-ctx1024-c4') }
    expect(strings(blocks(mermaidCharts(one))[0] as string)).toEqual([
      'Decode tok/s p50, candidate as % of baseline',
      'qwen3-8b-summary-ctx1024-c4 +8.0%',
      '% of baseline',
    ])
  })

  test('many pairs: charts of at most 20 bars, three per metric, the rest counted; outliers cut at 300%', () => {
    const markdown = mermaidCharts(worstCaseEvidence())
    expect(blocks(markdown)).toHaveLength(9)
    for (const block of blocks(markdown)) {
      const bars = (block.match(/ {2}bar \[(.*)\]/)?.[1] ?? '').split(', ').map(Number)
      expect(bars.length).toBeLessThanOrEqual(20)
      expect(Math.max(...bars)).toBeLessThanOrEqual(300)
      expect(block).toMatch(/y-axis "% of baseline" 0 --> 300\n/)
    }
    expect(markdown).toContain('100 more pairs are not charted here; the page draws every one.')
    expect(markdown).toContain('Bars above 300% are cut there; their labels carry the Δ%.')
    expect(strings(blocks(markdown)[0] as string)).toContain('…-ctx512-c4 >+9999%')
    expect(mermaidCharts(worstCaseEvidence(), { maxBars: 50, maxCharts: 10, headingLevel: 4 })).toMatch(/^#### Decode/)
    // 160 pairs at 50 bars a chart: four charts per metric.
    expect(blocks(mermaidCharts(worstCaseEvidence(), { maxBars: 50, maxCharts: 10 }))).toHaveLength(12)
  })
})
