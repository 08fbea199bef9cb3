/**
 * The plugin's `noise.history` reaches the reporter: a complete run on main appends its gated
 * figures and its evidence says so; a run on another branch does not, and shows its point
 * against main's trend.
 */
import { createRequire } from 'node:module'
import { readFile } from 'node:fs/promises'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { execa } from 'execa'
import { expect } from 'vitest'
import { test } from '../../fixtures/test-context.ts'
import { readHistory } from '../record/history-store.ts'
import { readIndex } from './verify.ts'

const ROOT = fileURLToPath(new URL('../../', import.meta.url))
const VITEST = join(dirname(createRequire(import.meta.url).resolve('vitest/package.json')), 'vitest.mjs')

function bench(evidence: string, history: string, branch: string) {
  return execa(process.execPath, [VITEST, 'bench', '--run', '--root', 'fixtures/history-suite'], {
    cwd: ROOT,
    env: {
      SERVEGATE_EVIDENCE_DIR: evidence,
      SERVEGATE_HISTORY: history,
      GITHUB_REF_NAME: branch,
      GITHUB_SHA: `sha-${branch}`,
      FORCE_COLOR: '0',
      GITHUB_STEP_SUMMARY: '',
    },
    reject: false,
    timeout: 120_000,
    cleanup: true,
  })
}

test('a run on main is appended; a run on a branch is not, and shows its point on main’s trend', async ({ tmpDir }) => {
  const history = join(tmpDir, 'cache', 'main.jsonl')
  const main = await bench(join(tmpDir, 'main'), history, 'main')
  expect(main.exitCode, main.stderr).toBe(0)
  expect(main.stdout).toContain(`History of main: appended to ${history}`)
  const onMain = await readIndex(join(tmpDir, 'main'))
  expect(onMain.history).toMatchObject({ path: history, branch: 'main', appended: true, reason: null })
  const runs = await readHistory(history)
  expect(runs.map((r) => [r.commit, r.branch, r.cells.map((c) => c.cell)])).toEqual([
    ['sha-main', 'main', ['decode/baseline', 'decode/candidate']],
  ])
  expect(runs[0]?.cells[1]?.testbed).toMatchObject({
    runner: 'fixture-runner',
    model: 'm',
    cell: { concurrency: 2, requests: 16, maxTokens: 8 },
  })

  const branch = await bench(join(tmpDir, 'branch'), history, 'faster')
  expect(branch.exitCode, branch.stderr).toBe(0)
  expect(branch.stdout).toContain('History of main: not appended (a run on faster, not main)')
  expect(await readHistory(history)).toHaveLength(1)
  const onBranch = await readIndex(join(tmpDir, 'branch'))
  const decode = onBranch.history?.trend.find((t) => t.cell === 'decode/candidate' && t.metric === 'decodeTokPerS')
  expect(decode?.main.map((p) => p.commit)).toEqual(['sha-main'])
  expect(decode?.current?.commit).toBe('sha-faster')
  const board = await readFile(join(tmpDir, 'branch', 'README.md'), 'utf8')
  expect(board).toContain('## Trend of main')
  expect(await readFile(join(tmpDir, 'branch', 'index.html'), 'utf8')).toContain('id="chart-trend-of-main"')
}, 240_000)
