/**
 * The errors the docs quote are the ones servegate raises, word for word: every fenced block of
 * the README and docs/*.md whose first line is an error as a user meets it (`ServegateError
 * [CODE]: …` or `TypeError: …` in vitest's output, `servegate: …` on the CLI's stderr; see
 * fixtures/docs-quotes.ts) must equal one that a producer below raises for real. A message
 * reworded in the code, or a quote edited by hand, fails here; so does a producer whose message
 * no doc quotes any more, so the list stays the docs' quotes.
 */
import { readdir, readFile } from 'node:fs/promises'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { describe, expect, test } from 'vitest'
import { cli } from '../fixtures/cli.ts'
import { fencedBlocks, missingLines, quotedErrors, quotedOutput } from '../fixtures/docs-quotes.ts'
import { pair } from './declare/cell-declarations.ts'
import { engine } from './declare/engine-handles.ts'
import type { PairSpec } from './declare/cell-declarations.ts'
import { failedCellRecord } from './runner/run-record.ts'

const ROOT = fileURLToPath(new URL('..', import.meta.url))

/** Where the docs' examples run: the working directory in a message is shown as this. */
const SHOWN_CWD = '/home/me/engine'

/** An error as vitest prints it: its name, then its message. */
function asShown(declare: () => unknown): string {
  try {
    declare()
  } catch (error) {
    return `${(error as Error).name}: ${(error as Error).message}`.replaceAll(process.cwd(), SHOWN_CWD)
  }
  throw new Error('expected it to throw')
}

/** What the CLI prints on stderr for `argv`. */
async function stderrOf(argv: string[]): Promise<string> {
  return (await cli(argv)).stderr.trimEnd()
}

const baseline = engine.sim({ name: 'baseline' })
const candidate = engine.sim({ name: 'candidate' })

/** Each quoted error, raised for real: what the docs' example does, and what it prints. */
const PRODUCERS: Record<string, () => string | Promise<string>> = {
  'a mistyped cell option': () => asShown(() => pair({ baseline, candidate, id: 'tiny-c4', concurency: 4 } as PairSpec)),
  'a missing dataset': () =>
    asShown(() => pair({ baseline, candidate, id: 'qa', workload: { kind: 'dataset', datasetPath: 'data/qa.jsonl' } })),
  'a bad matcher option': () => {
    // Options are checked before the cells are read: two arms that measured nothing will do.
    const failed = failedCellRecord(
      { baseUrl: 'http://127.0.0.1:8000', model: 'm', requests: 1 },
      { code: 'CONNECT_FAILED', message: 'refused', httpStatus: null, retryAfterS: null },
    )
    try {
      expect({ kind: 'pair', id: 'p', baseline: [failed], candidate: [failed], launchOrder: ['baseline', 'candidate'] }).toWinDecode({
        margin: -2,
      })
    } catch (error) {
      return `${(error as Error).name}: ${(error as Error).message}`
    }
    throw new Error('expected toWinDecode to throw')
  },
  'a mistyped CLI flag': () => stderrOf(['run', '--base-url', 'http://127.0.0.1:8000', '--model', 'm', '--concurency', '8']),
}

/** The markdown files the checks read: the README and every page of docs/. */
async function docs(): Promise<Array<{ file: string; text: string }>> {
  const pages = (await readdir(join(ROOT, 'docs'))).filter((f) => f.endsWith('.md')).map((f) => `docs/${f}`)
  return Promise.all(['README.md', ...pages].map(async (file) => ({ file, text: await readFile(join(ROOT, file), 'utf8') })))
}

describe('the errors the docs quote', async () => {
  const quotes = (await docs()).flatMap(({ file, text }) => quotedErrors(text).map((b) => ({ where: `${file}:${b.line}`, text: b.text })))
  const produced = new Map<string, string>()
  for (const [name, produce] of Object.entries(PRODUCERS)) produced.set(name, await produce())

  test('there are quotes to check, and every error a doc quotes is written as the user meets it', async () => {
    expect(quotes.length).toBeGreaterThanOrEqual(Object.keys(PRODUCERS).length)
    // An error quoted without its first line's name would slip past the checks below.
    const unnamed = (await docs()).flatMap(({ file, text }) =>
      fencedBlocks(text)
        .filter((b) => /invalid .*options|unknown flag|did you mean|Error\b/.test(b.text) && !/^(ts|js|json|sh|yaml)$/.test(b.info))
        .filter((b) => !quotedErrors(`\`\`\`\n${b.text}\n\`\`\``).length)
        .map((b) => `${file}:${b.line}`),
    )
    expect(unnamed, 'start each quoted error with "ServegateError [CODE]: ", "TypeError: " or "servegate: "').toEqual([])
  })

  test.for(quotes.map((q) => [q.where, q.text] as const))('%s is what servegate raises', ([where, text]) => {
    const real = [...produced.values()]
    expect(real, `${where} quotes an error no producer raises (reworded?):\n${text}`).toContain(text)
  })

  test.for(Object.keys(PRODUCERS))('%s is quoted in the docs as raised', (name) => {
    const text = produced.get(name) as string
    expect(
      quotes.map((q) => q.text),
      `no doc quotes it as raised now:\n${text}`,
    ).toContain(text)
  })
})

describe('quoted command output', () => {
  test('a quote holds when each of its lines is found in order, `…` standing for what changes', () => {
    const actual = 'servegate demo: the story\n  decode +31.2% [+25%, +37%] ≥ +5%: pass\nVerified 17 + 9 files and 4 + 2 run records\n'
    expect(missingLines('  decode … ≥ +5%: pass\nVerified 17 + 9 files …', actual)).toEqual([])
    expect(missingLines('Verified 15 + 9 files …', actual)).toEqual(['Verified 15 + 9 files …'])
    expect(missingLines('Verified 17 + 9 files …\n  decode … ≥ +5%: pass', actual)).toEqual(['  decode … ≥ +5%: pass'])
    expect(missingLines('Verified 17 + 9 files', actual)).toEqual(['Verified 17 + 9 files'])
  })

  test('a block is found by the command its comment names', () => {
    const markdown = 'Run it:\n\n<!-- output: npm run demo -->\n```\nVerified …\n```\n'
    expect(quotedOutput(markdown, 'npm run demo')).toMatchObject({ line: 4, text: 'Verified …' })
    expect(quotedOutput(markdown, 'servegate verify')).toBeNull()
  })
})
