/**
 * End to end: the evidence page as a browser draws it. Headless Chromium loads index.html from
 * a temporary evidence directory, dumps its DOM and takes a screenshot into test-artifacts/.
 */
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { pathToFileURL } from 'node:url'
import { execa } from 'execa'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { onPath } from '../engines/launch.ts'
import type { EvidenceIndex } from '../schema/evidence.ts'
import { renderCharts } from './charts.ts'
import { sampleEvidence } from '../../fixtures/evidence-fixture.ts'
import { renderHtml } from './html.ts'

const SCREENSHOT = resolve('test-artifacts', 'evidence-index.png')
const PNG_SIGNATURE = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a])
const MISSING =
  "no Chromium found (SERVEGATE_CHROMIUM, or chromium / chromium-browser on PATH): install Debian's chromium (apt-get install chromium)"

/** `SERVEGATE_CHROMIUM` (a path or a name), else `chromium` or `chromium-browser` on PATH. */
async function findChromium(): Promise<string | null> {
  const names = process.env.SERVEGATE_CHROMIUM ? [process.env.SERVEGATE_CHROMIUM] : ['chromium', 'chromium-browser']
  for (const name of names) {
    const found = await onPath(name, process.env.PATH)
    if (found !== null) return found
  }
  return null
}

const chromium = await findChromium()
const required = process.env.SERVEGATE_REQUIRE_BROWSER === '1'

/** A board as the reporter writes it: a Markdown table of the cells. */
function boardOf(index: EvidenceIndex): string {
  const rows = index.cells.map((c) => `| \`${c.id}\` | ${c.disposition} | ${c.reason ?? ''} |`)
  return ['## Board', '', '| cell | disposition | reason |', '|---|---|---|', ...rows, ''].join('\n')
}

/**
 * Runs headless Chromium with `home` as its HOME and profile and returns its stdout. Afterwards,
 * whatever happened, its process group is killed (zygote, renderers) and so is any process still
 * naming `home`: its crash handlers detach from the group, and HOME keeps their database in it.
 */
async function runChromium(executable: string, home: string, args: readonly string[]): Promise<string> {
  const child = execa(
    executable,
    [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--no-first-run',
      '--no-default-browser-check',
      '--disable-extensions',
      `--user-data-dir=${join(home, 'profile')}`,
      ...args,
    ],
    {
      env: { HOME: home },
      detached: true,
      cleanup: true,
      forceKillAfterDelay: 2_000,
      timeout: 60_000,
      reject: false,
      stdin: 'ignore',
    },
  )
  try {
    const result = await child
    if (result.exitCode !== 0)
      throw new Error(`chromium ${args.join(' ')} exited with ${result.exitCode ?? result.signal}: ${result.stderr.slice(-2000)}`)
    return result.stdout
  } finally {
    if (child.pid !== undefined) kill(-child.pid)
    for (const pid of await processesNaming(home)) kill(pid)
  }
}

function kill(pid: number): void {
  try {
    process.kill(pid, 'SIGKILL')
  } catch {
    // Already gone.
  }
}

/** Live processes whose command line contains `text` (Linux /proc; a zombie's is empty). */
async function processesNaming(text: string): Promise<number[]> {
  const entries = await readdir('/proc').catch(() => [])
  const pids: number[] = []
  for (const entry of entries.filter((e) => /^\d+$/.test(e))) {
    const cmdline = await readFile(join('/proc', entry, 'cmdline'), 'utf8').catch(() => '')
    if (cmdline.includes(text)) pids.push(Number(entry))
  }
  return pids
}

const skipped = chromium === null && !required

describe.skipIf(skipped)(`the evidence page in headless Chromium${skipped ? ` (skipped: ${MISSING})` : ''}`, () => {
  let dir = ''
  let page = ''
  beforeAll(async () => {
    if (chromium === null) throw new Error(`SERVEGATE_REQUIRE_BROWSER=1 but ${MISSING}`)
    dir = await mkdtemp(join(tmpdir(), 'servegate-evidence-'))
    const index = sampleEvidence()
    const charts = await renderCharts(index)
    await mkdir(join(dir, 'charts'))
    for (const chart of charts) await writeFile(join(dir, chart.file), chart.svg)
    page = pathToFileURL(join(dir, 'index.html')).href
    await writeFile(join(dir, 'index.html'), renderHtml(index, boardOf(index), charts))
  })
  afterAll(async () => {
    if (dir !== '') await rm(dir, { recursive: true, force: true })
  })

  test('its DOM has the board as a table and the five charts as inline SVG', { timeout: 90_000 }, async () => {
    const home = join(dir, 'chromium-dom')
    const dom = await runChromium(chromium as string, home, ['--dump-dom', page])
    await expect.poll(() => processesNaming(home)).toEqual([])
    expect(dom).toContain('<p class="promotion not-promotable">Not promotable</p>')
    expect(dom).toMatch(/<table>\s*<thead>\s*<tr>\s*<th>cell<\/th>\s*<th>disposition<\/th>/)
    expect(dom.match(/<tr>/g)).toHaveLength(1 + sampleEvidence().cells.length)
    expect(dom).toContain('<code>qwen3-8b-summary-ctx8192-c16</code>')
    const figures = [
      ...dom.matchAll(/<figure id="(chart-[a-z-]+)">\s*<svg [^>]*>[\s\S]*?<\/svg>\s*<figcaption>([^<]*)<\/figcaption>/g),
    ].map((m) => [m[1], m[2]])
    expect(figures).toEqual([
      ['chart-throughput-by-concurrency', 'Output throughput by concurrency'],
      ['chart-decode-ratio-heatmap', 'Decode tok/s p50, candidate ÷ baseline'],
      ['chart-prefill-by-concurrency', 'Effective prefill tok/s p50 by concurrency'],
      ['chart-serving-tradeoff', 'Serving trade-off: decode tok/s per user against aggregate output tok/s'],
      ['chart-goodput-by-rate', 'Open loop: share of requests meeting every SLO by offered rate (no data)'],
    ])
    expect(dom).not.toContain('<script')
  })

  test(`a screenshot of it lands in ${join('test-artifacts', 'evidence-index.png')}`, { timeout: 90_000 }, async () => {
    await mkdir(resolve('test-artifacts'), { recursive: true })
    await rm(SCREENSHOT, { force: true })
    await runChromium(chromium as string, join(dir, 'chromium-shot'), [
      '--hide-scrollbars',
      '--window-size=1280,2000',
      `--screenshot=${SCREENSHOT}`,
      page,
    ])
    const png = await readFile(SCREENSHOT)
    expect(png.subarray(0, 8)).toEqual(PNG_SIGNATURE)
    // IHDR: width and height, big-endian, right after the signature and the chunk header.
    expect([png.readUInt32BE(16), png.readUInt32BE(20)]).toEqual([1280, 2000])
    // A blank page of this size compresses to a few KiB; text and four charts do not.
    expect(png.length).toBeGreaterThan(50_000)
  })
})
