/**
 * A spec file that throws while it loads ran none of its cells and tests: the evidence says so
 * and is not promotable, whether or not other files measured cells.
 */
import { mkdtemp, rm } from 'node:fs/promises'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { execa } from 'execa'
import { afterAll, beforeAll, expect, test } from 'vitest'
import { readIndex, verifyEvidence } from './verify.ts'

const ROOT = fileURLToPath(new URL('../../', import.meta.url))
const VITEST = join(dirname(createRequire(import.meta.url).resolve('vitest/package.json')), 'vitest.mjs')
let tmp = ''

function bench(files: string[], evidence: string) {
  return execa(process.execPath, [VITEST, 'bench', '--run', '--root', 'fixtures/load-failure-suite', ...files], {
    cwd: ROOT,
    env: { SERVEGATE_EVIDENCE_DIR: evidence, FORCE_COLOR: '0', GITHUB_STEP_SUMMARY: '' },
    reject: false,
    timeout: 120_000,
    cleanup: true,
  })
}

beforeAll(async () => {
  tmp = await mkdtemp(join(tmpdir(), 'servegate-load-failure-'))
})
afterAll(async () => {
  await rm(tmp, { recursive: true, force: true })
})

test('beside a file that measured its cells, a file that failed to load blocks promotion and is named', async () => {
  const dir = join(tmp, 'both')
  const run = await bench([], dir)
  expect(run.exitCode).toBe(1)
  const index = await readIndex(dir)
  expect(index.cells.map((c) => [c.file, c.disposition])).toEqual([['ok.bench.ts', 'accepted']])
  expect(index.promotion.promotable).toBe(false)
  expect(index.promotion.reasons.join('\n')).toMatch(
    /broken\.bench\.ts.*failed to load.*\{model\} is ambiguous|failed to load.*\{model\} is ambiguous.*broken\.bench\.ts/,
  )
  expect(await verifyEvidence(dir)).toMatchObject({ problems: [] })
}, 120_000)

test('a run whose only file failed to load replaces the previous evidence with one that is not promotable', async () => {
  const dir = join(tmp, 'both')
  const run = await bench(['broken.bench.ts'], dir)
  expect(run.exitCode).toBe(1)
  const index = await readIndex(dir)
  expect(index.cells).toEqual([])
  expect(index.promotion.promotable).toBe(false)
  expect(index.promotion.reasons.join('\n')).toMatch(/failed to load/)
}, 120_000)
