import { beforeAll, describe, expect, test } from 'vitest'
import type { TopLevelSpec } from 'vega-lite'
import { checkMeta } from '../../fixtures/judged-meta.ts'
import { measuredArm } from '../../fixtures/manifest.ts'
import { failedCellRecord } from '../runner/run-record.ts'
import type { EvidenceCell, EvidenceIndex } from '../schema/evidence.ts'
import type { RunRecord } from '../schema/run.ts'
import type { DeclaredCell } from '../schema/task-meta.ts'
import { buildEvidence } from './build.ts'
import { chartSelection, deltaText } from './chart-data.ts'
import { type Chart, type ChartSpec, cellChart, chartSpecs, renderCharts, type TextBox, textBoxes } from './charts.ts'
import { SAMPLE_ENGINES, sampleEvidence } from '../../fixtures/evidence-fixture.ts'
import { chartEvidence, LADDER, LADDER_RATES, UNCHECKED, UNMATCHED, worstCaseEvidence } from '../../fixtures/chart-evidence.ts'

const INDEX_FILES = [
  'charts/decode-delta-heatmap.svg',
  'charts/throughput-delta-heatmap.svg',
  'charts/prefill-delta-heatmap.svg',
  'charts/latency-by-rate.svg',
  'charts/goodput-by-rate.svg',
]
const [DECODE, THROUGHPUT, PREFILL, LATENCY, GOOD] = INDEX_FILES as [string, string, string, string, string]
const CLOSED = ['ctx1024-c1', 'ctx1024-c4', 'ctx1024-c16', 'ctx8192-c1', 'ctx8192-c4'].map((s) => `qwen3-8b-summary-${s}`)
const LADDER_CELLS = LADDER_RATES.map((r) => `qwen3-8b-summary-ctx1024-r${r}`)

function byFile<T extends { file: string }>(charts: readonly T[], file: string): T {
  const chart = charts.find((c) => c.file === file)
  if (chart === undefined) throw new Error(`no chart ${file} among ${charts.map((c) => c.file).join(', ')}`)
  return chart
}

/** The data rows a spec draws (its top-level inline values). */
function rowsOf(spec: TopLevelSpec | null): Record<string, unknown>[] {
  const data = (spec as { data?: { values?: Record<string, unknown>[] } } | null)?.data
  return data?.values ?? []
}

/** Every pair of text boxes that overlap (by more than a hair: Vega rounds positions to 1/1000 px). */
function overlaps(boxes: readonly TextBox[]): [string, string][] {
  const hits: [string, string][] = []
  const e = 0.01
  for (const [i, a] of boxes.entries())
    for (const b of boxes.slice(i + 1))
      if (a.x1 < b.x2 - e && b.x1 < a.x2 - e && a.y1 < b.y2 - e && b.y1 < a.y2 - e) hits.push([a.text, b.text])
  return hits
}

/** The texts of an SVG's `<text>` elements (Vega writes one per label; a multi-line label has one `<tspan>` per line). */
function texts(svg: string): string[] {
  return [...svg.matchAll(/<text[^>]*>([\s\S]*?)<\/text>/g)].map((m) =>
    (m[1] as string).replace(/<tspan[^>]*>([^<]*)<\/tspan>/g, '$1 ').trim(),
  )
}

