import { existsSync } from 'node:fs'
import { readdir, readFile } from 'node:fs/promises'
import { join, relative } from 'node:path'
import { describe, expect, test } from 'vitest'

const COPIES = join(import.meta.dirname, '../../fixtures/reference/wild')
const ORIGINALS = join(import.meta.dirname, '../../../shared/reference/wild')

async function filesUnder(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { recursive: true, withFileTypes: true })
  return entries
    .filter((e) => e.isFile())
    .map((e) => relative(dir, join(e.parentPath, e.name)))
    .sort()
}

// The real files the importer and scraper tests read are copies kept in the repository; where the
// originals are beside it, the copies must be the same bytes and the same set.
describe.runIf(existsSync(ORIGINALS))('fixtures/reference/wild is a true copy of ../shared/reference/wild', () => {
  test('the same files, byte for byte', async () => {
    const [copies, originals] = await Promise.all([filesUnder(COPIES), filesUnder(ORIGINALS)])
    expect(copies).toEqual(originals)
    for (const file of originals) {
      const [copy, original] = await Promise.all([readFile(join(COPIES, file)), readFile(join(ORIGINALS, file))])
      expect(copy.equals(original), file).toBe(true)
    }
  })
})
