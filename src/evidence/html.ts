/**
 * The evidence page: one static, self-contained `index.html` that loads nothing from the network
 * (its Content-Security-Policy says so). One header; summary cards; the promotion reasons once;
 * the gate and cell tables, which sort when a header is clicked (one small inline script, allowed
 * by its hash); a drill-down per cell; the charts inline; the board last, collapsed.
 */
import { createHash } from 'node:crypto'
import { Marked, type Tokens } from 'marked'
import { ABSENT, formatFixedPercent, formatInUnit, formatSignificant } from '../number-format.ts'
import type { ArmSummary, EvidenceCell, EvidenceIndex, GateEntry, Percentiles } from '../schema/evidence.ts'
import type { GateDecision } from '../schema/gate.ts'
import { RunRecord } from '../schema/run.ts'
import { failedCountText, failedOf } from './arm-summary.ts'
import type { EvidenceFile } from './build.ts'
import type { Chart } from './charts.ts'
import { partialHeadline } from './partial-text.ts'
import { promotableSummary } from './promotion-text.ts'
import { cellTone, checkExpected, checkTone, dispositionText, gateCounts, gateExpected, gateTone } from './assertion-tone.ts'
import { estimatorText } from './estimator-text.ts'
import { appendedText, TREND_FILE, TREND_HEAD, trendRows } from './history-trend-text.ts'

/**
 * Renders the evidence page from the index: summary cards (promotable, gates by outcome, cells by
 * disposition, matched pairs), the reasons it is not promotable, the gate table (baseline,
 * candidate, Δ, interval, verdict), the cell table, a `<details>` per cell (percentiles per arm,
 * failed requests by code, the engine's log tail of a failed launch, checks, gates, the cell's
 * charts), the index's charts and the board (Markdown rendered by marked, collapsed). `runs` are
 * the run record files, read only for the arms that failed, for their failures by code and their
 * cell failure in full. Everything from the index, the records and the board is escaped; links
 * and images keep only relative targets. The same inputs give the same bytes.
 * @example await writeFile(join(dir, 'index.html'), renderHtml(index, board, await renderCharts(index), built.runs))
 */
export function renderHtml(
  index: EvidenceIndex,
  boardMarkdown: string,
  charts: readonly Chart[],
  runs: readonly EvidenceFile[] = [],
): string {
  const details = failureDetails(index, runs)
  const cellCharts = charts.filter((c) => c.cell !== undefined)
  return [
    '<!doctype html>',
    '<html lang="en">',
    '<head>',
    '<meta charset="utf-8">',
    '<meta name="viewport" content="width=device-width, initial-scale=1">',
    `<meta http-equiv="Content-Security-Policy" content="${CSP}">`,
    `<title>servegate evidence: ${index.promotion.promotable ? 'promotable' : index.partial === null ? 'not promotable' : 'partial run, not promotable'}</title>`,
    `<style>${STYLE}</style>`,
    '</head>',
    '<body>',
    header(index),
    '<main>',
    cards(index),
    reasons(index),
    gateSection(index),
    cellSection(index),
    drillDown(index, details, cellCharts),
    trendSection(
      index,
      charts.find((c) => c.file === TREND_FILE),
    ),
    chartSection(charts.filter((c) => c.cell === undefined && c.file !== TREND_FILE)),
    boardSection(boardMarkdown),
    '</main>',
    `<script>${SORT_SCRIPT}</script>`,
    '</body>',
    '</html>',
    '',
  ].join('\n')
}

/**
 * Sorts a `table.sortable` by the column whose header button is clicked: by each cell's
 * `data-sort` number where it has one (absent values last), else by its text; a second click
 * reverses. The header says its order in `aria-sort`.
 */
const SORT_SCRIPT = [
  'document.querySelectorAll("table.sortable").forEach(function(table){',
  'table.querySelectorAll("thead th").forEach(function(th,col){',
  'var button=th.querySelector("button");if(!button)return;',
  'button.addEventListener("click",function(){',
  'var asc=th.getAttribute("aria-sort")!=="ascending";',
  'table.querySelectorAll("thead th").forEach(function(h){h.setAttribute("aria-sort","none")});',
  'th.setAttribute("aria-sort",asc?"ascending":"descending");',
  'var body=table.tBodies[0];var rows=Array.prototype.slice.call(body.rows);',
  'function key(row){var c=row.cells[col];var n=c.getAttribute("data-sort");',
  'return n===null?{t:c.textContent.trim()}:{n:n===""?null:Number(n)}}',
  'rows.sort(function(a,b){var x=key(a),y=key(b);var d;',
  'if("n" in x||"n" in y){if(x.n==null&&y.n==null)d=0;else if(x.n==null)return 1;else if(y.n==null)return -1;else d=x.n-y.n}',
  'else d=x.t.localeCompare(y.t,"en",{numeric:true});return asc?d:-d});',
  'rows.forEach(function(r){body.appendChild(r)})})})});',
].join('')

