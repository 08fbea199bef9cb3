/**
 * What `vitest bench` prints and writes, run for real on a two-file suite (fixtures/figures-suite,
 * simulated engines): each gate's decisive figure under its file, for passing tests too, with
 * vitest's default, verbose, json and junit reporters still doing their own job; and a filtered
 * run (`-t`, a file list) writing evidence that says it is partial, never over a complete run's.
 */
import { cp, readFile, rm, writeFile } from 'node:fs/promises'
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { stripVTControlCharacters } from 'node:util'
import { execa } from 'execa'
import { expect } from 'vitest'
import { reseal } from '../../fixtures/evidence-seal.ts'
import { test } from '../../fixtures/test-context.ts'
import { EvidenceIndex } from '../schema/evidence.ts'
import { readIndex, verifyEvidence } from './verify.ts'

const ROOT = fileURLToPath(new URL('../../', import.meta.url))
const VITEST = join(dirname(createRequire(import.meta.url).resolve('vitest/package.json')), 'vitest.mjs')

interface Run {
  exitCode: number | undefined
  stdout: string
  stderr: string
}
const runs: Record<'full' | 'filtered' | 'verbose' | 'json' | 'junit' | 'shard' | 'merge', Run> = {} as never

/** `vitest bench --run` on the fixture suite with `args`, the evidence written to `evidence`. */
function bench(args: string[], evidence: string): Promise<Run> {
  return vitest(['bench', '--run', ...args], evidence)
}

/** vitest on the fixture suite with `args`, the evidence written to `evidence`. */
async function vitest(args: string[], evidence: string): Promise<Run> {
  const { exitCode, stdout, stderr } = await execa(process.execPath, [VITEST, ...args, '--root', 'fixtures/figures-suite'], {
    cwd: ROOT,
    env: { SERVEGATE_EVIDENCE_DIR: evidence, FORCE_COLOR: '0', GITHUB_STEP_SUMMARY: '', CI: 'true' },
    reject: false,
    timeout: 240_000,
    cleanup: true,
  })
  return { exitCode, stdout: stripVTControlCharacters(stdout), stderr: stripVTControlCharacters(stderr) }
}

test.beforeAll(async ({ tmpDir }) => {
  runs.full = await bench([], join(tmpDir, 'evidence'))
  const nonWin = ['-t', 'does not win']
  const blobs = join(tmpDir, 'blobs')
  ;[runs.filtered, runs.shard, runs.verbose, runs.json, runs.junit] = await Promise.all([
    bench(['-t', 'wins decode by'], join(tmpDir, 'evidence')),
    bench(['--shard=1/2', '--reporter=blob', `--outputFile=${join(blobs, 'blob-1-2.json')}`], join(tmpDir, 'unused')),
    bench(['--reporter=verbose', ...nonWin], join(tmpDir, 'verbose')),
    bench(['--reporter=json', `--outputFile=${join(tmpDir, 'report.json')}`, ...nonWin], join(tmpDir, 'json')),
    bench(['--reporter=junit', `--outputFile=${join(tmpDir, 'report.xml')}`, ...nonWin], join(tmpDir, 'junit')),
  ])
  // The merge of one shard's blob of two: the other shard's file is missing.
  runs.merge = await vitest([`--merge-reports=${blobs}`], join(tmpDir, 'merged'))
  for (const [name, run] of Object.entries(runs)) expect(run.exitCode, `${name}:\n${run.stdout}\n${run.stderr}`).toBe(0)
}, 480_000)

/** A figure line as the reporter prints it under its file, with the numbers as patterns. */
const PERCENT = String.raw`[+-]\d+(\.\d+)?%`
const PASSING = new RegExp(
  String.raw`^   ✓ wins decode by 5% › toWinDecode faster: decode ${PERCENT} \[${PERCENT}, ${PERCENT}\] > \+5%: pass ` +
    String.raw`\(98% interval, 16 paired \(16/16\)\)$`,
  'm',
)

test("the default reporter shows each gate's figure and interval under its file, for a passing test too", () => {
  const out = runs.full.stdout
  expect(out).toMatch(PASSING)
  expect(out).toMatch(/^ {3}✓ wins decode again › toWinDecode again: decode \+\d+(\.\d+)?% \[.*\] > \+5%: pass /m)
  // A .not that held is expected, not a failure.
  expect(out).toMatch(
    /^ {3}✓ a slower candidate does not win decode › toWinDecode slower: decode -\d+(\.\d+)?% \[.*\] > \+5%: fail, expected non-win ✓ /m,
  )
  // Under the file vitest reported: after its line, before the next file's.
  const file = out.indexOf('wins.bench.ts (2 tests)')
  expect(file).toBeGreaterThanOrEqual(0)
  expect(out.search(PASSING)).toBeGreaterThan(file)
})

