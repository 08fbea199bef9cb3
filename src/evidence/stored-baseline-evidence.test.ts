import { copyFile, readFile, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { execa } from 'execa'
import { describe, expect } from 'vitest'
import { test } from '../../fixtures/test-context.ts'
import type { EvidenceIndex } from '../schema/evidence.ts'
import type { RunRecord } from '../schema/run.ts'
import { sha256 } from './build.ts'
import { listFiles, readIndex, verifyEvidence } from './verify.ts'
import { SUMS_FILE, sumsOf } from './write.ts'

const ROOT = fileURLToPath(new URL('../..', import.meta.url))
const VITEST = join(ROOT, 'node_modules', 'vitest', 'vitest.mjs')

/** Runs fixtures/stored-baseline-suite once, writing its evidence to `evidence`, with a stored baseline when given. */
async function runSuite(evidence: string, stored?: string) {
  const result = await execa(process.execPath, [VITEST, 'bench', '--run', '--root', 'fixtures/stored-baseline-suite'], {
    cwd: ROOT,
    env: {
      SERVEGATE_EVIDENCE_DIR: evidence,
      ...(stored === undefined ? {} : { SERVEGATE_STORED_BASELINE: stored }),
      FORCE_COLOR: '0',
      GITHUB_STEP_SUMMARY: '',
    },
    reject: false,
    timeout: 120_000,
    cleanup: true,
  })
  expect(result.exitCode, result.stdout + result.stderr).toBe(0)
}

describe('a cell judged against a stored baseline, in the evidence', () => {
  let evidence = ''
  let main = ''
  test.beforeAll(async ({ tmpDir: dir }) => {
    // The main branch's run, then this branch's run judged against its record.
    await runSuite(join(dir, 'main'))
    main = join(dir, 'main-c2.json')
    await copyFile(join(dir, 'main', 'runs', 'cell', 'c2.json'), main)
    evidence = join(dir, 'pr')
    await runSuite(evidence, main)
  }, 240_000)

  test('keeps the stored record, says where each gate’s baseline came from, and verifies', async () => {
    const index = await readIndex(evidence)
    const stored = JSON.parse(await readFile(main, 'utf8')) as RunRecord
    expect(index.storedBaselines).toEqual([
      { runId: stored.runId, source: main, record: expect.objectContaining({ path: `runs/stored/${stored.runId}.json` }) },
    ])
    expect(index.gates.map((g) => g.decision.gate).sort()).toEqual(['toHoldLatency', 'toWinDecode'])
    for (const g of index.gates) {
      expect(g.judged).toMatchObject({ kind: 'pair', baseline: [stored.runId], storedBaseline: { file: main } })
      expect(g.decision.warnings.join(' ')).toMatch(/the baseline was not measured in this run: it is the stored record/)
    }
    expect(await verifyEvidence(evidence)).toMatchObject({ problems: [], records: 2 })
  })

  test('a swapped baseline record, with every hash made to agree, is caught by deciding the gates again', async ({ tmpDir }) => {
    const forged = join(tmpDir, 'forged')
    await runSuite(forged, main)
    const index = JSON.parse(await readFile(join(forged, 'index.json'), 'utf8')) as EvidenceIndex
    const ref = (index.storedBaselines[0] as EvidenceIndex['storedBaselines'][number]).record
    // A slower baseline would make the candidate look better: every TTFT doubled.
    const record = JSON.parse(await readFile(join(forged, ref.path), 'utf8')) as RunRecord
    const slower = {
      ...record,
      requests: record.requests.map((r) => ({ ...r, ttftMs: r.ttftMs === null ? null : r.ttftMs * 2 })),
    }
    const content = `${JSON.stringify(slower, null, 2)}\n`
    await writeFile(join(forged, ref.path), content)
    ref.sha256 = sha256(content)
    ref.bytes = Buffer.byteLength(content)
    await writeFile(join(forged, 'index.json'), `${JSON.stringify(index, null, 2)}\n`)
    const files = (await listFiles(forged)).filter((p) => p !== SUMS_FILE)
    const contents = await Promise.all(files.map(async (path) => ({ path, content: await readFile(join(forged, path), 'utf8') })))
    await writeFile(join(forged, SUMS_FILE), sumsOf(contents))
    const { problems } = await verifyEvidence(forged)
    expect(problems.join('\n')).toMatch(
      /gate toHoldLatency on cell c2 .*: decision\.effect\.\S+ is .* in the index, .* from the run records/,
    )
  })
})