const CSP = `default-src 'none'; style-src 'unsafe-inline'; img-src 'self' data:; script-src 'sha256-${createHash('sha256').update(SORT_SCRIPT).digest('base64')}'`

const STYLE = [
  'body{font-family:"DejaVu Sans",Helvetica,Arial,sans-serif;margin:0 auto;max-width:80rem;padding:1.5rem 1rem;color:#1f2328;line-height:1.45}',
  'h1{font-size:1.6rem;margin:0 0 .3rem}',
  'h2{font-size:1.2rem;margin:1.8rem 0 .6rem;border-bottom:1px solid #d0d7de;padding-bottom:.2rem}',
  'h3{font-size:1rem;margin:1rem 0 .4rem}',
  '.meta{color:#57606a;font-size:.85rem;margin:.1rem 0;overflow-wrap:anywhere}',
  '.cards{display:grid;grid-template-columns:repeat(auto-fit,minmax(14rem,1fr));gap:.8rem;margin:1rem 0}',
  '.card{border:1px solid #d0d7de;border-radius:8px;padding:.7rem 1rem;background:#f6f8fa}',
  '.card h2{font-size:.85rem;text-transform:uppercase;letter-spacing:.04em;color:#57606a;border:0;margin:0 0 .3rem;padding:0}',
  '.card .figure{font-size:1.6rem;font-weight:bold;margin:0}',
  '.card p{margin:.2rem 0;font-size:.9rem}',
  '.card.promotable{background:#dafbe1;border-color:#1a7f37;color:#116329}',
  '.card.not-promotable{background:#ffebe9;border-color:#cf222e;color:#a40e26}',
  '.counts{list-style:none;padding:0;margin:.2rem 0;display:flex;flex-wrap:wrap;gap:.3rem .9rem;font-size:.95rem}',
  '.reasons li{margin:.2rem 0;overflow-wrap:anywhere}',
  '.scroll{overflow-x:auto;max-width:100%}',
  'table{border-collapse:collapse;margin:.5rem 0;font-size:.85rem}',
  'th,td{border:1px solid #d0d7de;padding:.25rem .5rem;text-align:left;vertical-align:top}',
  'td.id{white-space:nowrap}',
  'td.num{text-align:right;white-space:nowrap;font-variant-numeric:tabular-nums}',
  'th{background:#f6f8fa;white-space:nowrap}',
  'th button{font:inherit;font-weight:bold;background:none;border:0;padding:0;cursor:pointer;color:inherit}',
  'th[aria-sort=ascending] button::after{content:" ▲"}',
  'th[aria-sort=descending] button::after{content:" ▼"}',
  'code{font-size:.85em;background:#f6f8fa;padding:.1em .3em;border-radius:4px;overflow-wrap:anywhere}',
  // Red only for what blocks promotion; a .not that held is neutral grey, a note (optional, by policy) amber.
  '.verdict-pass{color:#116329}',
  '.verdict-blocks{color:#a40e26;font-weight:bold}',
  '.verdict-note{color:#9a6700}',
  '.verdict-expected{color:#57606a}',
  '.badge{display:inline-block;border-radius:1em;padding:0 .6em;font-size:.8rem;margin-left:.5em;border:1px solid;font-weight:normal}',
  '.badge.pass{color:#116329}',
  '.badge.blocks{color:#a40e26}',
  '.badge.note{color:#9a6700}',
  '.badge.expected,.badge.pending.note{color:#57606a}',
  'details.cell{border:1px solid #d0d7de;border-radius:6px;margin:.4rem 0;padding:.3rem .8rem}',
  'details.cell>summary{cursor:pointer;font-weight:bold;overflow-wrap:anywhere}',
  'pre{background:#f6f8fa;padding:.6rem;border-radius:6px;font-size:.8rem;white-space:pre-wrap;overflow-wrap:anywhere}',
  'figure{margin:1.2rem 0}',
  'figure svg{max-width:100%;height:auto}',
  'figcaption{color:#57606a;font-size:.9rem}',
  '.board{font-size:.9rem}',
].join('')

const ENTITIES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' }

/** HTML-escapes text for element content and quoted attribute values. */
function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => ENTITIES[c] as string)
}