test('the verbose reporter shows the figure once, as the annotation under its test', () => {
  const lines = runs.verbose.stdout.split('\n').filter((l) => l.includes('toWinDecode slower: decode'))
  expect(lines).toHaveLength(1)
  expect(lines[0]).toMatch(/↳ toWinDecode slower: decode -\d+(\.\d+)?% \[.*\] > \+5%: fail, expected non-win ✓ \(98% interval/)
})

test('the json and junit reporters write their reports as ever; with no reporter for a person, servegate keeps to stderr', async ({
  tmpDir,
}) => {
  const json = JSON.parse(await readFile(join(tmpDir, 'report.json'), 'utf8')) as { numPassedTests: number }
  expect(json.numPassedTests).toBe(1)
  const xml = (await readFile(join(tmpDir, 'report.xml'), 'utf8')).trim()
  expect(xml.startsWith('<?xml')).toBe(true)
  expect(xml.endsWith('</testsuites>')).toBe(true)
  expect(xml).toContain('a slower candidate does not win decode')
  for (const run of [runs.json, runs.junit]) {
    expect(run.stdout).not.toMatch(/^servegate|toWinDecode/m)
    expect(run.stderr).toMatch(/^servegate evidence \(partial run\)$/m)
  }
})

test('a run filtered with -t keeps the complete evidence, writes its own beside it marked partial, and warns', async ({ tmpDir }) => {
  const complete = await readIndex(join(tmpDir, 'evidence'))
  expect(complete.partial).toBeNull()
  expect(complete.cells.map((c) => c.id)).toEqual(['slower', 'faster', 'again'])
  expect(complete.promotion.promotable).toBe(true)

  const partial = await readIndex(join(tmpDir, 'evidence-partial'))
  expect(partial.partial).toEqual({
    reasons: ['only 1 of 2 spec files ran', 'tests filtered by name (-t "wins decode by")'],
    filesNotRun: ['non-win.bench.ts'],
    cellsNotRun: ['again'],
  })
  expect(partial.promotion).toEqual({
    promotable: false,
    reasons: [
      expect.stringMatching(
        /^the run was partial: only 1 of 2 spec files ran; tests filtered by name \(-t "wins decode by"\); 1 spec file \(non-win\.bench\.ts\) and 1 cell \(again\) not run$/,
      ),
      expect.stringMatching(/^required cell again is pending/),
    ],
  })
  expect(await verifyEvidence(join(tmpDir, 'evidence-partial'))).toMatchObject({ problems: [] })
  expect(runs.filtered.stdout).toMatch(
    /^servegate evidence \(partial run\)\n {2}Partial run, not promotable: only 1 of 2 spec files ran; /m,
  )
  expect(runs.filtered.stderr).toMatch(
    /servegate: warning: Partial run, not promotable: .*\. .*evidence\/ keeps the complete run's evidence; this run's is in .*evidence-partial\/ /,
  )
  expect(await readFile(join(tmpDir, 'evidence-partial', 'README.md'), 'utf8')).toMatch(
    /^\*\*Partial run, not promotable\*\*: 2 reasons\.$/m,
  )
})

test('a partial run with no complete evidence to keep writes where it was told, marked partial', async ({ tmpDir }) => {
  const index = await readIndex(join(tmpDir, 'json'))
  expect(index.partial).toEqual({
    reasons: ['only 1 of 2 spec files ran', 'tests filtered by name (-t "does not win")'],
    filesNotRun: ['wins.bench.ts'],
    cellsNotRun: [],
  })
  expect(runs.json.stderr).toMatch(/json\/ holds this run's evidence, marked partial; run the whole suite/)
})

test("a merge without every shard's blob is partial, naming the spec file no blob held", async ({ tmpDir }) => {
  const index = await readIndex(join(tmpDir, 'merged'))
  const missing = index.partial?.filesNotRun[0] ?? ''
  expect(['non-win.bench.ts', 'wins.bench.ts']).toContain(missing)
  expect(index.partial).toEqual({ reasons: ['only 1 of 2 spec files ran'], filesNotRun: [missing], cellsNotRun: [] })
  expect(index.cells.map((c) => c.file)).not.toContain(missing)
  expect(index.promotion.promotable).toBe(false)
  expect(runs.merge.stderr).toContain(
    `servegate: warning: Partial run, not promotable: only 1 of 2 spec files ran; 1 spec file (${missing}) not run.`,
  )
})

test('verify --require-promotable says that partial evidence is partial, what did not run and the fix', async ({ cli, tmpDir }) => {
  const partial = await cli(['verify', join(tmpDir, 'evidence-partial'), '--require-promotable'])
  expect(partial.code).toBe(1)
  expect(partial.stderr).toMatch(
    /^servegate verify: .*evidence-partial holds a partial run's evidence, never promotable: only 1 of 2 spec files ran; tests filtered by name \(-t "wins decode by"\); 1 spec file \(non-win\.bench\.ts\) and 1 cell \(again\) not run; run the whole suite \(vitest bench --run, no file list or -t\), or merge every shard, to promote\n/,
  )
  expect(partial.stderr).toMatch(/is not promotable:\n {2}- the run was partial: /)
  expect(await cli(['verify', join(tmpDir, 'evidence'), '--require-promotable'])).toMatchObject({ code: 0 })
})

test('an index written before partial runs were kept reads as complete, and still verifies', async ({ tmpDir }) => {
  const old = join(tmpDir, 'old')
  await cp(join(tmpDir, 'evidence'), old, { recursive: true })
  const path = join(old, 'index.json')
  const { partial: _dropped, ...before } = JSON.parse(await readFile(path, 'utf8')) as Record<string, unknown>
  await writeFile(path, `${JSON.stringify(before, null, 2)}\n`)
  await reseal(old)
  expect(EvidenceIndex.parse(before).partial).toBeNull()
  expect((await readIndex(old)).partial).toBeNull()
  expect(await verifyEvidence(old)).toMatchObject({ problems: [] })
  // Edited to say it was complete, partial evidence no longer decides its promotion again.
  const edited = join(tmpDir, 'edited')
  await cp(join(tmpDir, 'evidence-partial'), edited, { recursive: true })
  const index = JSON.parse(await readFile(join(edited, 'index.json'), 'utf8')) as Record<string, unknown>
  await writeFile(join(edited, 'index.json'), `${JSON.stringify({ ...index, partial: null }, null, 2)}\n`)
  await reseal(edited)
  expect((await verifyEvidence(edited)).problems).toEqual([
    expect.stringMatching(/^index\.json: promotion\.reasons\.0 is "the run was partial: /),
  ])
  await rm(edited, { recursive: true, force: true })
})
