/**
 * End to end: @vitest/ui as a reviewer opens it. fixtures/ui-suite (a gate that passes, one left
 * undecided that passes by its policy, one that fails) runs under `vitest bench` with vitest's
 * HTML reporter, which is @vitest/ui reading a report instead of a live server; `singleFile`
 * makes it one file that opens from disk, so no server listens at any point. Headless Chromium
 * (over the DevTools pipe) opens each test in the UI and reads its annotations and the chart
 * image. `SERVEGATE_UPDATE_SCREENSHOTS=1` also writes the README's docs/images/vitest-ui.png.
 */
import { mkdir, readFile, writeFile } from 'node:fs/promises'
import { join, resolve } from 'node:path'
import { pathToFileURL } from 'node:url'
import { execa } from 'execa'
import { afterAll, beforeAll, describe, expect } from 'vitest'
import { test } from '../../fixtures/test-context.ts'
import {
  type Browser,
  decodePng,
  findChromium,
  flatness,
  launchBrowser,
  MISSING_CHROMIUM,
  processesNaming,
} from '../../fixtures/chromium.ts'

const ROOT = resolve(import.meta.dirname, '..', '..')
const VITEST = join(ROOT, 'node_modules', 'vitest', 'vitest.mjs')
const SCREENSHOT = resolve('test-artifacts', 'vitest-ui.png')
const README_IMAGE = resolve('docs', 'images', 'vitest-ui.png')

const chromium = await findChromium()
const required = process.env.SERVEGATE_REQUIRE_BROWSER === '1'
const skipped = chromium === null && !required

/** A test of the fixture suite as its annotations reporter wrote it. */
interface ReportedTest {
  file: string
  id: string
  name: string
  state: string
  annotations: Array<{ type: string; message: string; attachment?: { contentType?: string; bodyEncoding?: string; body?: string } }>
}

const PASSING = 'wins decode by 5%'
const UNDECIDED = 'wins decode on four requests: undecided, passes by its policy'
const FAILING = 'a slower candidate wins decode by 5%'

let out = ''
let tests: ReportedTest[] = []
const byName = (name: string) => tests.find((t) => t.name === name) as ReportedTest

test.beforeAll(async ({ tmpDir }) => {
  out = tmpDir
  const run = await execa(process.execPath, [VITEST, 'bench', '--run', '--root', 'fixtures/ui-suite'], {
    cwd: ROOT,
    env: { SERVEGATE_UI_OUT: out, FORCE_COLOR: '0', GITHUB_STEP_SUMMARY: '' },
    reject: false,
    timeout: 150_000,
    cleanup: true,
  })
  // One test fails on purpose.
  expect(run.exitCode, run.stdout + run.stderr).toBe(1)
  tests = JSON.parse(await readFile(join(out, 'annotations.json'), 'utf8')) as ReportedTest[]
}, 180_000)