/** A URL with a scheme (`https:`, `javascript:`) or a protocol-relative one: not part of the evidence directory. */
function leavesThePage(href: string): boolean {
  return /^([a-z][a-z0-9+.-]*:|\/\/)/i.test(href.trim())
}

/**
 * marked for the board: GitHub tables; raw HTML escaped; links and images only within the
 * evidence directory; its headings under the page's.
 */
const board = new Marked({
  gfm: true,
  renderer: {
    html: ({ text }: Tokens.HTML | Tokens.Tag) => escapeHtml(text),
    heading({ tokens, depth }: Tokens.Heading) {
      const level = Math.min(6, depth + 2)
      return `<h${level}>${this.parser.parseInline(tokens)}</h${level}>\n`
    },
    link(token: Tokens.Link) {
      return leavesThePage(token.href) ? this.parser.parseInline(token.tokens) : false
    },
    image: (token: Tokens.Image) => (leavesThePage(token.href) ? escapeHtml(token.text) : false),
  },
})

/** A table cell: escaped text, with a number to sort by (`null`: absent, sorted last). */
interface Cell {
  text: string
  sort?: number | null
  className?: string
}

function td(c: Cell | string): string {
  const cell = typeof c === 'string' ? { text: c } : c
  const sort = cell.sort === undefined ? '' : ` data-sort="${cell.sort === null || !Number.isFinite(cell.sort) ? '' : cell.sort}"`
  const cls = cell.className ?? (cell.sort === undefined ? '' : 'num')
  return `<td${cls === '' ? '' : ` class="${cls}"`}${sort}>${escapeHtml(cell.text)}</td>`
}

/** A table; `sortable` gives each header a button that sorts by its column. */
function table(id: string, head: readonly string[], rows: ReadonlyArray<ReadonlyArray<Cell | string>>, sortable: boolean): string {
  if (rows.length === 0) return '<p class="meta">none</p>'
  const th = head.map((h) =>
    sortable ? `<th aria-sort="none"><button type="button">${escapeHtml(h)}</button></th>` : `<th>${escapeHtml(h)}</th>`,
  )
  return [
    '<div class="scroll">',
    `<table id="${id}"${sortable ? ' class="sortable"' : ''}>`,
    `<thead><tr>${th.join('')}</tr></thead>`,
    '<tbody>',
    ...rows.map((r) => `<tr>${r.map(td).join('')}</tr>`),
    '</tbody>',
    '</table>',
    '</div>',
  ].join('\n')
}

function header(index: EvidenceIndex): string {
  const p = index.provenance
  const provenance = [
    `servegate ${p.servegateVersion}`,
    p.suiteCommit === null ? 'suite outside git' : `suite ${p.suiteCommit.slice(0, 12)}`,
    ...p.harnessHashes.map((h) => `harness ${h.slice(0, 12)}`),
    index.generatedAt === null ? 'no run records' : `last record ${index.generatedAt}`,
    ...(p.redacted ? ['base URLs and hosts redacted'] : []),
  ].join(' · ')
  return ['<header>', '<h1>servegate evidence</h1>', `<p class="meta">${escapeHtml(provenance)}</p>`, '</header>'].join('\n')
}

function counts(entries: ReadonlyArray<[string, number]>): string {
  return `<ul class="counts">${entries.map(([label, n]) => `<li><strong>${n}</strong> ${escapeHtml(label)}</li>`).join('')}</ul>`
}

/** The summary cards: promotable, gates by outcome, cells by disposition, matched pairs. */
function cards(index: EvidenceIndex): string {
  const { promotion, statistics: s } = index
  const pairs = index.cells.filter((c) => c.kind === 'pair').length
  const promotable = promotion.promotable
    ? `<section class="card promotable" id="card-promotable"><h2>Promotable</h2><p class="figure">yes</p><p>${escapeHtml(promotableSummary(index))}</p></section>`
    : `<section class="card not-promotable" id="card-promotable"><h2>Promotable</h2><p class="figure">no</p><p>${index.partial === null ? '' : `${escapeHtml(partialHeadline(index.partial))} `}${promotion.reasons.length} reason(s), <a href="#reasons">listed below</a></p></section>`
  // A .not that held is counted apart, as expected: `fail` is only a gate that did not hold.
  const g = gateCounts(index)
  const optional = index.cells.filter((c) => c.disposition !== 'accepted' && cellTone(c) !== 'blocks').length
  return [
    '<div class="cards">',
    promotable,
    `<section class="card" id="card-gates"><h2>Gates</h2>${counts([
      ['pass', g.pass],
      ['fail', g.fail],
      ['inconclusive', g.inconclusive],
      ...g.expected.map(([words, n]): [string, number] => [words, n]),
    ])}${g.expected.length === 0 ? '' : '<p>expected: asserted with .not, and held</p>'}</section>`,
    `<section class="card" id="card-cells"><h2>Cells</h2>${counts([
      ['accepted', s.accepted],
      ['failed', s.failed],
      ['blocked', s.blocked],
      ['pending', s.pending],
    ])}<p>of ${s.planned} planned (${s.required} required)${
      optional === 0 ? '' : `; ${optional} not accepted ${optional === 1 ? 'is optional and blocks' : 'are optional and block'} nothing`
    }</p></section>`,
    `<section class="card" id="card-pairs"><h2>Matched pairs</h2><p class="figure">${s.matchedPairs} of ${pairs}</p><p>only matched pairs are compared</p></section>`,
    '</div>',
  ].join('\n')
}

