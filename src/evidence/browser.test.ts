/**
 * End to end: the evidence page as a browser draws it. Headless Chromium, driven over the
 * DevTools pipe, loads index.html from a temporary evidence directory; the DOM is checked, a
 * header is clicked and the table must sort, and a full-page screenshot (into test-artifacts/)
 * is checked for blank bands. `SERVEGATE_UPDATE_SCREENSHOTS=1` also writes the README's
 * docs/images/evidence-page.png.
 */
import { mkdir, writeFile } from 'node:fs/promises'
import { join, resolve } from 'node:path'
import { pathToFileURL } from 'node:url'
import { afterAll, describe, expect } from 'vitest'
import {
  type Browser,
  decodePng,
  findChromium,
  flatness,
  launchBrowser,
  MISSING_CHROMIUM,
  type Page,
  processesNaming,
} from '../../fixtures/chromium.ts'
import { sampleEvidence } from '../../fixtures/evidence-fixture.ts'
import { expectedEvidence } from '../../fixtures/expected-evidence.ts'
import { test } from '../../fixtures/test-context.ts'
import { renderBoard } from './board.ts'
import { renderCharts } from './charts.ts'
import { renderHtml } from './html.ts'

const SCREENSHOT = resolve('test-artifacts', 'evidence-index.png')
const README_IMAGE = resolve('docs', 'images', 'evidence-page.png')
const FAILED_CELL = 'qwen3-8b-summary-ctx8192-c16'

const chromium = await findChromium()
const required = process.env.SERVEGATE_REQUIRE_BROWSER === '1'
const skipped = chromium === null && !required

/** The failed candidate's run record, as far as the page reads it: failures by code and the engine's exit with its log tail. */
function failedRun(): { path: string; content: string } {
  const message =
    'engine photon exited mid-cell with code 1; log tail:\n' +
    'INFO loading weights (16.4 GiB)\nINFO KV cache: 8192 tokens × 16 sequences\n' +
    'ERROR torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB'
  const record = { failures: { ENGINE_EXITED: 1, REQUEST_ABORTED: 511 }, cellFailure: { code: 'ENGINE_EXITED', message } }
  return { path: `runs/${FAILED_CELL}/candidate-1.json`, content: JSON.stringify(record) }
}

/**
 * The elements drawn in red (text, fill, stroke, background or border) that are not part of what
 * blocks promotion (a `blocks` verdict or badge, the not-promotable card), and how many are red at all.
 */
const STRAY_RED = `(() => {
  const red = (c) => { const m = /rgba?\\((\\d+), (\\d+), (\\d+)/.exec(c || ''); if (m === null) return false;
    const [r, g, b] = m.slice(1, 4).map(Number); return r >= 90 && r > 2 * g && r > 2 * b };
  let all = 0; const stray = [];
  for (const e of document.querySelectorAll('body *')) {
    const s = getComputedStyle(e);
    if (![s.color, s.fill, s.stroke, s.backgroundColor, s.borderTopColor].some(red)) continue;
    all++;
    if (e.closest('.verdict-blocks, .badge.blocks, .not-promotable') === null) stray.push(e.tagName + '.' + e.getAttribute('class') + ': ' + (e.textContent || '').slice(0, 60));
  }
  return { all, stray };
})()`

/** The Δ column of the gate table as its sort keys, top to bottom (null: absent). */
const DELTAS = `[...document.querySelectorAll('#gate-table tbody tr')].map((r) => { const v = r.cells[4].dataset.sort; return v === '' ? null : Number(v) })`

