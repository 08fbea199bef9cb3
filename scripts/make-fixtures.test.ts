import { readdir, readFile } from 'node:fs/promises'
import { join, relative } from 'node:path'
import { inflateSync } from 'node:zlib'
import { describe, expect } from 'vitest'
import { test } from '../fixtures/test-context.ts'
import { loadDataset } from '../src/workload/dataset.ts'
import { CHARTS, FIXTURES_DIR, drawChart, fixtureFiles, writeFixtures } from './make-fixtures.ts'

async function listFiles(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { recursive: true, withFileTypes: true })
  return entries
    .filter((e) => e.isFile())
    .map((e) => relative(dir, join(e.parentPath, e.name)))
    .sort()
}

/** The RGB pixel at (x, y) of one of our PNGs (stored IDAT right after the IHDR chunk). */
function pixel(png: Buffer, x: number, y: number): number[] {
  const width = png.readUInt32BE(16)
  const idatLength = png.readUInt32BE(33)
  const raw = inflateSync(png.subarray(41, 41 + idatLength))
  const at = y * (1 + width * 3) + 1 + x * 3
  return [...raw.subarray(at, at + 3)]
}

describe('make-fixtures', () => {
  test('regenerating gives the committed bytes, and nothing is stale', async ({ tmpDir }) => {
    const written = await writeFixtures(tmpDir)
    const committed = (await listFiles(FIXTURES_DIR)).filter((f) => f !== 'README.md')
    expect(committed).toEqual([...written].sort())
    for (const file of written) {
      const fresh = await readFile(join(tmpDir, file))
      const stored = await readFile(join(FIXTURES_DIR, file))
      expect(fresh.equals(stored), `${file} differs from the committed fixture: run npm run fixtures`).toBe(true)
    }
  })

  test('is deterministic within a process', () => {
    const a = fixtureFiles()
    const b = fixtureFiles()
    for (const [name, bytes] of a) expect(bytes.equals(b.get(name) as Buffer)).toBe(true)
  })

  test('the generated datasets load, with every scorer and every chart used', async ({ tmpDir }) => {
    await writeFixtures(tmpDir)
    const arithmetic = await loadDataset(join(tmpDir, 'arithmetic.jsonl'))
    const charts = await loadDataset(join(tmpDir, 'charts.jsonl'))
    expect(arithmetic.rows.length).toBeGreaterThanOrEqual(20)
    for (const dataset of [arithmetic, charts]) {
      expect(new Set(dataset.rows.map((r) => r.scorer))).toEqual(new Set(['exact', 'numeric', 'choice', 'regex']))
    }
    const referenced = new Set(charts.rows.flatMap((r) => r.images))
    expect(referenced.size).toBe(CHARTS.length)
  })

  test('arithmetic answers are right', async () => {
    const { rows } = await loadDataset(join(FIXTURES_DIR, 'arithmetic.jsonl'))
    for (const row of rows) {
      const match = /^What is (\d+) ([+\-×]) (\d+)\?/.exec(row.prompt)
      if (!match) continue
      const [a, b] = [Number(match[1]), Number(match[3])]
      const expected = match[2] === '+' ? a + b : match[2] === '-' ? a - b : a * b
      expect(row.answer, row.id).toBe(expected)
    }
  })

  test('each bar is drawn to its value: coloured at its top pixel, white just above', () => {
    // Geometry of drawChart: x axis at y = 55, 48 px of plot, bars from x = 13 in equal slots.
    for (const spec of CHARTS) {
      const png = drawChart(spec)
      const slot = Math.floor(83 / spec.values.length)
      const barWidth = Math.round(slot * 0.6)
      spec.values.forEach((value, i) => {
        const x = 13 + i * slot + Math.floor((slot - barWidth) / 2) + 1
        const top = 55 - (value * 48) / spec.max
        expect(pixel(png, x, top), `${spec.name} bar ${i} top`).toEqual([...(spec.colours[i] as readonly number[])])
        expect(pixel(png, x, top - 1), `${spec.name} bar ${i} above`).not.toEqual([...(spec.colours[i] as readonly number[])])
      })
      expect(pixel(png, 95, 0)).toEqual([255, 255, 255])
    }
  })

  test('chart answers agree with the chart specs', async () => {
    const { rows } = await loadDataset(join(FIXTURES_DIR, 'charts.jsonl'))
    const tallest = rows.find((r) => r.id === 'chart-1-tallest')
    expect(tallest?.answer).toBe('C')
    const values = CHARTS[0]?.values as readonly number[]
    expect(values.indexOf(Math.max(...values))).toBe(2)
  })
})