describe('chartSelection', () => {
  test('draws identity-matched accepted pairs and lists every other cell with its disposition and reason', () => {
    const { drawn, notDrawn } = chartSelection(chartEvidence())
    expect(drawn.map((c) => c.id)).toEqual([...CLOSED.slice(0, 3), ...LADDER_CELLS, ...CLOSED.slice(3)])
    expect(notDrawn).toEqual([
      {
        cell: UNCHECKED,
        disposition: 'accepted',
        reason: 'accepted, but no toBeMatchedPair check ran on it, so it is not known to be an identity-matched pair',
      },
      {
        cell: UNMATCHED,
        disposition: 'failed',
        reason: 'not a matched pair: requestStreamSha256 differs: baseline 1f0c… ≠ candidate 9ad2… (different prompts)',
      },
      { cell: 'qwen3-8b-summary-ctx8192-c16', disposition: 'failed', reason: expect.stringMatching(/^candidate: ENGINE_EXITED: photon/) },
      { cell: 'qwen3-8b-summary-ctx8192-c64', disposition: 'pending', reason: 'declared but never run in this run' },
    ])
  })

  test('the order of cells in the index does not matter', () => {
    const index = chartEvidence()
    expect(chartSelection({ ...index, cells: [...index.cells].reverse() })).toEqual(chartSelection(index))
  })
})

