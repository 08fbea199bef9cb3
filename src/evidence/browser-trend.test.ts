/**
 * The trend of main on the evidence page, as headless Chromium draws it: the section, its table
 * and its chart, nothing wider than the window at 1280 or 800 px, and no red (red marks only what
 * blocks promotion, and this run's point is a mark, not a verdict).
 */
import { writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { pathToFileURL } from 'node:url'
import { afterAll, describe, expect } from 'vitest'
import { type Browser, findChromium, launchBrowser, MISSING_CHROMIUM, processesNaming } from '../../fixtures/chromium.ts'
import { sampleEvidence } from '../../fixtures/evidence-fixture.ts'
import { test } from '../../fixtures/test-context.ts'
import { HISTORY_SCHEMA_ID, type HistoryRun, type Testbed } from '../schema/noise.ts'
import { boardFiles, renderBoard } from './board.ts'
import { renderCharts } from './charts.ts'
import { historyTrends } from './history-of-main.ts'
import { renderHtml } from './html.ts'

const chromium = await findChromium()
const skipped = chromium === null && process.env.SERVEGATE_REQUIRE_BROWSER !== '1'

const TESTBED: Testbed = {
  runner: 'h100-ci-pool-with-a-long-label',
  gpu: { model: 'NVIDIA H100 80GB HBM3', count: 8 },
  driver: '550.54.15',
  engine: { kind: 'vllm', version: '0.11.0' },
  model: 'meta-llama/Llama-3.1-8B-Instruct',
  cell: { concurrency: 64, requests: 512, maxTokens: 256 },
}

/** Thirty runs of main and this run: two cells' arms, decode and TTFT p95 each. */
function runs(): { main: HistoryRun[]; current: HistoryRun } {
  const run = (i: number): HistoryRun => ({
    schema: HISTORY_SCHEMA_ID,
    commit: `c${i}`,
    branch: 'main',
    at: new Date(Date.UTC(2026, 10, 1 + i)).toISOString(),
    cells: ['qwen3-8b-summary-ctx8192-c16/baseline', 'qwen3-8b-summary-ctx8192-c16/candidate'].map((cell, k) => ({
      cell,
      testbed: TESTBED,
      metrics: {
        decodeTokPerS: { value: (60 + 20 * k) * (1 + 0.03 * Math.sin(i)), relativeSe: 0.004 },
        'ttftMs p95': { value: 180 * (1 + 0.05 * Math.cos(i)), relativeSe: i % 3 === 0 ? null : 0.02 },
      },
    })),
  })
  return { main: Array.from({ length: 30 }, (_, i) => run(i)), current: { ...run(31), branch: 'pr', commit: 'pr' } }
}

describe.skipIf(skipped)(`the trend of main in headless Chromium${skipped ? ` (skipped: ${MISSING_CHROMIUM})` : ''}`, () => {
  let browser: Browser | null = null
  let home = ''
  afterAll(async () => {
    await browser?.close()
    if (home !== '') expect(await processesNaming(home)).toEqual([])
  })

  test('its section, table and chart, nothing wider than the window, and no red', { timeout: 90_000 }, async ({ tmpDir }) => {
    const { main, current } = runs()
    const history = {
      path: 'bench-history/main.jsonl',
      branch: 'pr',
      appended: false,
      reason: 'a run on pr, not main',
      trend: historyTrends(main, current),
    }
    const index = { ...sampleEvidence(), history }
    const charts = await renderCharts(index)
    await writeFile(join(tmpDir, 'index.html'), renderHtml(index, renderBoard(index, boardFiles(index)), charts))
    home = join(tmpDir, 'chromium')
    browser = await launchBrowser(chromium as string, home)
    for (const width of [1280, 800]) {
      const page = await browser.open(pathToFileURL(join(tmpDir, 'index.html')).href, { width, height: 1000 })
      const shown = await page.evaluate<{ rows: number; chart: number; text: string; fits: boolean; red: string[] }>(
        `(() => { const s = document.getElementById('trend');
          const red = (c) => { const m = /rgba?\\((\\d+), (\\d+), (\\d+)/.exec(c || ''); if (m === null) return false;
            const [r, g, b] = m.slice(1, 4).map(Number); return r >= 90 && r > 2 * g && r > 2 * b };
          return { rows: s.querySelectorAll('#trend-table tbody tr').length, chart: s.querySelectorAll('figure > svg').length,
            text: s.querySelector('p').textContent, fits: document.documentElement.scrollWidth <= window.innerWidth,
            red: [...s.querySelectorAll('*')].filter((e) => { const c = getComputedStyle(e); return [c.color, c.fill, c.stroke, c.backgroundColor].some(red) }).map((e) => e.tagName) } })()`,
      )
      expect(shown).toEqual({
        rows: 4,
        chart: 1,
        text: 'This run was not appended to the history of main (bench-history/main.jsonl): a run on pr, not main.',
        fits: true,
        red: [],
      })
      expect(page.errors).toEqual([])
    }
  })
})
