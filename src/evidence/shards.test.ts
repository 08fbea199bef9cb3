/**
 * Sharded runs merge into the same evidence: the fixture suite (two spec files, fake vLLM
 * engines) run whole, and run as two blob shards then merged with `vitest --merge-reports`. A
 * shard from another servegate is named, and the merge is not promotable.
 */
import { copyFile, mkdir, readFile, writeFile } from 'node:fs/promises'
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { execa } from 'execa'
import { expect } from 'vitest'
import { test } from '../../fixtures/test-context.ts'
import type { EvidenceIndex } from '../schema/evidence.ts'
import { META_SCHEMA_ID } from '../schema/task-meta.ts'
import { SERVEGATE_VERSION } from '../version.ts'
import { listFiles, readIndex, verifyEvidence } from './verify.ts'

const ROOT = fileURLToPath(new URL('../../', import.meta.url))
const SUITE = 'fixtures/shard-suite'
const VITEST = join(dirname(createRequire(import.meta.url).resolve('vitest/package.json')), 'vitest.mjs')
let otherMerge: { exitCode: number | undefined; output: string }

/** Runs vitest on the fixture suite with the evidence written to `evidence`, whatever its exit code. */
function run(args: string[], evidence: string, env: Record<string, string> = {}) {
  return execa(process.execPath, [VITEST, ...args, '--root', SUITE], {
    cwd: ROOT,
    env: { SERVEGATE_EVIDENCE_DIR: evidence, FORCE_COLOR: '0', GITHUB_STEP_SUMMARY: '', ...env },
    reject: false,
    timeout: 120_000,
    cleanup: true,
    all: true,
  })
}

/** Runs vitest on the fixture suite with the evidence written to `evidence`; it must exit 0. */
async function vitest(args: string[], evidence: string, env: Record<string, string> = {}): Promise<void> {
  const result = await run(args, evidence, env)
  if (result.exitCode !== 0)
    throw new Error(`vitest ${args.join(' ')} exited ${result.exitCode}:\n${result.stdout.slice(-2000)}\n${result.stderr.slice(-2000)}`)
}

/**
 * A blob as another servegate would have written it: its meta tagged servegate 0.0.1 and
 * `servegate.meta/v9`. Blob reports are flatted JSON: one array of values, each string stored
 * once and referred to by its index.
 */
function fromAnotherServegate(blob: string): string {
  const values = JSON.parse(blob) as unknown[]
  const tag = values.indexOf(META_SCHEMA_ID)
  if (tag < 0) throw new Error(`the blob carries no ${META_SCHEMA_ID} meta`)
  values[tag] = 'servegate.meta/v9'
  const version = String(values.push('0.0.1') - 1)
  for (const v of values)
    if (typeof v === 'object' && v !== null && (v as Record<string, unknown>).schema === String(tag))
      (v as Record<string, unknown>).servegateVersion = version
  return JSON.stringify(values)
}

/** What must not depend on how the run was split: everything but the measured figures. */
function structure(index: EvidenceIndex) {
  return {
    cells: index.cells.map((c) => ({
      id: c.id,
      file: c.file,
      disposition: c.disposition,
      engines: c.engines,
      arms: c.arms.map((a) => [a.arm, a.completed, a.record.path]),
      // Run ids name each launch's record, so they differ between runs: the rest of each check may not.
      checks: c.checks.map(({ judged: _runIds, ...check }) => check),
    })),
    gates: index.gates.map((g) => [g.cell, g.test, g.testPassed, g.decision.gate, g.decision.outcome]),
    statistics: index.statistics,
    promotion: index.promotion,
    artifacts: index.artifacts.map((a) => a.path),
  }
}