describe('renderCharts', () => {
  let charts: Chart[]
  let specs: ChartSpec[]
  beforeAll(async () => {
    charts = await renderCharts(chartEvidence())
    specs = chartSpecs(chartEvidence())
  })

  test('five charts of the whole index, then one per drawn cell; each index chart lists the cells it leaves out', () => {
    expect(charts.map((c) => c.file)).toEqual([
      ...INDEX_FILES,
      ...chartSelection(chartEvidence()).drawn.map((c) => `charts/cells/${c.id}.svg`),
    ])
    for (const chart of charts) {
      expect(chart.svg).toMatch(/^<svg [^>]*xmlns="http:\/\/www\.w3\.org\/2000\/svg"/)
      expect(chart.title).not.toMatch(/no data/)
    }
    const notDrawn = chartSelection(chartEvidence()).notDrawn
    for (const file of INDEX_FILES) expect(byFile(charts, file).notDrawn).toEqual(notDrawn)
    expect(byFile(charts, DECODE).cells).toEqual(CLOSED)
    expect(byFile(charts, LATENCY).cells).toEqual(LADDER_CELLS)
    expect(byFile(charts, `charts/cells/${CLOSED[0]}.svg`).cell).toBe(CLOSED[0])
    expect(byFile(charts, `charts/cells/${CLOSED[0]}.svg`).notDrawn).toBeUndefined()
  })

  test('a heatmap has one square per matched closed-loop pair, labelled with its Δ%; failed, unmatched and unchecked pairs have none', () => {
    const svg = byFile(charts, DECODE).svg
    expect(texts(svg).filter((t) => /^[+-]\d.*%$/.test(t))).toEqual(['+12.0%', '+8.0%', '+3.0%', '-4.0%', '+10.0%'])
    expect(texts(svg)).toEqual(expect.arrayContaining(['ctx 1024', 'ctx 8192', 'concurrency', 'Δ%: direction, not a verdict']))
    // The title names what the Δ compares, and says the colour is a direction, not a verdict.
    expect(texts(svg)).toContain("Decode tok/s p50: candidate vs baseline, Δ% (ratio of the arms' p50s) by context × concurrency")
    expect(svg).toContain('colour is the direction of the change, not a verdict')
  })

  test('a heatmap colours the direction of a change, never in red (the colour of what blocks promotion)', async () => {
    const index = sampleEvidence()
    // The candidate at a third of the baseline's decode: the darkest square there is.
    const slower = index.cells.map((c) =>
      c.id !== CLOSED[3]
        ? c
        : {
            ...c,
            arms: c.arms.map((a) =>
              a.arm !== 'candidate'
                ? a
                : {
                    ...a,
                    timings: { ...a.timings, decodeTokPerS: { ...a.timings.decodeTokPerS, p50: (a.timings.decodeTokPerS.p50 ?? 0) / 3 } },
                  },
            ),
          },
    )
    const svg = byFile(await renderCharts({ ...index, cells: slower }), DECODE).svg
    expect(texts(svg).filter((t) => t.startsWith('-6'))).toEqual([expect.stringMatching(/^-6\d\.\d%$/)])
    const colours = [...svg.matchAll(/rgb\((\d+), (\d+), (\d+)\)/g)].map((m) => m.slice(1, 4).map(Number) as [number, number, number])
    expect(colours.length).toBeGreaterThan(0)
    expect(colours.filter(([r, g, b]) => r >= 90 && r > 2 * g && r > 2 * b)).toEqual([])
    expect(texts(svg)).toContainEqual(`${SAMPLE_ENGINES.candidate} vs ${SAMPLE_ENGINES.baseline} synthetic-summary`)
    expect(svg).not.toContain('ctx 2048')
    const rows = rowsOf(byFile(specs, DECODE).spec)
    expect(rows.map((r) => [r.cell, r.row, r.concurrency])).toEqual([
      [CLOSED[0], 'ctx 1024', 1],
      [CLOSED[1], 'ctx 1024', 4],
      [CLOSED[2], 'ctx 1024', 16],
      [CLOSED[3], 'ctx 8192', 1],
      [CLOSED[4], 'ctx 8192', 4],
    ])
    expect((rows[0]?.deltaPct as number) / 100).toBeCloseTo(0.12, 3)
  })

  test('throughput and prefill heatmaps draw their own deltas', () => {
    const index = chartEvidence()
    const cell = index.cells.find((c) => c.id === CLOSED[0]) as EvidenceCell
    const [baseline, candidate] = cell.arms
    const throughput = rowsOf(byFile(specs, THROUGHPUT).spec)[0]?.deltaPct as number
    expect(throughput).toBeCloseTo(((candidate?.outputThroughputTokPerS ?? 0) / (baseline?.outputThroughputTokPerS ?? 1) - 1) * 100, 6)
    const prefill = rowsOf(byFile(specs, PREFILL).spec)[0]?.deltaPct as number
    const p50 = (a: typeof baseline) => a?.timings.effectivePrefillTokPerS.p50 ?? 0
    expect(prefill).toBeCloseTo((p50(candidate) / p50(baseline) - 1) * 100, 6)
    expect(texts(byFile(charts, THROUGHPUT).svg)).toContain('+11.9%')
    expect(texts(byFile(charts, PREFILL).svg)).toContain('+8.7%')
  })

  test('latency percentiles by offered rate: TTFT and ITL p50, p95, p99 of each arm of the ladder', () => {
    const svg = byFile(charts, LATENCY).svg
    for (const text of [`${LADDER} TTFT (ms)`, `${LADDER} ITL (ms)`, 'offered rate (req/s)', 'p50', 'p95', 'p99'])
      expect(texts(svg)).toContain(text)
    expect(texts(svg)).toContain(`baseline · ${SAMPLE_ENGINES.baseline}`)
    const rows = rowsOf(byFile(specs, LATENCY).spec)
    const ttftP99 = (arm: string) =>
      rows.filter((r) => r.arm === `${arm} · ${SAMPLE_ENGINES[arm as 'baseline']}` && r.percentile === 'p99' && r.m === 0)
    expect(ttftP99('baseline').map((r) => r.rate)).toEqual([...LADDER_RATES])
    const values = ttftP99('baseline').map((r) => r.valueMs as number)
    expect(values).toEqual([...values].sort((a, b) => a - b))
    expect(rows).toHaveLength(LADDER_RATES.length * 2 * 2 * 3)
  })

  test('the good share by offered rate, a panel per ladder', () => {
    const svg = byFile(charts, GOOD).svg
    for (const text of ['offered rate (req/s)', 'good share (meets every SLO)', LADDER]) expect(texts(svg)).toContain(text)
    expect(rowsOf(byFile(specs, GOOD).spec).map((r) => [r.arm, r.rate, r.good])).toEqual([
      [`baseline · ${SAMPLE_ENGINES.baseline}`, 2, 1],
      [`baseline · ${SAMPLE_ENGINES.baseline}`, 4, 0.7],
      [`baseline · ${SAMPLE_ENGINES.baseline}`, 8, expect.closeTo(0.4, 9)],
      [`candidate · ${SAMPLE_ENGINES.candidate}`, 2, 1],
      [`candidate · ${SAMPLE_ENGINES.candidate}`, 4, 0.9],
      [`candidate · ${SAMPLE_ENGINES.candidate}`, 8, 0.8],
    ])
  })

  test("a cell's chart is a step CDF of TTFT and ITL through the percentiles the index keeps, baseline against candidate", () => {
    const chart = byFile(specs, `charts/cells/${CLOSED[1]}.svg`)
    const cell = chartEvidence().cells.find((c) => c.id === CLOSED[1]) as EvidenceCell
    const baseline = cell.arms[0]?.timings.ttftMs
    expect(rowsOf(chart.spec).filter((r) => r.panel === 'TTFT (ms)' && String(r.arm).startsWith('baseline'))).toEqual([
      { panel: 'TTFT (ms)', arm: `baseline · ${SAMPLE_ENGINES.baseline}`, percentile: 'p50', share: 0.5, valueMs: baseline?.p50 },
      { panel: 'TTFT (ms)', arm: `baseline · ${SAMPLE_ENGINES.baseline}`, percentile: 'p95', share: 0.95, valueMs: baseline?.p95 },
      { panel: 'TTFT (ms)', arm: `baseline · ${SAMPLE_ENGINES.baseline}`, percentile: 'p99', share: 0.99, valueMs: baseline?.p99 },
    ])
    const svg = byFile(charts, chart.file).svg
    for (const text of ['TTFT (ms)', 'ITL (ms)', `candidate · ${SAMPLE_ENGINES.candidate}`, 'share at or under'])
      expect(texts(svg)).toContain(text)
    expect(svg).toContain('step CDF through the nearest-rank p50, p95 and p99')
  })

  test('two cells that would share a square get a row each, named by their ids', async () => {
    const index = sampleEvidence()
    const twin = { ...(index.cells[0] as EvidenceCell), id: `${CLOSED[0]}~2`, file: 'benchmarks/other.bench.ts' }
    const svg = byFile(await renderCharts({ ...index, cells: [...index.cells, twin] }), DECODE).svg
    expect(texts(svg)).toEqual(
      expect.arrayContaining(['ctx 1024 qwen3-8b-summary-ctx1024-c1', 'ctx 1024 qwen3-8b-summary-ctx1024- c1~2', 'ctx 1024']),
    )
    expect(texts(svg).filter((t) => t === '+12.0%')).toHaveLength(2)
  })

  test('the same index gives byte-identical SVG, whatever was drawn before, alongside or in which order the cells come', async () => {
    const index = sampleEvidence()
    const first = await renderCharts(index)
    const [again, , concurrent] = await Promise.all([renderCharts(index), cellChart(index.cells[0] as EvidenceCell), renderCharts(index)])
    const reversed = await renderCharts({ ...index, cells: [...index.cells].reverse() })
    for (const other of [again, concurrent, reversed]) expect(other.map((c) => c.svg)).toEqual(first.map((c) => c.svg))
  })

  test('a gradient id is scoped to its chart, so inlined charts never share one', () => {
    const svg = byFile(charts, DECODE).svg
    expect(svg).toMatch(/id="decode-delta-heatmap-gradient_0"/)
    expect(svg).toMatch(/url\(#decode-delta-heatmap-gradient_0\)/)
  })

  test('an index with nothing to draw still gives the five index charts, each titled "no data", and no cell charts', async () => {
    const index: EvidenceIndex = { ...sampleEvidence(), cells: sampleEvidence().cells.filter((c) => c.disposition !== 'accepted') }
    const none = await renderCharts(index)
    expect(none.map((c) => c.file)).toEqual(INDEX_FILES)
    for (const chart of none) {
      expect(chart.title).toMatch(/ \(no data\)$/)
      expect(chart.svg).toContain('>no data<')
      expect(chart.notDrawn?.map((c) => c.disposition)).toEqual(['failed', 'pending'])
    }
  })
})

describe('labels in the worst case', () => {
  test('many cells with long names: no two label boxes overlap, and the charts grow with the cells', { timeout: 60_000 }, async () => {
    const all = chartSpecs(worstCaseEvidence())
    const cells = all.filter((c) => c.cell !== undefined)
    const longest = cells.reduce((a, b) => ((a.cell ?? '').length >= (b.cell ?? '').length ? a : b))
    for (const chart of [...all.slice(0, INDEX_FILES.length), longest]) {
      const boxes = await textBoxes(chart.spec as TopLevelSpec)
      expect(boxes.length, chart.file).toBeGreaterThan(20)
      expect(overlaps(boxes), chart.file).toEqual([])
    }
    const decode = await textBoxes(byFile(all, DECODE).spec as TopLevelSpec)
    const squares = decode.filter((b) => /^(>?[+-]|±)\d+(\.\d)?%$/.test(b.text))
    expect(squares).toHaveLength(145)
    expect(Math.max(...decode.map((b) => b.y2))).toBeGreaterThan((145 / 8) * 40)
    expect(longest.file.length).toBeLessThan(120)
  })

  test('the check finds overlapping labels when there are some', async () => {
    const spec: TopLevelSpec = {
      data: {
        values: [
          { x: 1, t: 'a long label' },
          { x: 1.01, t: 'another long label' },
        ],
      },
      mark: 'text',
      encoding: { x: { field: 'x', type: 'quantitative' }, text: { field: 't', type: 'nominal' } },
    }
    expect(overlaps(await textBoxes(spec))).toEqual([['a long label', 'another long label']])
  })
})

describe('cellChart', () => {
  test('TTFT and ITL distributions per arm, titled with the cell id', async () => {
    const cell = sampleEvidence().cells[0] as EvidenceCell
    const svg = await cellChart(cell)
    expect(svg).toMatch(/^<svg /)
    for (const text of [`${cell.id}: TTFT and ITL distributions`, 'TTFT (ms)', 'ITL (ms)', `baseline · ${SAMPLE_ENGINES.baseline}`])
      expect(texts(svg)).toContain(text)
    expect(await cellChart(cell)).toBe(svg)
  })

  test('a failed cell shows the arm that measured; a pending one says "no data"; text from the index is escaped', async () => {
    const [, , , , , failed, pending] = sampleEvidence().cells as EvidenceCell[]
    const svg = await cellChart(failed as EvidenceCell)
    expect(svg).toContain(SAMPLE_ENGINES.baseline)
    expect(svg).not.toContain(`candidate · ${SAMPLE_ENGINES.candidate}`)
    expect(await cellChart(pending as EvidenceCell)).toContain('>no data<')
    const hostile = await cellChart({ ...(failed as EvidenceCell), id: '<script>alert(1)</script>' })
    expect(hostile).not.toContain('<script>')
    expect(hostile).toContain('&lt;script&gt;')
  })
})

describe('charts of an index built from measured records', () => {
  let index: EvidenceIndex
  beforeAll(async () => {
    const arm = (decode: number, promptTokens: number, concurrency: number) =>
      measuredArm(decode, { workload: { promptTokens }, concurrency })
    const [b64c1, c64c1, b64c2, c64c2, b128c2, c128c2, open2, open4] = await Promise.all([
      arm(300, 64, 1),
      arm(600, 64, 1),
      arm(300, 64, 2),
      arm(600, 64, 2),
      arm(300, 128, 2),
      arm(600, 128, 2),
      measuredArm(400, { arrival: { kind: 'poisson', ratePerS: 20 }, slo: { ttftMs: 1000 } }),
      measuredArm(400, { arrival: { kind: 'poisson', ratePerS: 40 }, slo: { ttftMs: 1000 } }),
    ])
    const crashed = failedCellRecord(
      { baseUrl: 'http://127.0.0.1:1', model: 'm' },
      { code: 'ENGINE_EXITED', message: 'engine exited during start-up with code 3', httpStatus: null, retryAfterS: null },
    )
    const pairs: Record<string, { baseline: RunRecord[]; candidate: RunRecord[] }> = {
      'p64-c1': { baseline: [b64c1 as RunRecord], candidate: [c64c1 as RunRecord] },
      'p64-c2': { baseline: [b64c2 as RunRecord], candidate: [c64c2 as RunRecord] },
      'p128-c2': { baseline: [b128c2 as RunRecord], candidate: [c128c2 as RunRecord] },
      unmatched: { baseline: [b64c2 as RunRecord], candidate: [c128c2 as RunRecord] },
      crashed: { baseline: [b64c2 as RunRecord], candidate: [crashed] },
    }
    const declared = (id: string, over: Partial<DeclaredCell>): DeclaredCell => ({
      id,
      kind: 'pair',
      required: true,
      ladder: null,
      engines: { baseline: 'sim-300', candidate: 'sim-600' },
      status: 'measured',
      error: null,
      records: {},
      ...over,
    })
    const cells = [
      ...Object.entries(pairs).map(([id, records]) => declared(id, { records })),
      ...[open2, open4].map((r, i) =>
        declared(`open-${i}`, { kind: 'cell', ladder: 'sweep', engines: { cell: 'sim-400' }, records: { cell: [r as RunRecord] } }),
      ),
    ]
    const checks = Object.entries(pairs)
      .filter(([id]) => id !== 'crashed')
      .map(([id, pair]) => checkMeta(id, 'toBeMatchedPair', pair))
    const built = buildEvidence(
      [{ file: 'a.bench.ts', meta: { cells } }],
      [{ file: 'a.bench.ts', name: 'pairs are matched', state: 'passed', meta: { decisions: [], checks } }],
      { suiteCommit: null, redact: false },
    )
    index = built.index
  }, 60_000)

  test('matched pairs are drawn by context × concurrency, the failed and unmatched pairs are listed, the ladder by rate', async () => {
    expect(chartSelection(index).notDrawn.map((c) => [c.cell, c.disposition, c.reason.split(':')[0]])).toEqual([
      ['crashed', 'failed', 'candidate'],
      ['unmatched', 'failed', 'not a matched pair'],
    ])
    const charts = await renderCharts(index)
    const decode = byFile(charts, DECODE)
    expect(decode.cells).toEqual(['p64-c1', 'p64-c2', 'p128-c2'])
    expect(texts(decode.svg)).toEqual(expect.arrayContaining(['ctx 64', 'ctx 128', 'sim-600 vs sim-300 synthetic-summary']))
    // Each square is labelled with its pair's Δ% of p50 decode tok/s, as the index has the arms.
    const expected = (decode.cells ?? []).map((id) => {
      const [baseline, candidate] = (index.cells.find((c) => c.id === id) as EvidenceCell).arms
      const delta = ((candidate?.timings.decodeTokPerS.p50 ?? 0) / (baseline?.timings.decodeTokPerS.p50 ?? 1) - 1) * 100
      return deltaText(delta)
    })
    expect(texts(decode.svg).filter((t) => /^[+-]\d+\.\d%$/.test(t))).toEqual(expected)
    expect(byFile(charts, LATENCY).cells).toEqual(['open-0', 'open-1'])
    expect(texts(byFile(charts, GOOD).svg)).toContain('sweep')
    expect(charts.filter((c) => c.cell !== undefined).map((c) => c.cell)).toEqual(['open-0', 'open-1', 'p64-c1', 'p64-c2', 'p128-c2'])
  })
})