function reasons(index: EvidenceIndex): string {
  if (index.promotion.reasons.length === 0) return ''
  return [
    '<section id="reasons">',
    '<h2>Why it is not promotable</h2>',
    '<ol class="reasons">',
    ...index.promotion.reasons.map((r) => `<li>${escapeHtml(r)}</li>`),
    '</ol>',
    '</section>',
  ].join('\n')
}

/** The arm summaries of one arm of a cell, every launch. */
function launches(c: EvidenceCell, arm: ArmSummary['arm']): ArmSummary[] {
  return c.arms.filter((a) => a.arm === arm)
}

/** The median of a list of numbers (the lower middle of an even count); null when none. */
function median(values: ReadonlyArray<number | null>): number | null {
  const known = values.filter((v): v is number => v !== null).sort((a, b) => a - b)
  return known.length === 0 ? null : (known[Math.floor((known.length - 1) / 2)] as number)
}

const TIMING_FIELDS = ['ttftMs', 'timeToFirstOutputMs', 'tpotMs', 'itlMs', 'e2eMs'] as const
const PERCENTILE_KEYS = ['p50', 'p95', 'p99'] as const

/**
 * What one arm measured of a gate's metric, in the metric's unit, from its arm summaries (the
 * median over launches), or from the decision itself for accuracy; null where the index does not
 * hold it (e.g. a p90 latency).
 */
function armFigure(c: EvidenceCell | undefined, d: GateDecision, arm: 'baseline' | 'candidate'): { value: number | null; unit: string } {
  if (d.accuracy !== undefined) {
    const rate = d.accuracy[arm].rate
    return { value: rate === null ? null : rate * 100, unit: '%' }
  }
  const all = c === undefined ? [] : [...launches(c, arm), ...(arm === 'candidate' ? launches(c, 'cell') : [])]
  const pick = (f: (a: ArmSummary) => number | null) => median(all.map(f))
  if (d.metric === 'decodeTokPerS' || d.metric === 'effectivePrefillTokPerS')
    return { value: pick((a) => a.timings[d.metric as 'decodeTokPerS'].p50), unit: 'tok/s' }
  if (d.metric === 'throughputTokPerS' || d.metric === 'outputThroughputTokPerS')
    return { value: pick((a) => a.outputThroughputTokPerS), unit: 'tok/s' }
  if (d.effect.unit === 'fraction' && arm === 'candidate')
    return { value: d.effect.estimate === null ? null : d.effect.estimate * 100, unit: '%' }
  const latency = /^(\w+) (p\d+)$/.exec(d.metric)
  const field = TIMING_FIELDS.find((f) => f === latency?.[1])
  const key = PERCENTILE_KEYS.find((k) => k === latency?.[2])
  if (field !== undefined && key !== undefined) return { value: pick((a) => a.timings[field][key]), unit: 'ms' }
  return { value: null, unit: '' }
}

function figureCell(f: { value: number | null; unit: string }): Cell {
  return { text: f.value === null ? ABSENT : `${formatSignificant(f.value)} ${f.unit}`, sort: f.value }
}

/** A signed figure with its unit: `+5.2%`, `−3.1 pt`. */
function signed(value: number, unit: string, decimals: number): string {
  const text = Math.abs(value).toFixed(decimals)
  const sign = Number(text) === 0 ? '±' : value > 0 ? '+' : '−'
  return `${sign}${text}${unit}`
}

/**
 * A decision's effect as a change: a ratio as a percentage (`+5.2%` for 1.052×), accuracy in
 * points; a latency bound in ms, an SLO's good share in % and a count as they are.
 */
