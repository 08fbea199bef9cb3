/**
 * The evidence page: one static, self-contained `index.html` (no scripts, no network) with the
 * promotion status, the board and the charts inline.
 */
import { Marked, type Tokens } from 'marked'
import type { EvidenceIndex } from '../schema/evidence.ts'
import type { Chart } from './charts.ts'
import { promotableSummary } from './promotion-text.ts'

/**
 * Renders the evidence page: the promotion status with its reasons, the run's counts and
 * provenance, the board (Markdown rendered by marked; its tables become `<table>`) and every
 * chart inline as a `<figure>` captioned with its title. Text from the index and raw HTML in
 * the board are escaped; links and images keep only relative targets, so the page loads nothing
 * from the network. The same inputs give the same bytes.
 * @example await writeFile(join(dir, 'index.html'), renderHtml(index, board, await renderCharts(index)))
 */
export function renderHtml(index: EvidenceIndex, boardMarkdown: string, charts: readonly Chart[]): string {
  return [
    '<!doctype html>',
    '<html lang="en">',
    '<head>',
    '<meta charset="utf-8">',
    '<meta name="viewport" content="width=device-width, initial-scale=1">',
    `<title>servegate evidence: ${index.promotion.promotable ? 'promotable' : 'not promotable'}</title>`,
    `<style>${STYLE}</style>`,
    '</head>',
    '<body>',
    header(index),
    '<section class="board">',
    board.parse(boardMarkdown, { async: false }).trimEnd(),
    '</section>',
    chartSection(charts),
    '</body>',
    '</html>',
    '',
  ].join('\n')
}

const STYLE = [
  'body{font-family:"DejaVu Sans",Helvetica,Arial,sans-serif;margin:2rem auto;max-width:78rem;' +
    'padding:0 1rem;color:#1f2328;line-height:1.45}',
  'h1{font-size:1.6rem;margin:0 0 .5rem}',
  '.promotion{font-size:1.25rem;font-weight:bold;padding:.6rem 1rem;border-radius:6px;margin:.5rem 0}',
  '.promotable{background:#dafbe1;border:1px solid #1a7f37;color:#116329}',
  '.not-promotable{background:#ffebe9;border:1px solid #cf222e;color:#a40e26}',
  '.meta{color:#57606a;font-size:.9rem;margin:.2rem 0}',
  'table{border-collapse:collapse;margin:1rem 0;font-size:.9rem}',
  'th,td{border:1px solid #d0d7de;padding:.3rem .6rem;text-align:left;vertical-align:top}',
  'th{background:#f6f8fa}',
  'code{font-size:.85em;background:#f6f8fa;padding:.1em .3em;border-radius:4px;white-space:nowrap}',
  'figure{margin:1.5rem 0}',
  'figure svg{max-width:100%;height:auto}',
  'figcaption{color:#57606a;font-size:.9rem}',
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

/** marked for the board: GitHub tables; raw HTML escaped; links and images only within the evidence directory. */
const board = new Marked({
  gfm: true,
  renderer: {
    html: ({ text }: Tokens.HTML | Tokens.Tag) => escapeHtml(text),
    link(token: Tokens.Link) {
      return leavesThePage(token.href) ? this.parser.parseInline(token.tokens) : false
    },
    image: (token: Tokens.Image) => (leavesThePage(token.href) ? escapeHtml(token.text) : false),
  },
})

function header(index: EvidenceIndex): string {
  const { promotion, statistics: s, provenance: p } = index
  const status = promotion.promotable
    ? `<p class="promotion promotable">Promotable: ${escapeHtml(promotableSummary(index))}</p>`
    : '<p class="promotion not-promotable">Not promotable</p>'
  const reasons =
    promotion.reasons.length === 0 ? [] : ['<ul class="reasons">', ...promotion.reasons.map((r) => `<li>${escapeHtml(r)}</li>`), '</ul>']
  const counts =
    `${s.planned} cells planned (${s.required} required): ` +
    `${s.accepted} accepted, ${s.failed} failed, ${s.blocked} blocked, ${s.pending} pending` +
    ` · ${s.matchedPairs} matched pairs · gates: ${s.gates.pass} pass, ${s.gates.fail} fail, ${s.gates.inconclusive} inconclusive`
  const provenance = [
    `servegate ${p.servegateVersion}`,
    p.suiteCommit === null ? 'suite outside git' : `suite ${p.suiteCommit.slice(0, 12)}`,
    ...p.harnessHashes.map((h) => `harness ${h.slice(0, 12)}`),
    index.generatedAt === null ? 'no run records' : `last record ${index.generatedAt}`,
    ...(p.redacted ? ['base URLs and hosts redacted'] : []),
  ].join(' · ')
  return [
    '<header>',
    '<h1>servegate evidence</h1>',
    status,
    ...reasons,
    `<p class="meta">${escapeHtml(counts)}</p>`,
    `<p class="meta">${escapeHtml(provenance)}</p>`,
    '</header>',
  ].join('\n')
}

/** The charts inline: their SVG is Vega's, which escapes the text it draws. */
function chartSection(charts: readonly Chart[]): string {
  if (charts.length === 0) return ''
  const figures = charts.map(
    (c) => `<figure id="${escapeHtml(figureId(c))}">\n${c.svg}\n<figcaption>${escapeHtml(c.title)}</figcaption>\n</figure>`,
  )
  return ['<section class="charts">', '<h2>Charts</h2>', ...figures, '</section>'].join('\n')
}

function figureId(chart: Chart): string {
  return `chart-${chart.file.replace(/^.*\//, '').replace(/\.svg$/, '')}`
}
