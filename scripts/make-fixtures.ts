import { mkdir, writeFile } from 'node:fs/promises'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { createRandom, mixSeed } from '../src/random.ts'
import type { DatasetRowInput } from '../src/workload/dataset.ts'
import { encodePng } from './png.ts'

/** Fixed so that re-running the script rewrites identical bytes. */
const SEED = 17

/** Where `npm run fixtures` writes. */
export const FIXTURES_DIR = fileURLToPath(new URL('../fixtures/datasets/', import.meta.url))

type Rgb = readonly [number, number, number]

const WHITE: Rgb = [255, 255, 255]
const INK: Rgb = [32, 32, 32]
const GRID: Rgb = [222, 222, 222]
/** Distinct colours (the tab10 palette), one per bar. */
const BLUE: Rgb = [31, 119, 180]
const ORANGE: Rgb = [255, 127, 14]
const GREEN: Rgb = [44, 160, 44]
const RED: Rgb = [214, 39, 40]
const PURPLE: Rgb = [148, 103, 189]

/** A 3×5 bitmap font: five rows of three pixels, `#` set. */
const GLYPHS: Record<string, string> = {
  '0': '### #.# #.# #.# ###',
  '1': '.#. ##. .#. .#. ###',
  '2': '### ..# ### #.. ###',
  '3': '### ..# ### ..# ###',
  '4': '#.# #.# ### ..# ..#',
  '5': '### #.. ### ..# ###',
  '6': '### #.. ### #.# ###',
  '7': '### ..# ..# ..# ..#',
  '8': '### #.# ### #.# ###',
  '9': '### #.# ### ..# ###',
  A: '.#. #.# ### #.# #.#',
  B: '##. #.# ##. #.# ##.',
  C: '.## #.. #.. #.. .##',
  D: '##. #.# #.# #.# ##.',
  E: '### #.. ##. #.. ###',
}

class Raster {
  readonly width: number
  readonly height: number
  readonly rgb: Uint8Array
  constructor(width: number, height: number, background: Rgb) {
    this.width = width
    this.height = height
    this.rgb = new Uint8Array(width * height * 3)
    this.fill(0, 0, width, height, background)
  }

  fill(x: number, y: number, w: number, h: number, colour: Rgb): void {
    for (let row = Math.max(0, y); row < Math.min(this.height, y + h); row++) {
      for (let col = Math.max(0, x); col < Math.min(this.width, x + w); col++) {
        this.rgb.set(colour, (row * this.width + col) * 3)
      }
    }
  }

  /** Draws text in the 3×5 font with its top-left corner at (x, y), one pixel between glyphs. */
  text(x: number, y: number, text: string, colour: Rgb): void {
    for (const [index, char] of [...text].entries()) {
      const rows = GLYPHS[char]?.split(' ')
      if (!rows) throw new Error(`no glyph for ${JSON.stringify(char)}`)
      for (const [dy, bits] of rows.entries()) {
        for (const [dx, bit] of [...bits].entries()) if (bit === '#') this.fill(x + index * 4 + dx, y + dy, 1, 1, colour)
      }
    }
  }
}

/** A bar chart: bars labelled A, B, C… left to right on a y axis from 0 to `max`. */
export interface ChartSpec {
  name: string
  values: readonly number[]
  colours: readonly Rgb[]
  max: number
  step: number
}

const WIDTH = 96
const HEIGHT = 64
const PLOT_HEIGHT = 48
const AXIS_X = 12
const AXIS_Y = 55

export const CHARTS: readonly ChartSpec[] = [
  { name: 'chart-1', values: [7, 4, 10, 6], colours: [BLUE, ORANGE, GREEN, RED], max: 12, step: 2 },
  { name: 'chart-2', values: [20, 8, 14, 16], colours: [GREEN, PURPLE, BLUE, ORANGE], max: 24, step: 4 },
  { name: 'chart-3', values: [2, 5, 4], colours: [RED, BLUE, GREEN], max: 6, step: 1 },
  { name: 'chart-4', values: [35, 50, 15, 25], colours: [PURPLE, GREEN, ORANGE, BLUE], max: 60, step: 10 },
  { name: 'chart-5', values: [10, 15, 25, 20], colours: [ORANGE, RED, PURPLE, GREEN], max: 30, step: 5 },
]

const letter = (index: number): string => String.fromCharCode(65 + index)