function delta(value: number | null, unit: GateDecision['effect']['unit']): string {
  if (value === null) return ABSENT
  if (unit === 'ratio') return signed((value - 1) * 100, '%', 1)
  if (unit === 'points') return signed(value, ' pt', 1)
  return formatInUnit(value, unit)
}

/** What a gate came to: `expected non-win ✓ (fail, asserted with .not)`, or its outcome, policy and test. */
function verdictText(g: GateEntry): string {
  const d = g.decision
  const test = g.testPassed ? 'test passed' : 'test FAILED'
  const expected = gateExpected(g)
  if (expected !== null) return `${expected} (${d.outcome}, asserted with .not)${g.testPassed ? '' : `; ${test}`}`
  const policy = d.outcome === 'inconclusive' ? ` (${g.passed ? 'passes' : 'fails'} by policy)` : ''
  return `${d.outcome}${policy}${g.isNot ? ', asserted with .not' : ''}; ${test}`
}

function gateSection(index: EvidenceIndex): string {
  const cells = new Map(index.cells.map((c) => [c.id, c]))
  const rows = index.gates.map((g) => {
    const d = g.decision
    const e = d.effect
    const cell = cells.get(g.cell)
    const interval =
      e.low === null && e.high === null
        ? ABSENT
        : `[${delta(e.low, e.unit)}, ${delta(e.high, e.unit)}]${e.confidence === null ? '' : ` at ${formatFixedPercent(e.confidence, 0)}`}`
    return [
      { text: g.cell, className: 'id' },
      `${d.gate} (${d.metric})`,
      d.samples.baseline === 0 ? { text: ABSENT, sort: null } : figureCell(armFigure(cell, d, 'baseline')),
      figureCell(armFigure(cell, d, 'candidate')),
      { text: delta(e.estimate, e.unit), sort: e.estimate },
      { text: interval, sort: e.low },
      estimatorText(d),
      { text: verdictText(g), className: `verdict-${gateTone(g)}` },
    ]
  })
  // The Δ is the gate's own estimate (its estimator beside it), not the ratio of the p50s the heatmaps draw.
  const head = ['cell', 'gate', 'baseline', 'candidate', 'Δ (gate estimate)', 'interval', 'estimator', 'verdict']
  return ['<section id="gates">', '<h2>Gates</h2>', table('gate-table', head, rows, true), '</section>'].join('\n')
}

function planText(c: EvidenceCell): string {
  const p = c.plan
  if (p === null) return ABSENT
  const load =
    p.arrival === 'closed' ? `c${p.concurrency}` : `${p.arrival}${p.arrivalRatePerS === null ? '' : ` ${p.arrivalRatePerS} req/s`}`
  return `${p.workload}, ${p.promptTokens} prompt tokens, ${load}, ${p.requests} requests`
}

function cellSection(index: EvidenceIndex): string {
  const rows = index.cells.map((c) => {
    const ok = c.arms.reduce((n, a) => n + a.completed, 0)
    const failed = failedOf(c.arms)
    return [
      { text: c.id, className: 'id' },
      { text: dispositionText(c), className: `disposition ${c.disposition} verdict-${cellTone(c)}` },
      c.required ? 'yes' : 'no',
      { text: c.plan === null ? ABSENT : String(c.plan.promptTokens), sort: c.plan?.promptTokens ?? null },
      { text: c.plan === null ? ABSENT : String(c.plan.concurrency), sort: c.plan?.concurrency ?? null },
      { text: String(ok), sort: ok },
      { text: failedCountText(failed), sort: failed },
      c.reason ?? '',
    ]
  })
  const head = ['cell', 'disposition', 'required', 'prompt tokens', 'concurrency', 'requests ok', 'requests failed', 'reason']
  return ['<section id="cells">', '<h2>Cells</h2>', table('cell-table', head, rows, true), '</section>'].join('\n')
}

/** What the page reads from a failed arm's run record: its failed requests by code and its cell failure in full. */
const FailureDetail = RunRecord.pick({ failures: true, cellFailure: true })
type FailureDetail = { failures: Record<string, number>; cellFailure: { code: string; message: string } | null }

/** The failure details of every arm that failed, by its record's path; an arm whose record is absent or unreadable has none. */
function failureDetails(index: EvidenceIndex, runs: readonly EvidenceFile[]): Map<string, FailureDetail> {
  const byPath = new Map(runs.map((f) => [f.path, f.content]))
  const details = new Map<string, FailureDetail>()
  for (const a of index.cells.flatMap((c) => c.arms)) {
    if (a.failed === 0 && a.cellFailure === null) continue
    const content = byPath.get(a.record.path)
    if (content === undefined) continue
    let parsed: unknown
    try {
      parsed = JSON.parse(content)
    } catch {
      continue
    }
    const detail = FailureDetail.safeParse(parsed)
    if (detail.success) details.set(a.record.path, detail.data)
  }
  return details
}

