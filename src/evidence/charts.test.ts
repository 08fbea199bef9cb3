import { describe, expect, test } from 'vitest'
import type { EvidenceIndex } from '../schema/evidence.ts'
import { cellChart, renderCharts } from './charts.ts'
import { SAMPLE_ENGINES, sampleEvidence } from '../../fixtures/evidence-fixture.ts'

const FILES = [
  'charts/throughput-by-concurrency.svg',
  'charts/decode-ratio-heatmap.svg',
  'charts/prefill-by-concurrency.svg',
  'charts/serving-tradeoff.svg',
  'charts/goodput-by-rate.svg',
]
const CLOSED_LOOP_FILES = FILES.slice(0, 4)

/**
 * The sample index plus a rate ladder: its ctx1024 pairs again as open-loop cells at 2, 4 and 8
 * req/s on one ladder, the candidate keeping more of its requests within the SLO as the rate grows.
 */
function withRateLadder(): EvidenceIndex {
  const index = sampleEvidence()
  const rates = [2, 4, 8]
  const open = index.cells
    .filter((c) => c.disposition === 'accepted' && c.plan?.promptTokens === 1024)
    .map((c, i) => ({
      ...c,
      id: `${c.id}-r${rates[i]}`,
      ladder: 'photon-vs-vllm-rate-sweep',
      plan: c.plan === null ? null : { ...c.plan, arrival: 'poisson' as const, arrivalRatePerS: rates[i] as number },
      arms: c.arms.map((a) => {
        const good = a.arm === 'candidate' ? 1 - 0.1 * i : 1 - 0.3 * i
        return { ...a, load: { ...a.load, goodFraction: good, goodFractionLow: good - 0.05, goodFractionHigh: Math.min(1, good + 0.03) } }
      }),
    }))
  return { ...index, cells: [...index.cells, ...open] }
}

function byFile(charts: readonly { file: string; svg: string }[], file: string): string {
  return charts.find((c) => c.file === file)?.svg ?? ''
}

describe('renderCharts', () => {
  test('draws the five charts as SVG, with the engines and axis titles', async () => {
    const charts = await renderCharts(withRateLadder())
    expect(charts.map((c) => c.file)).toEqual(FILES)
    for (const chart of charts) {
      expect(chart.svg).toMatch(/^<svg [^>]*xmlns="http:\/\/www\.w3\.org\/2000\/svg"/)
      expect(chart.title).not.toMatch(/no data/)
    }
    for (const file of [FILES[0], FILES[2], FILES[3]] as string[]) {
      const svg = byFile(charts, file)
      expect(svg).toContain(SAMPLE_ENGINES.baseline)
      expect(svg).toContain(SAMPLE_ENGINES.candidate)
      expect(svg).toContain('synthetic-summary ctx1024')
      expect(svg).toContain('synthetic-summary ctx8192')
    }
    expect(byFile(charts, FILES[0] as string)).toContain('>output tok/s<')
    expect(byFile(charts, FILES[0] as string)).toContain('>concurrency<')
    expect(byFile(charts, FILES[2] as string)).toContain('>effective prefill tok/s (p50)<')
    expect(byFile(charts, FILES[3] as string)).toContain('>decode tok/s per user (p50)<')
    expect(byFile(charts, FILES[3] as string)).toContain('>aggregate output tok/s<')
    expect(byFile(charts, FILES[3] as string)).toContain('>c16<')
    const good = byFile(charts, FILES[4] as string)
    expect(good).toContain('>offered rate (req/s)<')
    expect(good).toContain('>good share (meets every SLO)<')
    expect(good).toContain('>photon-vs-vllm-rate-sweep<')
    expect(good).toContain(SAMPLE_ENGINES.candidate)
  })

  test('open-loop cells are plotted by rate only; closed-loop charts leave them out', async () => {
    const plain = await renderCharts(sampleEvidence())
    const ladder = await renderCharts(withRateLadder())
    for (const file of CLOSED_LOOP_FILES) expect(byFile(ladder, file)).toBe(byFile(plain, file))
    expect(plain.find((c) => c.file === FILES[4])?.title).toMatch(/\(no data\)$/)
  })

  test('the heatmap labels each accepted pair with its decode ratio; the failed cell has no square', async () => {
    const svg = byFile(await renderCharts(sampleEvidence()), FILES[1] as string)
    expect(svg.match(/>\d\.\d\d×</g)).toEqual(['>1.12×<', '>1.08×<', '>1.03×<', '>0.96×<', '>1.10×<'])
    expect(svg).toContain('>candidate ÷ baseline<')
    expect(svg).toContain(`${SAMPLE_ENGINES.candidate} ÷ ${SAMPLE_ENGINES.baseline}`)
  })

  test('the same index gives byte-identical SVG, whatever was drawn before, alongside or in which order the cells come', async () => {
    const index = sampleEvidence()
    const first = await renderCharts(index)
    const [again, , concurrent] = await Promise.all([
      renderCharts(index),
      cellChart(index.cells[0] as EvidenceIndex['cells'][number]),
      renderCharts(index),
    ])
    const reversed = await renderCharts({ ...index, cells: [...index.cells].reverse() })
    for (const other of [again, concurrent, reversed]) expect(other.map((c) => c.svg)).toEqual(first.map((c) => c.svg))
  })

  test('a gradient id is scoped to its chart, so inlined charts never share one', async () => {
    const svg = byFile(await renderCharts(sampleEvidence()), FILES[1] as string)
    expect(svg).toMatch(/id="decode-ratio-heatmap-gradient_0"/)
    expect(svg).toMatch(/url\(#decode-ratio-heatmap-gradient_0\)/)
  })

  test('an index with nothing to plot still gives the five files, each titled "no data"', async () => {
    const index: EvidenceIndex = { ...sampleEvidence(), cells: sampleEvidence().cells.filter((c) => c.disposition === 'pending') }
    const charts = await renderCharts(index)
    expect(charts.map((c) => c.file)).toEqual(FILES)
    for (const chart of charts) {
      expect(chart.title).toMatch(/ \(no data\)$/)
      expect(chart.svg).toMatch(/^<svg /)
      expect(chart.svg).toContain('>no data<')
    }
  })
})

describe('cellChart', () => {
  test('p50 and p95 of TTFT and TPOT per arm, titled with the cell id', async () => {
    const cell = sampleEvidence().cells[0] as EvidenceIndex['cells'][number]
    const svg = await cellChart(cell)
    expect(svg).toMatch(/^<svg /)
    for (const text of [cell.id, 'TTFT', 'TPOT', 'p50', 'p95', SAMPLE_ENGINES.baseline, SAMPLE_ENGINES.candidate])
      expect(svg).toContain(`>${text}<`)
    expect(await cellChart(cell)).toBe(svg)
  })

  test('a failed cell shows the arm that measured; a pending one says "no data"; text from the index is escaped', async () => {
    const [, , , , , failed, pending] = sampleEvidence().cells as EvidenceIndex['cells']
    const svg = await cellChart(failed as EvidenceIndex['cells'][number])
    expect(svg).toContain(SAMPLE_ENGINES.baseline)
    expect(svg).not.toContain(`>${SAMPLE_ENGINES.candidate}<`)
    expect(await cellChart(pending as EvidenceIndex['cells'][number])).toContain('>no data<')
    const hostile = await cellChart({ ...(failed as EvidenceIndex['cells'][number]), id: '<script>alert(1)</script>' })
    expect(hostile).not.toContain('<script>')
    expect(hostile).toContain('&lt;script&gt;')
  })
})