/** Draws a chart: white background, grid lines and labelled ticks, axes, bars, letters under bars. */
export function drawChart(spec: ChartSpec): Buffer {
  const image = new Raster(WIDTH, HEIGHT, WHITE)
  const pixels = (value: number): number => {
    const exact = (value * PLOT_HEIGHT) / spec.max
    // Bars and ticks must land on whole pixels, or the chart would not show the reference value.
    if (!Number.isInteger(exact)) throw new Error(`${spec.name}: ${value} is not a whole number of pixels`)
    return exact
  }
  for (let tick = 0; tick <= spec.max; tick += spec.step) {
    const y = AXIS_Y - pixels(tick)
    image.fill(AXIS_X + 1, y, WIDTH - AXIS_X - 1, 1, GRID)
    image.fill(AXIS_X - 1, y, 1, 1, INK)
    const label = String(tick)
    image.text(AXIS_X - 2 - label.length * 4, y - 2, label, INK)
  }
  const slot = Math.floor((WIDTH - AXIS_X - 1) / spec.values.length)
  const barWidth = Math.round(slot * 0.6)
  for (const [index, value] of spec.values.entries()) {
    const left = AXIS_X + 1 + index * slot + Math.floor((slot - barWidth) / 2)
    const height = pixels(value)
    image.fill(left, AXIS_Y - height, barWidth, height, spec.colours[index] as Rgb)
    image.text(left + Math.floor((barWidth - 3) / 2), AXIS_Y + 3, letter(index), INK)
  }
  image.fill(AXIS_X, AXIS_Y - PLOT_HEIGHT - 2, 1, PLOT_HEIGHT + 3, INK)
  image.fill(AXIS_X, AXIS_Y, WIDTH - AXIS_X, 1, INK)
  return encodePng(image)
}

/** Arithmetic questions from the seeded PRNG, plus hand-written rows for the other scorers. */
export function arithmeticRows(): DatasetRowInput[] {
  const rows: DatasetRowInput[] = []
  const operations = [
    { id: 'add', symbol: '+', apply: (a: number, b: number) => a + b, range: [10, 99] },
    { id: 'sub', symbol: '-', apply: (a: number, b: number) => a - b, range: [10, 99] },
    { id: 'mul', symbol: '×', apply: (a: number, b: number) => a * b, range: [3, 29] },
  ] as const
  for (const [o, op] of operations.entries()) {
    const random = createRandom(mixSeed(SEED, o))
    const operand = () => op.range[0] + Math.floor(random() * (op.range[1] - op.range[0] + 1))
    for (let i = 1; i <= 6; i++) {
      const a = operand()
      const b = operand()
      rows.push({
        id: `${op.id}-${String(i).padStart(2, '0')}`,
        prompt: `What is ${a} ${op.symbol} ${b}? Reply with the number only.`,
        answer: op.apply(a, b),
        scorer: 'numeric',
      })
    }
  }
  rows.push(
    {
      id: 'div-01',
      prompt: 'What is 100 ÷ 7, rounded to two decimal places? Reply with the number only.',
      answer: 14.29,
      scorer: 'numeric',
      tolerance: 0.01,
    },
    {
      id: 'seconds-per-day',
      prompt: 'How many seconds are there in one day? Reply with the number only.',
      answer: 86400,
      scorer: 'numeric',
      tolerancePct: 1,
    },
    {
      id: 'exact-word',
      prompt: 'Write the number 19 as an English word, in lowercase. Reply with the word only.',
      answer: 'nineteen',
      scorer: 'exact',
    },
    { id: 'exact-parity', prompt: 'Is 7 × 13 odd or even? Reply with one word.', answer: 'odd', scorer: 'exact' },
    { id: 'exact-compare', prompt: 'Which is larger, 0.5 or 0.45? Reply with the number only.', answer: '0.5', scorer: 'exact' },
    {
      id: 'choice-largest',
      prompt: 'Which is largest? (A) 7 × 8 (B) 6 × 9 (C) 5 × 11 (D) 60 - 5. Answer with the letter.',
      answer: 'A',
      scorer: 'choice',
      choices: ['A', 'B', 'C', 'D'],
    },
    {
      id: 'choice-prime',
      prompt: 'Which number is prime? (A) 21 (B) 27 (C) 29 (D) 33 (E) 39. Answer with the letter.',
      answer: 'C',
      scorer: 'choice',
    },
    {
      id: 'regex-roman',
      prompt: 'Write 1000 in Roman numerals. Reply with the numeral only.',
      answer: 'M',
      scorer: 'regex',
      pattern: '^\\W*M\\W*$',
    },
    {
      id: 'regex-percent',
      prompt: 'Write 3/4 as a percentage.',
      answer: '75%',
      scorer: 'regex',
      pattern: '\\b75(\\.0+)?\\s*(%|percent)',
      flags: 'i',
    },
  )
  return rows
}