describe('annotations as vitest reports them', () => {
  test('each verdict is typed by its outcome: notice for pass, warning for undecided, error for fail', () => {
    expect(tests.map((t) => [t.name, t.state])).toEqual([
      [PASSING, 'passed'],
      [UNDECIDED, 'passed'],
      [FAILING, 'failed'],
    ])
    const verdicts = (t: ReportedTest) =>
      t.annotations
        .filter((a) => a.message.startsWith('toWinDecode '))
        .map((a) => [a.type, /: (pass|inconclusive|fail) \(/.exec(a.message)?.[1]])
    expect(verdicts(byName(PASSING))).toEqual([['notice', 'pass']])
    expect(verdicts(byName(UNDECIDED))).toEqual([['warning', 'inconclusive']])
    expect(verdicts(byName(FAILING))).toEqual([['error', 'fail']])
  })

  test('every test has its cell chart as an SVG in UTF-8, the failing one too', () => {
    for (const t of tests) {
      const charts = t.annotations.filter((a) => a.attachment !== undefined)
      expect(charts, t.name).toHaveLength(1)
      expect(charts[0]).toMatchObject({ type: 'notice', message: expect.stringMatching(/: latency by arm$/) })
      expect(charts[0]?.attachment).toMatchObject({ contentType: 'image/svg+xml', bodyEncoding: 'utf-8' })
      expect(charts[0]?.attachment?.body).toMatch(/^<svg[\s\S]*<\/svg>\s*$/)
    }
  })
})

describe.skipIf(skipped)(`@vitest/ui in headless Chromium${skipped ? ` (skipped: ${MISSING_CHROMIUM})` : ''}`, () => {
  let home = ''
  let browser: Browser | null = null
  beforeAll(async () => {
    if (chromium === null) throw new Error(`SERVEGATE_REQUIRE_BROWSER=1 but ${MISSING_CHROMIUM}`)
    home = join(out, 'chromium')
    browser = await launchBrowser(chromium, home)
  }, 60_000)
  afterAll(async () => {
    await browser?.close()
    if (home !== '') expect(await processesNaming(home)).toEqual([])
  })

  /** Opens a test's report in the UI and waits until its annotations are drawn. */
  async function openTest(t: ReportedTest) {
    const url = `${pathToFileURL(join(out, 'html', 'index.html')).href}#/?file=${encodeURIComponent(t.file)}&test=${encodeURIComponent(t.id)}`
    const page = await (browser as Browser).open(url, { width: 1280, height: 900 })
    const notes = async () =>
      page.evaluate<Array<{ type: string; message: string; images: number[] }>>(
        `[...document.querySelectorAll('[role=note]')].map((n) => ({
          type: n.firstElementChild.innerText.trim().split('\\n')[0],
          message: n.innerText,
          images: [...n.querySelectorAll('img')].map((i) => (i.complete ? i.naturalWidth : -1)) }))`,
      )
    await expect.poll(async () => (await notes()).length, { timeout: 20_000 }).toBe(t.annotations.length)
    // Images decode after they are inserted: wait until each has its size.
    await expect.poll(async () => (await notes()).flatMap((n) => n.images).every((w) => w > 0), { timeout: 10_000 }).toBe(true)
    return { page, notes: await notes() }
  }

  test(
    'each test shows its annotations with their types, and the chart image loads (the failing test included)',
    { timeout: 90_000 },
    async () => {
      for (const t of tests) {
        const { notes } = await openTest(t)
        expect(
          notes.map((n) => n.type),
          t.name,
        ).toEqual(t.annotations.map((a) => a.type))
        const chart = notes.find((n) => n.images.length > 0)
        expect(chart?.message, t.name).toMatch(/: latency by arm/)
        expect(chart?.images[0], t.name).toBeGreaterThan(100)
      }
    },
  )

  test(
    `the failing test's report, screenshotted into ${join('test-artifacts', 'vitest-ui.png')}, is not blank`,
    { timeout: 60_000 },
    async () => {
      const { page, notes } = await openTest(byName(FAILING))
      // The cell's figures, its chart, the verdict, and the assumed launch-noise floor's warning.
      expect(notes.map((n) => n.type)).toEqual(['notice', 'notice', 'error', 'warning'])
      expect(notes[3]?.message).toMatch(/launch noise assumed at 2% a launch.*servegate calibrate/)
      await page.evaluate(`document.querySelector('[role=note] img').scrollIntoView({ block: 'center' })`)
      const png = await page.screenshot()
      await mkdir(resolve('test-artifacts'), { recursive: true })
      await writeFile(SCREENSHOT, png)
      const image = decodePng(png)
      expect([image.width, image.height]).toEqual([1280, 900])
      const flat = flatness(image, 4)
      expect(flat.overall).toBeLessThan(0.9)
      for (const share of flat.bands) expect(share).toBeLessThan(0.995)
      if (process.env.SERVEGATE_UPDATE_SCREENSHOTS === '1') {
        await mkdir(resolve('docs', 'images'), { recursive: true })
        await writeFile(README_IMAGE, png)
      }
    },
  )
})
