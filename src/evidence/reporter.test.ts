/**
 * A spec file that throws while it loads ran none of its cells and tests: the evidence says so
 * and is not promotable, whether or not other files measured cells. A meta the reporter cannot
 * read is left out the same way, named with the field that is wrong.
 */
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { execa } from 'execa'
import { expect } from 'vitest'
import type { TestModule } from 'vitest/node'
import { META_TAG } from '../schema/task-meta.ts'
import { buildEvidence } from './build.ts'
import { collectInputs } from './reporter.ts'
import { readIndex, verifyEvidence } from './verify.ts'
import { test } from '../../fixtures/test-context.ts'

const ROOT = fileURLToPath(new URL('../../', import.meta.url))
const VITEST = join(dirname(createRequire(import.meta.url).resolve('vitest/package.json')), 'vitest.mjs')

function bench(files: string[], evidence: string) {
  return execa(process.execPath, [VITEST, 'bench', '--run', '--root', 'fixtures/load-failure-suite', ...files], {
    cwd: ROOT,
    env: { SERVEGATE_EVIDENCE_DIR: evidence, FORCE_COLOR: '0', GITHUB_STEP_SUMMARY: '' },
    reject: false,
    timeout: 120_000,
    cleanup: true,
  })
}

test('beside a file that measured its cells, a file that failed to load blocks promotion and is named', async ({ tmpDir }) => {
  const dir = join(tmpDir, 'both')
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

test('a run of only the file that fails to load writes partial evidence that is not promotable, keeping the complete run', async ({
  tmpDir,
}) => {
  const dir = join(tmpDir, 'both')
  const run = await bench(['broken.bench.ts'], dir)
  expect(run.exitCode).toBe(1)
  // The complete run's evidence stays; the partial run's goes beside it.
  expect((await readIndex(dir)).cells.map((c) => c.file)).toEqual(['ok.bench.ts'])
  const index = await readIndex(`${dir}-partial`)
  expect(index.cells).toEqual([])
  expect(index.partial).toEqual({ reasons: ['only 1 of 2 spec files ran'], filesNotRun: ['ok.bench.ts'], cellsNotRun: [] })
  expect(index.promotion.promotable).toBe(false)
  expect(index.promotion.reasons.join('\n')).toMatch(/failed to load/)
}, 120_000)

/** A test module as the reporter sees it after a run or a merge: its file meta and its tests' meta. */
function testModule(file: string, fileMeta: unknown, tests: ReadonlyArray<{ name: string; meta: unknown }>): TestModule {
  const cases = tests.map((t) => ({ fullName: t.name, result: () => ({ state: 'passed' }), meta: () => ({ servegate: t.meta }) }))
  return {
    relativeModuleId: file,
    meta: () => ({ servegateFile: fileMeta }),
    children: { allTests: () => cases },
    errors: () => [],
  } as unknown as TestModule
}

test('a malformed meta is left out, named with its file, test and field, and the evidence is not promotable', () => {
  const cell = { id: 'c', kind: 'cell', required: true, ladder: null, engines: { cell: 'e' }, status: 'pending', error: null, records: {} }
  const check = {
    cell: 'c',
    check: 'toPassCanaries',
    passed: true,
    findings: [],
    judged: { kind: 'cell', records: ['run-c'] },
    isNot: false,
  }
  const inputs = collectInputs([
    testModule('ok.bench.ts', { ...META_TAG, cells: [cell] }, [
      { name: 'c > passes canaries', meta: { ...META_TAG, decisions: [], checks: [check] } },
    ]),
    testModule('bad-file.bench.ts', { ...META_TAG, cells: [{ ...cell, id: 'd', status: 'ran' }] }, []),
    testModule('bad-test.bench.ts', undefined, [
      { name: 'e > passes canaries', meta: { ...META_TAG, decisions: [], checks: [{ ...check, passed: 'yes' }] } },
    ]),
  ])
  expect(inputs.files.map((f) => [f.file, f.meta.cells.map((c) => c.id)])).toEqual([['ok.bench.ts', ['c']]])
  expect(inputs.unreadableMeta).toEqual([
    'bad-file.bench.ts: its servegate meta is malformed at cells[0].status: Invalid option: expected one of "pending"|"measured"|"threw"',
    'bad-test.bench.ts: the servegate meta of test "e > passes canaries" is malformed at checks[0].passed: ' +
      'Invalid input: expected boolean, received string',
  ])
  expect(inputs.tests.find((t) => t.name === 'e > passes canaries')?.meta).toBeUndefined()
  const { promotion } = buildEvidence(inputs.files, inputs.tests, { suiteCommit: null, redact: false }).index
  expect(promotion.promotable).toBe(false)
  expect(promotion.reasons).toEqual([
    'test "(its servegate meta is malformed at cells[0].status: Invalid option: expected one of "pending"|"measured"|"threw")" ' +
      'in bad-file.bench.ts failed',
    'test "(the servegate meta of test "e > passes canaries" is malformed at checks[0].passed: ' +
      'Invalid input: expected boolean, received string)" in bad-test.bench.ts failed',
    'required cell c is pending: declared but not run: no test awaited it, or the run ended first',
  ])
})