const DISTRIBUTIONS: ReadonlyArray<{ key: keyof ArmSummary['timings']; label: string; unit: string }> = [
  { key: 'ttftMs', label: 'TTFT', unit: 'ms' },
  { key: 'timeToFirstOutputMs', label: 'time to first output', unit: 'ms' },
  { key: 'tpotMs', label: 'TPOT', unit: 'ms' },
  { key: 'itlMs', label: 'ITL', unit: 'ms' },
  { key: 'e2eMs', label: 'end to end', unit: 'ms' },
  { key: 'decodeTokPerS', label: 'decode', unit: 'tok/s' },
  { key: 'effectivePrefillTokPerS', label: 'effective prefill', unit: 'tok/s' },
]

function armLabel(c: EvidenceCell, a: ArmSummary): string {
  const launch = c.arms.filter((x) => x.arm === a.arm).length > 1 ? ` #${a.launch}` : ''
  return `${a.arm}${launch}`
}

function percentileCell(p: Percentiles, key: (typeof PERCENTILE_KEYS)[number], unit: string, descriptive: boolean): Cell {
  const v = p[key]
  return { text: v === null ? ABSENT : `${formatSignificant(v)} ${unit}${descriptive ? ' *' : ''}`, sort: v }
}

/** The nearest-rank percentiles the index holds per arm, one row per metric and launch. */
function distributionTable(c: EvidenceCell): string {
  const rows = DISTRIBUTIONS.flatMap((m) =>
    c.arms.map((a) => {
      const p = a.timings[m.key]
      const descriptive = a.p99DescriptiveOnly.includes(m.key)
      return [
        `${m.label} (${m.unit})`,
        armLabel(c, a),
        percentileCell(p, 'p50', m.unit, false),
        percentileCell(p, 'p95', m.unit, false),
        percentileCell(p, 'p99', m.unit, descriptive),
        { text: String(p.samples), sort: p.samples },
      ]
    }),
  )
  // A remote arm's TTFT and e2e less its network round trip, named so, beside the raw rows above.
  const adjusted = (['adjustedTtftMs', 'adjustedE2eMs'] as const).flatMap((key) =>
    c.arms.flatMap((a) => {
      const p = a.network?.[key] ?? null
      if (p === null) return []
      return [
        [
          `${key === 'adjustedTtftMs' ? 'TTFT' : 'end to end'}, network-adjusted (ms)`,
          armLabel(c, a),
          percentileCell(p, 'p50', 'ms', false),
          percentileCell(p, 'p95', 'ms', false),
          percentileCell(p, 'p99', 'ms', false),
          { text: String(p.samples), sort: p.samples },
        ],
      ]
    }),
  )
  const throughput = c.arms.map((a) => [
    'output throughput (tok/s)',
    armLabel(c, a),
    {
      text: a.outputThroughputTokPerS === null ? ABSENT : `${formatSignificant(a.outputThroughputTokPerS)} tok/s`,
      sort: a.outputThroughputTokPerS,
    },
    '',
    '',
    { text: `${a.completed} ok`, sort: a.completed },
  ])
  const note = c.arms.some((a) => a.p99DescriptiveOnly.length > 0)
    ? '<p class="meta">* p99 over too few samples: descriptive only.</p>'
    : ''
  return [
    '<h3>Distributions (nearest-rank percentiles over ok requests)</h3>',
    table(`dist-${slug(c.id)}`, ['metric', 'arm', 'p50', 'p95', 'p99', 'samples'], [...rows, ...adjusted, ...throughput], false),
    note,
    networkNote(c),
  ].join('\n')
}

/** What the network-adjusted rows subtract, per remote arm; empty where every arm is on loopback. */
function networkNote(c: EvidenceCell): string {
  const lines = c.arms.flatMap((a) => {
    const n = a.network
    if (n === undefined) return []
    const subtracted =
      n.rttMs === null
        ? 'no probe answered, nothing subtracted'
        : `network-adjusted rows subtract ${formatSignificant(n.rttMs)} ms (${n.estimator === 'http-p50-before' ? 'HTTP' : 'TCP handshake'} RTT p50 before the cell)`
    const http =
      n.httpRttP50Ms === null ? 'no HTTP RTT' : `HTTP RTT p50 ${formatSignificant(n.httpRttP50Ms)} ms (GET ${n.httpEndpoint ?? '?'})`
    const handshake = n.handshakeP50Ms === null ? 'no handshake RTT' : `TCP handshake p50 ${formatSignificant(n.handshakeP50Ms)} ms`
    return [`${armLabel(c, a)} → ${n.host}: ${http}, ${handshake}; ${subtracted}; gates judge the raw rows.`]
  })
  return lines.length === 0 ? '' : `<p class="meta">${lines.map(escapeHtml).join('<br>')}</p>`
}