describe.skipIf(skipped)(`the evidence page in headless Chromium${skipped ? ` (skipped: ${MISSING_CHROMIUM})` : ''}`, () => {
  let home = ''
  let browser: Browser | null = null
  let page: Page
  test.beforeAll(async ({ tmpDir: dir }) => {
    if (chromium === null) throw new Error(`SERVEGATE_REQUIRE_BROWSER=1 but ${MISSING_CHROMIUM}`)
    home = join(dir, 'chromium')
    const index = sampleEvidence()
    const charts = await renderCharts(index)
    await mkdir(join(dir, 'charts', 'cells'), { recursive: true })
    for (const chart of charts) await writeFile(join(dir, chart.file), chart.svg)
    await writeFile(join(dir, 'index.html'), renderHtml(index, renderBoard(index, []), charts, [failedRun()]))
    const expected = expectedEvidence()
    await writeFile(join(dir, 'expected.html'), renderHtml(expected, renderBoard(expected, []), await renderCharts(expected), []))
    browser = await launchBrowser(chromium, home)
    page = await browser.open(pathToFileURL(join(dir, 'index.html')).href, { width: 1280, height: 1000 })
  }, 90_000)
  afterAll(async () => {
    await browser?.close()
    if (home !== '') expect(await processesNaming(home)).toEqual([])
  })

  test('one h1, the four cards, the gate table, a drill-down per cell, the charts; no errors, nothing wider than the window', async () => {
    const index = sampleEvidence()
    const dom = await page.evaluate<{
      h1: string[]
      cards: string[]
      gateRows: number
      cells: number
      figures: number
      svgs: number
      boardOpen: boolean
    }>(
      `({ h1: [...document.querySelectorAll('h1')].map((e) => e.textContent),
          cards: [...document.querySelectorAll('.cards .card')].map((e) => e.id + ': ' + e.innerText.replace(/\\s+/g, ' ').trim()),
          gateRows: document.querySelectorAll('#gate-table tbody tr').length,
          cells: document.querySelectorAll('details.cell').length,
          figures: document.querySelectorAll('figure').length,
          svgs: document.querySelectorAll('figure > svg').length,
          boardOpen: document.querySelector('#board details').open })`,
    )
    expect(dom.h1).toEqual(['servegate evidence'])
    expect(dom.cards).toEqual([
      expect.stringMatching(/^card-promotable: PROMOTABLE no \d+ reason\(s\), listed below$/),
      'card-gates: GATES 7 pass 1 fail 2 inconclusive',
      'card-cells: CELLS 5 accepted 1 failed 0 blocked 1 pending of 7 planned (7 required)',
      'card-pairs: MATCHED PAIRS 5 of 7 only matched pairs are compared',
    ])
    expect(dom.gateRows).toBe(index.gates.length)
    expect(dom.cells).toBe(index.cells.length)
    expect(dom.figures).toBeGreaterThanOrEqual(5)
    expect(dom.svgs).toBe(dom.figures)
    expect(dom.boardOpen).toBe(false)
    // The sorter ran: its hash matched the page's Content-Security-Policy, which blocks anything else.
    expect(page.errors).toEqual([])
    const width = () => page.evaluate<[number, number]>('[document.documentElement.scrollWidth, window.innerWidth]')
    const [wide, window1280] = await width()
    expect(wide).toBeLessThanOrEqual(window1280)
  })

  test('clicking a header sorts its table, a second click reverses it', async () => {
    const before = await page.evaluate<Array<number | null>>(DELTAS)
    await page.click('#gate-table thead th:nth-child(5) button')
    const ascending = await page.evaluate<Array<number | null>>(DELTAS)
    const known = before.filter((v): v is number => v !== null).sort((a, b) => a - b)
    expect(ascending).toEqual([...known, ...before.filter((v) => v === null)])
    expect(ascending).not.toEqual(before)
    expect(await page.evaluate('document.querySelector("#gate-table thead th:nth-child(5)").getAttribute("aria-sort")')).toBe('ascending')
    await page.click('#gate-table thead th:nth-child(5) button')
    expect((await page.evaluate<Array<number | null>>(DELTAS)).filter((v) => v !== null)).toEqual([...known].reverse())
    await page.click('#cell-table thead th:nth-child(2) button')
    const dispositions = await page.evaluate<string[]>(
      `[...document.querySelectorAll('#cell-table tbody tr')].map((r) => r.cells[1].textContent)`,
    )
    expect(dispositions).toEqual([...dispositions].sort())
  })

  test("a failed cell's drill-down shows its failures by code and the engine's log tail", async () => {
    await page.click(`#cell-${FAILED_CELL} > summary`)
    const shown = await page.evaluate<{ open: boolean; codes: string[]; tail: string; tailHeight: number }>(
      `(() => { const d = document.getElementById('cell-${FAILED_CELL}'); const pre = d.querySelector('pre.log-tail');
        return { open: d.open, codes: [...d.querySelectorAll('#failures-${FAILED_CELL} tbody tr')].map((r) => r.innerText.replace(/\\s+/g, ' ')),
                 tail: pre.textContent, tailHeight: pre.offsetHeight } })()`,
    )
    expect(shown.open).toBe(true)
    expect(shown.codes).toEqual(['candidate ENGINE_EXITED 1', 'candidate REQUEST_ABORTED 511'])
    expect(shown.tail).toMatch(/CUDA out of memory\. Tried to allocate 2\.00 GiB$/)
    expect(shown.tailHeight).toBeGreaterThan(0)
    const [wide, window1280] = await page.evaluate<[number, number]>('[document.documentElement.scrollWidth, window.innerWidth]')
    expect(wide).toBeLessThanOrEqual(window1280)
    await page.click(`#cell-${FAILED_CELL} > summary`)
  })

  test('red is only what blocks promotion: none on a promotable page of expected non-wins and optional cells', async () => {
    const failing = await page.evaluate<{ all: number; stray: string[] }>(STRAY_RED)
    expect(failing.all).toBeGreaterThan(0)
    expect(failing.stray).toEqual([])
    const expected = await (browser as Browser).open(
      (await page.evaluate<string>('location.href')).replace(/index\.html$/, 'expected.html'),
      { width: 1280, height: 1000 },
    )
    expect(await expected.evaluate<{ all: number; stray: string[] }>(STRAY_RED)).toEqual({ all: 0, stray: [] })
    const verdicts = await expected.evaluate<string[]>(
      `[...document.querySelectorAll('#gate-table td.verdict-expected')].map((e) => e.textContent + ' ' + getComputedStyle(e).color)`,
    )
    expect(verdicts).toEqual([
      'expected non-win ✓ (inconclusive, asserted with .not) rgb(87, 96, 106)',
      'expected non-win ✓ (fail, asserted with .not) rgb(87, 96, 106)',
    ])
    expect(expected.errors).toEqual([])
  })

  test('at 800 px wide nothing overflows the window either: wide tables scroll inside their box', async () => {
    const narrow = await (browser as Browser).open(await page.evaluate<string>('location.href'), { width: 800, height: 1000 })
    const [wide, window800] = await narrow.evaluate<[number, number]>('[document.documentElement.scrollWidth, window.innerWidth]')
    expect(window800).toBe(800)
    expect(wide).toBeLessThanOrEqual(window800)
  })

  test(`a full-page screenshot (${join('test-artifacts', 'evidence-index.png')}) has no blank band`, { timeout: 90_000 }, async () => {
    await page.evaluate('window.scrollTo(0, 0)')
    const png = await page.screenshot({ fullPage: true })
    await mkdir(resolve('test-artifacts'), { recursive: true })
    await writeFile(SCREENSHOT, png)
    const image = decodePng(png)
    expect(image.width).toBe(1280)
    expect(image.height).toBe(await page.evaluate<number>('document.documentElement.scrollHeight'))
    const flat = flatness(image, Math.max(4, Math.floor(image.height / 400)))
    // Mostly white with text, tables and charts: never one colour overall, and no band of it flat.
    expect(flat.overall).toBeLessThan(0.95)
    for (const [i, share] of flat.bands.entries()) expect(share, `band ${i + 1} of ${flat.bands.length} is blank`).toBeLessThan(0.995)
    if (process.env.SERVEGATE_UPDATE_SCREENSHOTS === '1') {
      await mkdir(resolve('docs', 'images'), { recursive: true })
      await writeFile(README_IMAGE, await page.screenshot())
    }
  })
})
