/**
 * Every relative link in the README, CONTRIBUTING.md and docs/*.md points at a file of this
 * repository, and a `#fragment` at a heading of that file as GitHub names it. A doc moved or a
 * heading renamed fails here instead of leaving a reader at a 404.
 */
import { existsSync } from 'node:fs'
import { readdir, readFile } from 'node:fs/promises'
import { dirname, join, relative } from 'node:path'
import { fileURLToPath } from 'node:url'
import { describe, expect, test } from 'vitest'

const ROOT = fileURLToPath(new URL('..', import.meta.url))

/** A link as written: the line it is on, its target before `#`, and its fragment. */
interface Link {
  line: number
  path: string
  fragment: string | null
}

/** The markdown's lines with those of fenced blocks blanked, so line numbers stay. */
function outsideFences(markdown: string): string[] {
  let fence: string | null = null
  return markdown.split('\n').map((line) => {
    const open = /^\s*(`{3,}|~{3,})/.exec(line)
    if (fence !== null) {
      if (open !== null && open[1]?.startsWith(fence)) fence = null
      return ''
    }
    if (open !== null) {
      fence = open[1] as string
      return ''
    }
    return line
  })
}

/** The relative links and images of a markdown file (`[text](target)`, `![alt](target)`). */
function relativeLinks(markdown: string): Link[] {
  const links: Link[] = []
  outsideFences(markdown).forEach((line, i) => {
    const text = line.replace(/`[^`]*`/g, '``')
    for (const m of text.matchAll(/!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)) {
      const target = m[1] as string
      if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue
      const hash = target.indexOf('#')
      links.push({
        line: i + 1,
        path: hash < 0 ? target : target.slice(0, hash),
        fragment: hash < 0 ? null : decodeURIComponent(target.slice(hash + 1)),
      })
    }
  })
  return links
}

/** GitHub's anchor for a heading: lowercased, punctuation dropped, spaces to hyphens, repeats numbered. */
function headingAnchors(markdown: string): Set<string> {
  const anchors = new Set<string>()
  const seen = new Map<string, number>()
  for (const line of outsideFences(markdown)) {
    const heading = /^#{1,6}\s+(.+?)\s*#*\s*$/.exec(line)
    if (heading === null) continue
    const slug = (heading[1] as string)
      .replace(/\[([^\]]*)\]\([^)]*\)/g, '$1')
      .toLowerCase()
      .replace(/[^\p{L}\p{N}\s_-]/gu, '')
      .replace(/\s/g, '-')
    const count = seen.get(slug) ?? 0
    seen.set(slug, count + 1)
    anchors.add(count === 0 ? slug : `${slug}-${count}`)
  }
  return anchors
}

async function documents(): Promise<string[]> {
  const docs = (await readdir(join(ROOT, 'docs'))).filter((f) => f.endsWith('.md')).map((f) => join(ROOT, 'docs', f))
  return [join(ROOT, 'README.md'), join(ROOT, 'CONTRIBUTING.md'), ...docs.sort()]
}

describe('relativeLinks and headingAnchors', () => {
  test('read links outside code only, and name headings as GitHub does', () => {
    const md = [
      '# Gates: statistics that decide',
      'See [the calibration](gates.md#calibration-npm-run-benchgate) and ![a chart](images/a.png).',
      '`[not a link](nowhere.md)` and [a site](https://example.com/x.md).',
      '```',
      '[inside a fence](nowhere.md)',
      '```',
      '## Calibration: `npm run bench:gate`',
      "## In @vitest/ui and vitest's HTML reporter",
      '## Calibration: `npm run bench:gate`',
    ].join('\n')
    expect(relativeLinks(md)).toEqual([
      { line: 2, path: 'gates.md', fragment: 'calibration-npm-run-benchgate' },
      { line: 2, path: 'images/a.png', fragment: null },
    ])
    expect([...headingAnchors(md)]).toEqual([
      'gates-statistics-that-decide',
      'calibration-npm-run-benchgate',
      'in-vitestui-and-vitests-html-reporter',
      'calibration-npm-run-benchgate-1',
    ])
  })
})

test('every relative link in README.md, CONTRIBUTING.md and docs/*.md resolves, anchors included', async () => {
  const broken: string[] = []
  let checked = 0
  for (const file of await documents()) {
    const where = relative(ROOT, file)
    if (!existsSync(file)) {
      broken.push(`${where}: missing`)
      continue
    }
    const markdown = await readFile(file, 'utf8')
    for (const link of relativeLinks(markdown)) {
      checked++
      const target = link.path === '' ? file : join(dirname(file), decodeURIComponent(link.path))
      const label = `${where}:${link.line}: ${link.path}${link.fragment === null ? '' : `#${link.fragment}`}`
      if (!existsSync(target)) {
        broken.push(`${label}: no such file`)
        continue
      }
      if (link.fragment === null || link.fragment === '' || !target.endsWith('.md')) continue
      if (!headingAnchors(await readFile(target, 'utf8')).has(link.fragment)) broken.push(`${label}: no such heading`)
    }
  }
  expect(broken).toEqual([])
  expect(checked).toBeGreaterThan(100)
})