/** Each arm's engine-reported prefix-cache hit share and the reset before the cell; empty where there is none to show. */
function prefixCacheTable(c: EvidenceCell): string {
  const rows = c.arms.flatMap((a) => {
    const p = a.prefixCache
    if (p === undefined) return []
    const known = p.totalCachedPromptTokens !== null
    return [
      [
        armLabel(c, a),
        { text: known ? formatFixedPercent(p.cachedPromptShare) : 'not reported', sort: p.cachedPromptShare },
        { text: known ? String(p.totalCachedPromptTokens) : ABSENT, sort: p.totalCachedPromptTokens },
        p.reset ?? ABSENT,
        p.unknownReason ?? '',
      ],
    ]
  })
  if (rows.length === 0) return ''
  return [
    '<h3>Prefix cache (the share of prompt tokens the engine reported serving from its cache)</h3>',
    table(`prefix-cache-${slug(c.id)}`, ['arm', 'cached share', 'cached tokens', 'reset before the cell', 'why unknown'], rows, false),
  ].join('\n')
}

/** Conversations: each arm's TTFT by turn (p50, p95, samples); empty for single-turn cells. */
function turnTable(c: EvidenceCell): string {
  const rows = c.arms.flatMap((a) =>
    (a.ttftByTurn ?? []).map((t) => [
      armLabel(c, a),
      { text: String(t.turn), sort: t.turn },
      percentileCell(t.ttftMs, 'p50', 'ms', false),
      percentileCell(t.ttftMs, 'p95', 'ms', false),
      { text: String(t.ttftMs.samples), sort: t.ttftMs.samples },
    ]),
  )
  if (rows.length === 0) return ''
  return [
    '<h3>TTFT by turn (a prefix cache pays from turn 2)</h3>',
    table(`turns-${slug(c.id)}`, ['arm', 'turn', 'TTFT p50', 'TTFT p95', 'samples'], rows, false),
  ].join('\n')
}

/** The engine's log tail kept in a cell failure's message (after `log tail:`), bounded to its last 40 lines. */
function logTail(message: string): string | null {
  const at = message.indexOf('log tail:')
  if (at < 0) return null
  return message
    .slice(at + 'log tail:'.length)
    .trim()
    .split('\n')
    .slice(-40)
    .join('\n')
}

function failureSection(c: EvidenceCell, details: ReadonlyMap<string, FailureDetail>): string {
  const failing = c.arms.filter((a) => (a.failed !== null && a.failed > 0) || a.cellFailure !== null)
  if (failing.length === 0) return ''
  const out = ['<h3>Failures</h3>']
  const byCode = failing.flatMap((a) => {
    const d = details.get(a.record.path)
    if (d === undefined)
      return [[armLabel(c, a), 'not read (the run record was not given)', { text: failedCountText(a.failed), sort: a.failed }]]
    return Object.entries(d.failures)
      .sort(([x], [y]) => (x < y ? -1 : 1))
      .map(([code, n]) => [armLabel(c, a), code, { text: String(n), sort: n }])
  })
  if (byCode.length > 0) out.push(table(`failures-${slug(c.id)}`, ['arm', 'code', 'failed requests'], byCode, false))
  for (const a of failing.filter((x) => x.cellFailure !== null)) {
    const full = details.get(a.record.path)?.cellFailure
    const tail = full === undefined || full === null ? null : logTail(full.message)
    out.push(`<p><strong>${escapeHtml(armLabel(c, a))}</strong>: ${escapeHtml(a.cellFailure ?? '')}</p>`)
    if (tail !== null && tail !== '') out.push(`<p class="meta">Engine log tail:</p>\n<pre class="log-tail">${escapeHtml(tail)}</pre>`)
  }
  out.push(
    `<p class="meta">Run records: ${failing.map((a) => `<a href="${escapeHtml(a.record.path)}">${escapeHtml(a.record.path)}</a>`).join(', ')}</p>`,
  )
  return out.join('\n')
}

