import { cp, readFile, stat, symlink, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { PassThrough } from 'node:stream'
import { describe, expect } from 'vitest'
import { test } from '../../fixtures/test-context.ts'
import { boardFiles, renderBoard } from '../evidence/board.ts'
import { buildEvidence } from '../evidence/build.ts'
import { markdownText } from '../evidence/markdown-text.ts'
import { PR_COMMENT_MARKER, renderPrComment } from '../evidence/pr-comment.ts'
import { readIndex } from '../evidence/verify.ts'
import { DEFAULT_RENDERERS } from '../evidence/renderers.ts'
import { writeEvidence } from '../evidence/write.ts'
import { runCell } from '../runner/measure-cell.ts'
import type { RunRecord } from '../schema/run.ts'
import { startSimServer } from '../sim/server.ts'
import { boardLocation, reportCommand } from './evidence-commands.ts'

const records: Record<string, RunRecord> = {}

async function measure(decodeTokPerS: number): Promise<RunRecord> {
  const sim = await startSimServer({ model: 'm', prefillTokPerS: 40_000, decodeTokPerS, seed: 5 })
  try {
    return await runCell({ baseUrl: sim.url, model: 'm', concurrency: 2, requests: 24, maxTokens: 16, workload: { promptTokens: 64 } })
  } finally {
    await sim.close()
  }
}

test.override('simOptions', { model: 'm', prefillTokPerS: 40_000, decodeTokPerS: 400, seed: 5 })

test.beforeAll(async ({ tmpDir }) => {
  records.slow = await measure(200)
  records.fast = await measure(400)
  for (const [name, r] of Object.entries(records)) await writeFile(join(tmpDir, `${name}.json`), JSON.stringify(r))
  const meta = {
    cells: [
      {
        id: 'p',
        kind: 'pair' as const,
        required: true,
        ladder: null,
        engines: { baseline: 'slow', candidate: 'fast' },
        status: 'measured' as const,
        error: null,
        records: { baseline: [records.slow], candidate: [records.fast] },
      },
    ],
  }
  await writeEvidence(
    join(tmpDir, 'evidence'),
    buildEvidence([{ file: 'a.bench.ts', meta }], [], { suiteCommit: null, redact: false }),
    DEFAULT_RENDERERS,
  )
  // The same cell with a failed test: intact evidence that is not promotable.
  const failed = [{ file: 'a.bench.ts', name: 'p > wins decode', state: 'failed' as const, meta: undefined }]
  await writeEvidence(
    join(tmpDir, 'not-promotable'),
    buildEvidence([{ file: 'a.bench.ts', meta }], failed, { suiteCommit: null, redact: false }),
    DEFAULT_RENDERERS,
  )
}, 60_000)

describe('servegate verify and report', () => {
  test('verify passes on intact evidence and names the file with a flipped byte', async ({ cli, tmpDir }) => {
    const ok = await cli(['verify', join(tmpDir, 'evidence')])
    expect(ok).toMatchObject({ code: 0, stderr: '' })
    expect(ok.stdout).toMatch(/verified .*: \d+ files, 2 run records; every sha256 and summary matches/)
    const board = join(tmpDir, 'evidence', 'README.md')
    const original = await readFile(board)
    const flipped = Buffer.from(original)
    flipped[10] = (flipped[10] as number) ^ 0x20
    await writeFile(board, flipped)
    const bad = await cli(['verify', join(tmpDir, 'evidence')])
    expect(bad.code).toBe(1)
    expect(bad.stderr).toMatch(/^servegate verify: README\.md: sha256 [0-9a-f]{16}… ≠ [0-9a-f]{16}… in SHA256SUMS$/m)
    // report renders the board again from index.json and the records, which verifies once more.
    const report = await cli(['report', join(tmpDir, 'evidence')])
    expect(report.code).toBe(0)
    expect(report.stdout).toMatch(/^Cells: 1 accepted/m)
    expect(await readFile(board)).toEqual(original)
    expect((await cli(['verify', join(tmpDir, 'evidence')])).code).toBe(0)
  })

  test('--require-promotable exits 1 with the promotion reasons of intact evidence that is not promotable', async ({ cli, tmpDir }) => {
    const promotable = await cli(['verify', join(tmpDir, 'evidence'), '--require-promotable'])
    expect(promotable).toMatchObject({ code: 0, stderr: '' })
    expect(promotable.stdout).toMatch(
      /^promotable: every required cell accepted and every gate's test held \(gates: \d+ pass, \d+ fail, \d+ inconclusive/m,
    )
    expect(await cli(['verify', join(tmpDir, 'not-promotable')])).toMatchObject({ code: 0, stderr: '' })
    const refused = await cli(['verify', join(tmpDir, 'not-promotable'), '--require-promotable'])
    expect(refused.code).toBe(1)
    expect(refused.stdout).toMatch(/^verified .*: \d+ files, 2 run records/m)
    expect(refused.stderr).toBe(
      `servegate verify: ${join(tmpDir, 'not-promotable')} is not promotable:\n  - test "p > wins decode" in a.bench.ts failed\n`,
    )
    expect((await cli(['verify', join(tmpDir, 'evidence'), '--require-promotion'])).stderr).toMatch(
      /^servegate: unknown flag --require-promotion; did you mean --require-promotable\? see servegate verify --help$/m,
    )
  })

  test('report --pr-comment prints the PR comment and writes nothing', async ({ cli, tmpDir }) => {
    const evidence = join(tmpDir, 'not-promotable')
    const before = await Promise.all(['README.md', 'index.json', 'index.html', 'SHA256SUMS'].map((f) => stat(join(evidence, f))))
    const r = await cli(['report', evidence, '--pr-comment'])
    expect(r).toMatchObject({ code: 0, stderr: '' })
    const index = await readIndex(evidence)
    expect(r.stdout.startsWith(`${PR_COMMENT_MARKER}\n## servegate: ❌ not promotable\n`)).toBe(true)
    expect(r.stdout).toContain('**Not promotable**: 1 reason.\n\n1. test "p > wins decode" in a.bench.ts failed\n')
    expect(r.stdout).toContain(`<details><summary>The full board`)
    expect(r.stdout).toContain(renderBoard(index, boardFiles(index)))
    expect(r.stdout).not.toMatch(/^rendered /m)
    const after = await Promise.all(['README.md', 'index.json', 'index.html', 'SHA256SUMS'].map((f) => stat(join(evidence, f))))
    expect(after.map((s) => s.mtimeMs)).toEqual(before.map((s) => s.mtimeMs))
    expect((await cli(['report', '--help'])).stdout).toMatch(/^ {2}--pr-comment {3}instead print the pull-request comment to stdout/m)
  })

  test('report --pr-comment says where the full board is: the directory, or on GitHub Actions the run that has it', async ({ tmpDir }) => {
    const evidence = join(tmpDir, 'not-promotable')
    const io = () => {
      let out = ''
      const stdout = new PassThrough().on('data', (b: Buffer) => (out += b.toString()))
      return { io: { stdout, stderr: new PassThrough() }, out: () => out }
    }
    const big = renderPrComment(await readIndex(evidence), { limit: 3000, boardLocation: 'X' })
    expect(big).toContain('The full board is X.')
    const local = io()
    expect(await reportCommand([evidence, '--pr-comment'], local.io, {})).toBe(0)
    expect(local.out()).toMatch(/^<!-- servegate:pr-comment -->/)
    const actions = { GITHUB_SERVER_URL: 'https://github.com', GITHUB_REPOSITORY: 'team/engine', GITHUB_RUN_ID: '42' }
    const readme = markdownText(`${evidence}/README.md`)
    expect(boardLocation(evidence, {})).toBe(readme)
    expect(boardLocation(`${evidence}/`, actions)).toBe(
      `${readme} in the evidence artifact of [this workflow run](https://github.com/team/engine/actions/runs/42)`,
    )
    // A directory's name is text in the comment, never markup.
    expect(boardLocation('ev</details>|`x`', {})).toBe('ev&lt;/details>\\|\\`x\\`/README.md')
  })

  test('a SHA256SUMS path that leaves the directory or is listed twice, and a symbolic link, are refused', async ({ cli, tmpDir }) => {
    const copy = join(tmpDir, 'evidence-tampered')
    await cp(join(tmpDir, 'evidence'), copy, { recursive: true })
    const sums = await readFile(join(copy, 'SHA256SUMS'), 'utf8')
    const first = sums.split('\n')[0] as string
    const hash = first.slice(0, 64)
    await writeFile(join(copy, 'SHA256SUMS'), `${sums}${first}\n${hash}  ../outside.json\n`)
    await symlink('/etc/hostname', join(copy, 'linked.txt'))
    const r = await cli(['verify', copy])
    expect(r.code).toBe(1)
    expect(r.stderr).toMatch(/SHA256SUMS: \S+ is listed twice/)
    expect(r.stderr).toMatch(/SHA256SUMS: "\.\.\/outside\.json" has a `\.\.` segment that leaves the directory/)
    expect(r.stderr).toMatch(/linked\.txt: not a plain file \(a symbolic link\?\)/)
  })

  test('a directory that is not evidence is a one-line error', async ({ cli, tmpDir }) => {
    const r = await cli(['verify', tmpDir])
    expect(r.code).toBe(1)
    expect(r.stderr).toMatch(/SHA256SUMS: missing/)
    expect((await cli(['report', tmpDir])).stderr).toMatch(/index\.json: cannot read .* is .* an evidence directory\?/)
    expect((await cli(['verify'])).code).toBe(2)
  })
})

describe('servegate compare', () => {
  test('a faster candidate holds its latency and, when required, wins decode; a slower one fails a required win', async ({
    cli,
    tmpDir,
  }) => {
    const faster = await cli(['compare', join(tmpDir, 'slow.json'), join(tmpDir, 'fast.json'), '--require-win', 'decode'])
    expect(faster.stdout).toMatch(/^pair checks: /m)
    expect(faster.stdout).toMatch(/^toWinDecode PASS: decodeTokPerS/m)
    // Two sim runs are matched except that the records have no manifests: allowed explicitly.
    expect(faster.stdout).toMatch(/no manifest/)
    expect(faster.code).toBe(1)
    const allowed = await cli([
      'compare',
      join(tmpDir, 'slow.json'),
      join(tmpDir, 'fast.json'),
      '--require-win',
      'decode',
      '--allow-unmatched',
    ])
    expect(allowed).toMatchObject({ code: 0 })
    expect(allowed.stdout).toMatch(/^toHoldLatency (PASS|INCONCLUSIVE): ttftMs p95/m)
    expect(allowed.stdout).toMatch(/^toHoldLatency PASS: tpotMs p50 0\.[45]\d+×/m)
    const slower = await cli([
      'compare',
      join(tmpDir, 'fast.json'),
      join(tmpDir, 'slow.json'),
      '--require-win',
      'decode',
      '--allow-unmatched',
    ])
    expect(slower.code).toBe(1)
    expect(slower.stderr).toMatch(/toWinDecode fail/)
  })

  test('a record compared with itself: no crash, an effect of exactly 1×, exit 0', async ({ cli, tmpDir }) => {
    const same = await cli(['compare', join(tmpDir, 'slow.json'), join(tmpDir, 'slow.json'), '--allow-unmatched'])
    expect(same.stderr).not.toMatch(/internal error/)
    expect(same.stdout).toMatch(/^toWinDecode INCONCLUSIVE: decodeTokPerS 1\.000× \[/m)
    expect(same.code).toBe(0)
  })

  test('two servegate run --base-url records carry manifests, so they compare as a matched pair', async ({ cli, simEngine, tmpDir }) => {
    const flags = ['--base-url', simEngine.url, '--model', 'm', '--requests', '8', '--max-tokens', '8', '--prompt-tokens', '32']
    for (const name of ['a', 'b']) expect((await cli(['run', ...flags, '--out', join(tmpDir, `${name}.json`)])).code).toBe(0)
    const a = JSON.parse(await readFile(join(tmpDir, 'a.json'), 'utf8')) as RunRecord
    expect(a.manifest?.engine).toMatchObject({ kind: 'external', shape: 'http' })
    expect(a.manifest?.model.id).toBe('m')
    const compared = await cli(['compare', join(tmpDir, 'a.json'), join(tmpDir, 'b.json')])
    expect(compared.stdout).toMatch(/^pair checks: matched$/m)
    // Matched, so the pair alone never fails it. Its latency hold gates may: two launches on a
    // loaded machine (a full test run on two cores) can differ in TTFT by more than their 10%,
    // and that is a measured difference, not this test's subject.
    expect(compared.stderr).not.toMatch(/not matched/)
    expect(compared.stdout).toMatch(/^toHoldLatency (PASS|FAIL|INCONCLUSIVE): ttftMs p95/m)
    const self = await cli(['compare', join(tmpDir, 'a.json'), join(tmpDir, 'a.json')])
    expect(self.stdout).toMatch(/^pair checks: matched$/m)
    expect(self.code).toBe(0)
  })

  test('bad flags name the fix', async ({ cli, tmpDir }) => {
    const r = await cli(['compare', join(tmpDir, 'slow.json'), join(tmpDir, 'fast.json'), '--require-win', 'speed'])
    expect(r).toMatchObject({ code: 2 })
    expect(r.stderr).toMatch(/--require-win: unknown gate "speed"; use any of decode, prefill, throughput/)
    expect((await cli(['compare', join(tmpDir, 'slow.json')])).stderr).toMatch(/compare takes two run record files, got 1/)
  })
})

describe('servegate compare: a candidate against a stored baseline (the main branch artifact)', () => {
  const day = 24 * 60 * 60 * 1000
  test.beforeAll(async ({ cli, tmpDir }) => {
    // Two runs of the same plan on two days: main's artifact at 200 tok/s decode, the candidate at 400.
    // Prefill at 800 tok/s makes each TTFT 40 ms of simulated work, so the p95 TTFT that the hold
    // gate compares is the engine's, not a sub-millisecond figure a busy CI machine can double;
    // one stream at a time, so no request's TTFT holds another's prefill.
    for (const [name, decodeTokPerS] of [
      ['main', 200],
      ['pr', 400],
    ] as const) {
      const sim = await startSimServer({ model: 'm', prefillTokPerS: 800, decodeTokPerS, seed: 5 })
      try {
        const flags = ['--base-url', sim.url, '--model', 'm', '--requests', '24', '--max-tokens', '16', '--prompt-tokens', '32']
        expect((await cli(['run', ...flags, '--out', join(tmpDir, `${name}.json`)])).code).toBe(0)
      } finally {
        await sim.close()
      }
    }
    const main = JSON.parse(await readFile(join(tmpDir, 'main.json'), 'utf8')) as RunRecord
    const pr = JSON.parse(await readFile(join(tmpDir, 'pr.json'), 'utf8')) as RunRecord
    const startedAt = new Date(Date.parse(pr.startedAt as string) - day).toISOString()
    await writeFile(join(tmpDir, 'main.json'), JSON.stringify({ ...main, startedAt }))
  }, 60_000)

  test('the pair checks print first, then the two runs and what covers their drift, then the verdicts', async ({ cli, tmpDir }) => {
    const r = await cli(['compare', join(tmpDir, 'main.json'), join(tmpDir, 'pr.json'), '--require-win', 'decode'])
    expect(r).toMatchObject({ code: 0, stderr: '' })
    const lines = r.stdout.trimEnd().split('\n')
    expect(lines[0]).toBe('pair checks: matched')
    expect(lines[1]).toMatch(/^launches: baseline \S+main\.json \(run-\S+, started \S+\) and candidate \S+pr\.json \(run-\S+, /)
    expect(lines[1]).toMatch(/\) are different runs, the baseline started 1\.0 days before the candidate: not interleaved A B B A, /)
    expect(lines[1]).toMatch(
      /so only the launch-noise floor \(2% per launch\) covers drift between the two launches \(set it with --launch-noise\)$/,
    )
    expect(lines.slice(2).map((l) => l.split(' ')[0])).toEqual([
      'toHoldLatency',
      'toHoldLatency',
      'toWinDecode',
      'toWinPrefill',
      'toWinThroughput',
    ])
    expect(lines[4]).toMatch(/^toWinDecode PASS: decodeTokPerS [12]\.\d+× \[/)
  })

  test('with a mismatch, the mismatches still come before any verdict', async ({ cli, tmpDir }) => {
    const r = await cli(['compare', join(tmpDir, 'slow.json'), join(tmpDir, 'pr.json'), '--allow-unmatched'])
    const lines = r.stdout.trimEnd().split('\n')
    const firstVerdict = lines.findIndex((l) => /^to[A-Z]\w+ (PASS|FAIL|INCONCLUSIVE):/.test(l))
    const lastCheck = Math.max(...lines.map((l, i) => (/^(pair checks:| {2}- |launches:)/.test(l) ? i : -1)))
    expect(lines[0]).toMatch(/^pair checks: \d+ mismatch\(es\) \(allowed\)$/)
    expect(firstVerdict).toBeGreaterThan(lastCheck)
  })

  test('--json: matched, mismatches and launches come before the gates; the floor is the one set', async ({ cli, tmpDir }) => {
    const r = await cli(['compare', join(tmpDir, 'main.json'), join(tmpDir, 'pr.json'), '--json', '--launch-noise', '5%'])
    expect(r.code).toBe(0)
    const report = JSON.parse(r.stdout) as {
      launches: { baseline: { file: string; runId: string }; candidate: { runId: string }; sameRun: boolean; launchNoise: number }
      gates: Array<{ gate: string; effect: { method: string } }>
    }
    expect(Object.keys(report)).toEqual(['matched', 'mismatches', 'launches', 'gates'])
    expect(report.launches).toMatchObject({ sameRun: false, launchNoise: 0.05, baseline: { file: join(tmpDir, 'main.json') } })
    expect(report.launches.baseline.runId).not.toBe(report.launches.candidate.runId)
    for (const g of report.gates) expect(g.effect.method).toMatch(/launch noise 5% per launch/)
  })

  test('--launch-noise widens the interval; 0 says that nothing covers the drift', async ({ cli, tmpDir }) => {
    const decode = async (noise: string) => {
      const r = await cli(['compare', join(tmpDir, 'main.json'), join(tmpDir, 'pr.json'), '--json', '--launch-noise', noise])
      const gates = (JSON.parse(r.stdout) as { gates: Array<{ gate: string; effect: { low: number; high: number } }> }).gates
      const e = gates.find((g) => g.gate === 'toWinDecode')?.effect as { low: number; high: number }
      return e.high - e.low
    }
    expect(await decode('0.1')).toBeGreaterThan(await decode('0.02'))
    const zero = await cli(['compare', join(tmpDir, 'main.json'), join(tmpDir, 'pr.json'), '--launch-noise', '0'])
    expect(zero.stdout).toMatch(/^launches: .*nothing covers drift between the two launches \(the launch-noise floor is 0\)/m)
  })

  test('one record compared with itself is one run, not two', async ({ cli, tmpDir }) => {
    const r = await cli(['compare', join(tmpDir, 'pr.json'), join(tmpDir, 'pr.json')])
    expect(r.stdout).toMatch(/^launches: both files hold the same run \(run-\S+, started \S+\): one launch compared with itself$/m)
  })

  test('a bad --launch-noise names the flag and the fix', async ({ cli, tmpDir }) => {
    const run = (value: string) => cli(['compare', join(tmpDir, 'main.json'), join(tmpDir, 'pr.json'), `--launch-noise=${value}`])
    expect(await run('lots')).toMatchObject({ code: 2 })
    expect((await run('lots')).stderr).toMatch(
      /--launch-noise: "lots" is not a relative sd; pass a fraction from 0 to 0\.5 or a percentage/,
    )
    expect((await run('-0.1')).stderr).toMatch(/--launch-noise: "-0\.1" is not a relative sd/)
    expect((await run('2')).stderr).toMatch(
      /--launch-noise: 2 is above 0\.5; it is a fraction of one \(0\.02 is 2%\); for 2% write --launch-noise 2%/,
    )
    expect((await run('60%')).stderr).toMatch(/--launch-noise: 60% is above 0\.5; it is a fraction of one \(0\.02 is 2%\)$/m)
  })
})