const describeBars = (count: number): string =>
  `The image is a bar chart; its bars are labelled ${letter(0)}–${letter(count - 1)} from left to right.`

/** Questions about the charts; numeric answers allow half a grid step, since charts are read by eye. */
export function chartRows(): DatasetRowInput[] {
  const rows: DatasetRowInput[] = []
  const chart = (name: string) => {
    const spec = CHARTS.find((c) => c.name === name)
    if (!spec) throw new Error(`no chart ${name}`)
    const letters = spec.values.map((_, i) => letter(i))
    const order = spec.values.map((value, i) => ({ value, letter: letter(i) })).sort((x, y) => y.value - x.value)
    return {
      spec,
      letters,
      image: `charts/${name}.png`,
      intro: describeBars(spec.values.length),
      tallest: (order[0] as { letter: string }).letter,
      shortest: (order.at(-1) as { letter: string }).letter,
      order: order.map((bar) => bar.letter),
      value: (bar: string) => spec.values[letters.indexOf(bar)] as number,
    }
  }
  const tallest = (name: string) => {
    const c = chart(name)
    rows.push({
      id: `${name}-tallest`,
      prompt: `${c.intro} Which bar is tallest? Answer with its letter.`,
      answer: c.tallest,
      scorer: 'choice',
      choices: c.letters,
      images: [c.image],
    })
  }
  const shortest = (name: string) => {
    const c = chart(name)
    rows.push({
      id: `${name}-shortest`,
      prompt: `${c.intro} Which bar is shortest? Answer with its letter.`,
      answer: c.shortest,
      scorer: 'choice',
      choices: c.letters,
      images: [c.image],
    })
  }
  const value = (name: string, bar: string, relative = false) => {
    const c = chart(name)
    const answer = c.value(bar)
    const half = c.spec.step / 2
    rows.push({
      id: `${name}-value-${bar.toLowerCase()}`,
      prompt: `${c.intro} What is the value of bar ${bar}? Reply with a number.`,
      answer,
      scorer: 'numeric',
      ...(relative ? { tolerancePct: (half / answer) * 100 } : { tolerance: half }),
      images: [c.image],
    })
  }
  tallest('chart-1')
  value('chart-1', 'B')
  tallest('chart-2')
  value('chart-2', 'C')
  tallest('chart-3')
  shortest('chart-3')
  value('chart-3', 'C')
  tallest('chart-4')
  value('chart-4', 'D')
  const c4 = chart('chart-4')
  rows.push({
    id: 'chart-4-order',
    prompt: `${c4.intro} List the bars from tallest to shortest, as letters separated by commas.`,
    answer: c4.order.join(', '),
    scorer: 'regex',
    pattern: `^\\W*${c4.order.join('\\W+')}\\W*$`,
    images: [c4.image],
  })
  shortest('chart-5')
  value('chart-5', 'A', true)
  const [first, second] = [chart('chart-1'), chart('chart-5')]
  rows.push({
    id: 'two-charts-bar-a',
    prompt:
      'Two bar charts follow, each with its own y-axis scale and bars labelled from the left starting at A. ' +
      'Is the value of bar A larger in the first chart or in the second? Reply with one word: first or second.',
    answer: first.value('A') > second.value('A') ? 'first' : 'second',
    scorer: 'exact',
    images: [first.image, second.image],
  })
  return rows
}

const jsonl = (rows: readonly DatasetRowInput[]): Buffer => Buffer.from(rows.map((row) => `${JSON.stringify(row)}\n`).join(''))

/** Every generated fixture: path relative to `fixtures/datasets/` → bytes. */
export function fixtureFiles(): Map<string, Buffer> {
  const files = new Map<string, Buffer>()
  files.set('arithmetic.jsonl', jsonl(arithmeticRows()))
  files.set('charts.jsonl', jsonl(chartRows()))
  for (const spec of CHARTS) files.set(`charts/${spec.name}.png`, drawChart(spec))
  return files
}

/** Writes every fixture under `dir`; returns the relative paths written. */
export async function writeFixtures(dir: string): Promise<string[]> {
  const files = fixtureFiles()
  for (const [relative, bytes] of files) {
    await mkdir(dirname(join(dir, relative)), { recursive: true })
    await writeFile(join(dir, relative), bytes)
  }
  return [...files.keys()]
}

if (import.meta.main) {
  const written = await writeFixtures(FIXTURES_DIR)
  console.log(`wrote ${written.length} files under ${FIXTURES_DIR}`)
}