function checkList(c: EvidenceCell): string {
  if (c.checks.length === 0) return ''
  const items = c.checks.map((k) => {
    const unverified = k.unverifiable === undefined ? '' : `; unverifiable: ${k.unverifiable.join('; ')}`
    const found = (k.findings.length === 0 ? '' : `: ${k.findings.join('; ')}`) + unverified
    const expected = checkExpected(k)
    const verdict = expected !== null ? `${expected} (asserted with .not)` : k.passed ? 'held' : 'FAILED'
    return `<li class="verdict-${checkTone(k)}">${escapeHtml(`${k.check} ${verdict}${found}`)}</li>`
  })
  return ['<h3>Checks</h3>', '<ul>', ...items, '</ul>'].join('\n')
}

function cellGates(index: EvidenceIndex, c: EvidenceCell): string {
  const gates = index.gates.filter((g) => g.cell === c.id)
  if (gates.length === 0) return ''
  const items = gates.map((g) => {
    const e = g.decision.effect
    const bounds = e.low === null && e.high === null ? '' : ` [${formatInUnit(e.low, e.unit)}, ${formatInUnit(e.high, e.unit)}]`
    return `<li class="verdict-${gateTone(g)}">${escapeHtml(`${g.test}: ${g.decision.gate} ${formatInUnit(e.estimate, e.unit)}${bounds}, ${verdictText(g)}`)}</li>`
  })
  return ['<h3>Gates</h3>', '<ul>', ...items, '</ul>'].join('\n')
}

function figure(c: Chart): string {
  // The SVG is Vega's, which escapes the text it draws.
  return `<figure id="${escapeHtml(figureId(c))}">\n${c.svg}\n<figcaption>${escapeHtml(c.title)}</figcaption>\n</figure>`
}

/** A `<details>` per cell: plan, reason, distributions, failures, checks, gates and its own charts. */
function drillDown(index: EvidenceIndex, details: ReadonlyMap<string, FailureDetail>, cellCharts: readonly Chart[]): string {
  if (index.cells.length === 0) return ''
  const sections = index.cells.map((c) => {
    const body = [
      `<p class="meta">${escapeHtml(`${c.kind} · ${planText(c)} · ${c.file}`)}</p>`,
      c.reason === null ? '' : `<p>${escapeHtml(c.reason)}</p>`,
      c.arms.length === 0 ? '<p class="meta">Nothing was measured.</p>' : distributionTable(c),
      turnTable(c),
      prefixCacheTable(c),
      failureSection(c, details),
      checkList(c),
      cellGates(index, c),
      ...cellCharts.filter((ch) => ch.cell === c.id).map(figure),
    ].filter((s) => s !== '')
    return [
      `<details class="cell" id="cell-${escapeHtml(slug(c.id))}">`,
      `<summary>${escapeHtml(c.id)}<span class="badge ${c.disposition} ${cellTone(c)}">${escapeHtml(dispositionText(c))}</span></summary>`,
      ...body,
      '</details>',
    ].join('\n')
  })
  return ['<section id="per-cell">', '<h2>Per cell</h2>', ...sections, '</section>'].join('\n')
}

/** The trend of main: whether this run was appended, each gated figure against main's runs, and their chart. */
function trendSection(index: EvidenceIndex, chart: Chart | undefined): string {
  const history = index.history
  if (history === null) return ''
  return [
    '<section id="trend">',
    '<h2>Trend of main</h2>',
    `<p>${escapeHtml(appendedText(history))}</p>`,
    history.trend.length === 0
      ? '<p class="meta">No run of main measured these cells on this testbed yet.</p>'
      : table('trend-table', TREND_HEAD, trendRows(history.trend), false),
    chart === undefined ? '' : figure(chart),
    '</section>',
  ]
    .filter((s) => s !== '')
    .join('\n')
}

function chartSection(charts: readonly Chart[]): string {
  if (charts.length === 0) return ''
  return ['<section class="charts" id="charts">', '<h2>Charts</h2>', ...charts.map(figure), '</section>'].join('\n')
}

function boardSection(markdown: string): string {
  if (markdown.trim() === '') return ''
  return [
    '<section class="board" id="board">',
    '<h2>The board</h2>',
    '<details>',
    '<summary>The board as <a href="README.md">README.md</a> has it</summary>',
    board.parse(markdown, { async: false }).trimEnd(),
    '</details>',
    '</section>',
  ].join('\n')
}

/** An id for an element, from a cell id or chart file: letters, digits and dashes. */
function slug(text: string): string {
  return text.replace(/[^A-Za-z0-9_-]+/g, '-')
}

function figureId(chart: Chart): string {
  return `chart-${slug(chart.file.replace(/^.*\//, '').replace(/\.svg$/, ''))}`
}