test.beforeAll(async ({ tmpDir }) => {
  await vitest(['bench', '--run'], join(tmpDir, 'single'), { GITHUB_STEP_SUMMARY: join(tmpDir, 'step-summary.md') })
  for (const i of [1, 2])
    await vitest(
      ['bench', '--run', `--shard=${i}/2`, '--reporter=blob', `--outputFile=${join(tmpDir, 'blobs', `blob-${i}.json`)}`],
      join(tmpDir, 'unused'),
    )
  await vitest([`--merge-reports=${join(tmpDir, 'blobs')}`], join(tmpDir, 'merged'))
  await vitest([`--merge-reports=${join(tmpDir, 'blobs')}`], join(tmpDir, 'merged-again'))
  await mkdir(join(tmpDir, 'other-blobs'))
  await writeFile(
    join(tmpDir, 'other-blobs', 'blob-1.json'),
    fromAnotherServegate(await readFile(join(tmpDir, 'blobs', 'blob-1.json'), 'utf8')),
  )
  await copyFile(join(tmpDir, 'blobs', 'blob-2.json'), join(tmpDir, 'other-blobs', 'blob-2.json'))
  const other = await run([`--merge-reports=${join(tmpDir, 'other-blobs')}`], join(tmpDir, 'merged-other'))
  otherMerge = { exitCode: other.exitCode, output: other.all }
  await vitest(['bench', '--run', '--reporter=dot', 'a.bench.ts'], join(tmpDir, 'dot'))
}, 300_000)

test('two shards merged give the evidence one run gives: the same cells, gates, checks, statistics and files', async ({ tmpDir }) => {
  const single = await readIndex(join(tmpDir, 'single'))
  const merged = await readIndex(join(tmpDir, 'merged'))
  expect(merged.cells.map((c) => c.file)).toEqual(['a.bench.ts', 'b.bench.ts'])
  expect(structure(merged)).toEqual(structure(single))
  expect(await listFiles(join(tmpDir, 'merged'))).toEqual(await listFiles(join(tmpDir, 'single')))
  expect(await verifyEvidence(join(tmpDir, 'merged'))).toMatchObject({ problems: [], records: 4 })
  // A shard run writes no evidence of its own: only the merge does.
  await expect(readIndex(join(tmpDir, 'unused'))).rejects.toThrow(/cannot read/)
})

test('the board goes to the GitHub job summary when GITHUB_STEP_SUMMARY is set', async ({ tmpDir }) => {
  expect(await readFile(join(tmpDir, 'step-summary.md'), 'utf8')).toBe(`${await readFile(join(tmpDir, 'single', 'README.md'), 'utf8')}\n`)
})

test('a --reporter on the command line keeps the evidence reporter: the run still writes its evidence', async ({ tmpDir }) => {
  const index = await readIndex(join(tmpDir, 'dot'))
  expect(index.cells.map((c) => c.file)).toEqual(['a.bench.ts'])
  expect(await verifyEvidence(join(tmpDir, 'dot'))).toMatchObject({ problems: [] })
})

test('merging the same blobs again gives byte-identical evidence', async ({ tmpDir }) => {
  const files = await listFiles(join(tmpDir, 'merged'))
  for (const f of files)
    expect(await readFile(join(tmpDir, 'merged-again', f), 'utf8'), f).toBe(await readFile(join(tmpDir, 'merged', f), 'utf8'))
})

test('a shard from another servegate is left out and named, with both versions and the fix; the merge fails', async ({ tmpDir }) => {
  const index = await readIndex(join(tmpDir, 'merged-other'))
  const files = index.cells.map((c) => c.file)
  const [left] = ['a.bench.ts', 'b.bench.ts'].filter((f) => !files.includes(f))
  expect(files).toHaveLength(1)
  const problem =
    `its servegate meta was written by servegate 0.0.1 (servegate.meta/v9), but this reporter is servegate ${SERVEGATE_VERSION} ` +
    `(${META_SCHEMA_ID}): re-run every shard with servegate ${SERVEGATE_VERSION}, the version that merges them, then merge again`
  expect(index.promotion.promotable).toBe(false)
  expect(index.promotion.reasons).toContain(`test "(${problem})" in ${left} failed`)
  expect(await verifyEvidence(join(tmpDir, 'merged-other'))).toMatchObject({ problems: [] })
  expect(otherMerge.exitCode).toBe(1)
  expect(otherMerge.output).toContain(`${left}: ${problem}`)
})
