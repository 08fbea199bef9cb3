import { mkdir, readFile, readdir, rm, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { beforeAll, describe, expect } from 'vitest'
import { test } from '../../fixtures/test-context.ts'
import { checkMeta, decisionMeta } from '../../fixtures/judged-meta.ts'
import { measuredArm } from '../../fixtures/manifest.ts'
import { runCell } from '../runner/measure-cell.ts'
import { failedCellRecord } from '../runner/run-record.ts'
import { EvidenceIndex } from '../schema/evidence.ts'
import type { RunRecord } from '../schema/run.ts'
import type { DeclaredCell } from '../schema/task-meta.ts'
import { boardFiles, renderBoard } from './board.ts'
import { buildEvidence, type SpecFileInput, type TestInput } from './build.ts'
import { DEFAULT_RENDERERS } from './renderers.ts'
import { readEvidence, verifyEvidence } from './verify.ts'
import { type Renderers, SUMS_FILE, writeEvidence } from './write.ts'

const SECRET = 'sk-servegate-test-7f3a9c'
let baseline: RunRecord
let candidate: RunRecord

beforeAll(async () => {
  // The API key is sent on every request; the arms are a matched pair, as if servegate had launched them.
  baseline = await measuredArm(300, { apiKey: SECRET, workload: { promptTokens: 64, canaries: true } })
  candidate = await measuredArm(600, { apiKey: SECRET, workload: { promptTokens: 64, canaries: true } })
}, 60_000)

// The engine of the open-loop cell.
test.override('simOptions', { model: 'm', prefillTokPerS: 40_000, decodeTokPerS: 400, seed: 4 })

function declared(id: string, over: Partial<DeclaredCell> = {}): DeclaredCell {
  return {
    id,
    kind: 'pair',
    required: true,
    ladder: null,
    engines: { baseline: 'sim-300', candidate: 'sim-600' },
    status: 'measured',
    error: null,
    records: { baseline: [baseline], candidate: [candidate] },
    ...over,
  }
}

/** A suite: a won pair, a pair whose candidate engine failed, one that threw, one never run, and their tests. */
function suite(): { files: SpecFileInput[]; tests: TestInput[] } {
  const crashed = failedCellRecord(
    { baseUrl: 'http://127.0.0.1:1', model: 'm' },
    { code: 'ENGINE_EXITED', message: 'engine vllm exited during start-up with code 3', httpStatus: null, retryAfterS: null },
  )
  const files: SpecFileInput[] = [
    {
      file: 'benchmarks/a.bench.ts',
      meta: {
        cells: [
          declared('won'),
          declared('crashed', { records: { baseline: [baseline], candidate: [crashed] } }),
          declared('threw', { status: 'threw', error: 'cell failed unexpectedly: boom', records: {} }),
          declared('never', { status: 'pending', records: {}, required: false }),
        ],
      },
    },
  ]
  const won = { baseline: [baseline], candidate: [candidate] }
  const win = decisionMeta('won', won, { gate: 'toWinDecode', launchNoise: 0 })
  const matched = checkMeta('won', 'toBeMatchedPair', won)
  const tests: TestInput[] = [
    {
      file: 'benchmarks/a.bench.ts',
      name: 'won > wins decode',
      state: win.passed ? 'passed' : 'failed',
      meta: { decisions: [win], checks: [] },
    },
    {
      file: 'benchmarks/a.bench.ts',
      name: 'won > is matched',
      state: matched.passed ? 'passed' : 'failed',
      meta: { decisions: [], checks: [matched] },
    },
  ]
  return { files, tests }
}

describe('buildEvidence', () => {
  test('dispositions, gate entries, statistics and promotion follow from the cells and tests', () => {
    const { files, tests } = suite()
    const { index, runs } = buildEvidence(files, tests, { suiteCommit: 'a'.repeat(40), redact: false })
    expect(EvidenceIndex.parse(index)).toEqual(index)
    expect(index.cells.map((c) => [c.id, c.disposition])).toEqual([
      ['won', 'accepted'],
      ['crashed', 'failed'],
      ['threw', 'blocked'],
      ['never', 'pending'],
    ])
    expect(index.cells[1]?.reason).toBe('candidate: ENGINE_EXITED: engine vllm exited during start-up with code 3')
    expect(index.cells[2]?.reason).toMatch(/threw before a record existed: cell failed unexpectedly: boom/)
    expect(index.gates).toEqual([
      expect.objectContaining({
        cell: 'won',
        test: 'won > wins decode',
        testPassed: true,
        decision: expect.objectContaining({ gate: 'toWinDecode', outcome: 'pass' }),
      }),
    ])
    expect(index.statistics).toEqual({
      planned: 4,
      required: 3,
      accepted: 1,
      failed: 1,
      blocked: 1,
      pending: 1,
      matchedPairs: 1,
      gates: { pass: 1, fail: 0, inconclusive: 0 },
    })
    expect(index.promotion.promotable).toBe(false)
    expect(index.promotion.reasons).toEqual([
      expect.stringMatching(/^required cell crashed is failed/),
      expect.stringMatching(/^required cell threw is blocked/),
    ])
    // One run record per arm per launch, referenced from the arm summaries.
    expect(runs.map((r) => r.path)).toEqual([
      'runs/baseline/won.json',
      'runs/candidate/won.json',
      'runs/baseline/crashed.json',
      'runs/candidate/crashed.json',
    ])
    const won = index.cells[0]
    expect(won?.arms.map((a) => [a.arm, a.completed, a.concurrency.clientObservedMax])).toEqual([
      ['baseline', 12, 2],
      ['candidate', 12, 2],
    ])
    expect(won?.arms[1]?.timings.decodeTokPerS.p50 as number).toBeGreaterThan(won?.arms[0]?.timings.decodeTokPerS.p50 as number)
    expect(index.findings.map((f) => f.kind)).toContain('descriptive-p99')
  })

  test('an arm whose failed share is over the maximum fails its cell: 0 for a required cell unless set', () => {
    const error = { code: 'HTTP_STATUS' as const, message: 'HTTP 500', httpStatus: 500, retryAfterS: null }
    const requests = candidate.requests.map((r, i) => (i % 4 === 0 ? { ...r, status: 'failed' as const, error } : r))
    const failing: RunRecord = { ...candidate, requests, failed: 3, completed: candidate.requests.length - 3 }
    const records = { baseline: [baseline], candidate: [failing] }
    const cells = [
      declared('strict', { records }),
      declared('lenient', { records, maxFailedShare: 0.3 }),
      declared('optional', { records, required: false }),
    ]
    const { index } = buildEvidence([{ file: 'benchmarks/f.bench.ts', meta: { cells } }], [], { suiteCommit: null, redact: false })
    const byId = Object.fromEntries(index.cells.map((c) => [c.id, c]))
    expect(byId.strict).toMatchObject({ disposition: 'failed' })
    expect(byId.strict?.reason).toBe(
      'candidate: 3/12 requests failed, over the maximum failed share 0 (the default for a required cell; set maxFailedShare to allow some)',
    )
    expect(byId.lenient?.disposition).toBe('accepted')
    expect(byId.optional?.disposition).toBe('accepted')
    // Accepted or not, the failures reach the evidence as a finding with the counts per arm.
    expect(index.findings.filter((f) => f.kind === 'failed-requests')).toEqual(
      ['strict', 'lenient', 'optional'].map((cell) => ({
        kind: 'failed-requests',
        cell,
        message: 'requests failed: candidate 3/12 (see failures in the run records)',
      })),
    )
  })

  test("an arm whose host stole 1% of the machine's CPU or more gets a host-noise finding; promotion does not change", () => {
    const steal = (r: RunRecord, hostStealShare: number | null): RunRecord => ({ ...r, harness: { ...r.harness, hostStealShare } })
    const cells = [
      declared('noisy', { records: { baseline: [steal(baseline, 0.002)], candidate: [steal(candidate, 0.034)] } }),
      declared('quiet', { records: { baseline: [steal(baseline, 0.009)], candidate: [steal(candidate, null)] } }),
    ]
    const { index } = buildEvidence([{ file: 'benchmarks/f.bench.ts', meta: { cells } }], [], { suiteCommit: null, redact: false })
    expect(index.cells.find((c) => c.id === 'noisy')?.arms.map((a) => a.hostStealShare)).toEqual([0.002, 0.034])
    expect(index.findings.filter((f) => f.kind === 'host-noise')).toEqual([
      {
        kind: 'host-noise',
        cell: 'noisy',
        message:
          "the hypervisor took 3.4% (candidate) of the machine's CPU while it measured: a chunk due in a stolen slice is read late, " +
          'so tails of a few ms measure the host as much as the engine',
      },
    ])
    const unstolen = cells.map((c) =>
      declared(c.id, { records: { baseline: [steal(baseline, null)], candidate: [steal(candidate, null)] } }),
    )
    const without = buildEvidence([{ file: 'benchmarks/f.bench.ts', meta: { cells: unstolen } }], [], { suiteCommit: null, redact: false })
    expect(index.promotion).toEqual(without.index.promotion)
    expect(index.cells.map((c) => c.disposition)).toEqual(without.index.cells.map((c) => c.disposition))
    expect(renderBoard(index, boardFiles(index))).toContain('- **host-noise** noisy: the hypervisor took 3.4% (candidate)')
  })

  test('promotable only when every required cell is accepted and every test passed', () => {
    const { files, tests } = suite()
    const onlyWon = [
      { ...files[0], meta: { cells: files[0]?.meta.cells.filter((c) => c.id === 'won' || c.id === 'never') ?? [] } },
    ] as SpecFileInput[]
    expect(buildEvidence(onlyWon, tests, { suiteCommit: null, redact: false }).index.promotion).toEqual({ promotable: true, reasons: [] })
    const failing = [...tests, { file: 'benchmarks/a.bench.ts', name: 'won > something else', state: 'failed' as const, meta: undefined }]
    expect(buildEvidence(onlyWon, failing, { suiteCommit: null, redact: false }).index.promotion.reasons).toEqual([
      'test "won > something else" in benchmarks/a.bench.ts failed',
    ])
  })

  test('the same id in two files gets a suffix; the order of inputs does not matter', () => {
    const { files, tests } = suite()
    const twice = [files[0] as SpecFileInput, { file: 'benchmarks/b.bench.ts', meta: { cells: [declared('won')] } }]
    const a = buildEvidence(twice, tests, { suiteCommit: null, redact: false })
    const b = buildEvidence([...twice].reverse(), [...tests].reverse(), { suiteCommit: null, redact: false })
    expect(a.index.cells.map((c) => c.id)).toEqual(['won', 'crashed', 'threw', 'never', 'won~2'])
    expect(JSON.stringify(b)).toBe(JSON.stringify(a))
  })
})

describe('an evidence directory', () => {
  test('is complete, carries no secret, and verifies; a flipped byte is caught and named', async ({ tmpDir }) => {
    const out = join(tmpDir, 'complete')
    const { files, tests } = suite()
    await writeEvidence(out, buildEvidence(files, tests, { suiteCommit: null, redact: false }), DEFAULT_RENDERERS)
    const names = (await readdir(out, { recursive: true })).map(String).sort()
    expect(names).toEqual(
      expect.arrayContaining([
        'README.md',
        SUMS_FILE,
        'index.html',
        'index.json',
        'runs/baseline/won.json',
        'charts/decode-delta-heatmap.svg',
      ]),
    )
    for (const name of names.filter((n) => n.includes('.'))) {
      const text = await readFile(join(out, name), 'utf8')
      expect(text, name).not.toContain(SECRET)
      expect(text, name).not.toMatch(/authorization|bearer\s|api[_-]?key"?\s*[:=]\s*"?sk-/i)
    }
    expect(await verifyEvidence(out)).toMatchObject({ problems: [], records: 4 })

    const record = join(out, 'runs/candidate/won.json')
    const bytes = await readFile(record)
    // A digit of the first request's TTFT: flipped, it is another digit, so the record still reads.
    const at = bytes.indexOf('"ttftMs":') + '"ttftMs":'.length
    bytes[at] = (bytes[at] as number) ^ 1
    await writeFile(record, bytes)
    const { problems } = await verifyEvidence(out)
    expect(problems[0]).toMatch(/^runs\/candidate\/won\.json: sha256 [0-9a-f]{16}… ≠ [0-9a-f]{16}… in SHA256SUMS$/)
    expect(problems.every((p) => p.startsWith('runs/candidate/won.json'))).toBe(true)
  })

  test('a summary that no longer matches its record is named, even with every hash updated', async ({ tmpDir }) => {
    const out = join(tmpDir, 'tampered')
    const { files, tests } = suite()
    const built = buildEvidence(files, tests, { suiteCommit: null, redact: false })
    const arm = built.index.cells[0]?.arms[1]
    if (arm === undefined) throw new Error('no arm')
    arm.timings.decodeTokPerS.p50 = (arm.timings.decodeTokPerS.p50 ?? 0) * 1.5
    await writeEvidence(out, built, DEFAULT_RENDERERS)
    expect((await verifyEvidence(out)).problems).toEqual([
      'index.json: cell won candidate launch 1: timings.decodeTokPerS.p50 differs from its run record runs/candidate/won.json',
    ])
  })

  test('a record whose metrics differ from its requests is named', async ({ tmpDir }) => {
    const out = join(tmpDir, 'metrics')
    const edited = {
      ...candidate,
      metrics: { ...candidate.metrics, totalCompletionTokens: (candidate.metrics.totalCompletionTokens as number) + 1 },
    }
    const built = buildEvidence(
      [{ file: 'a', meta: { cells: [declared('won', { records: { baseline: [baseline], candidate: [edited] } })] } }],
      [],
      { suiteCommit: null, redact: false },
    )
    await writeEvidence(out, built, DEFAULT_RENDERERS)
    expect((await verifyEvidence(out)).problems).toEqual([
      'runs/candidate/won.json: metrics.totalCompletionTokens differs from what its requests give',
    ])
  })

  test('a crash while writing leaves the previous evidence intact; report renders it again identically', async ({ tmpDir }) => {
    const out = join(tmpDir, 'atomic')
    const { files, tests } = suite()
    await writeEvidence(out, buildEvidence(files, tests, { suiteCommit: null, redact: false }), DEFAULT_RENDERERS)
    const before = await readFile(join(out, 'index.json'), 'utf8')
    const crashing: Renderers = {
      ...DEFAULT_RENDERERS,
      html: () => {
        throw new Error('renderer crashed')
      },
    }
    await expect(
      writeEvidence(out, buildEvidence(files.slice(0, 0), tests, { suiteCommit: null, redact: false }), crashing),
    ).rejects.toThrow('renderer crashed')
    await expect(
      writeEvidence(
        out,
        {
          index: { ...buildEvidence(files, [], { suiteCommit: null, redact: false }).index },
          runs: [{ path: '../escape.json', content: '{}' }],
        },
        DEFAULT_RENDERERS,
      ),
    ).rejects.toThrow(/escapes the directory/)
    expect(await readFile(join(out, 'index.json'), 'utf8')).toBe(before)
    expect((await readdir(tmpDir)).filter((n) => n.includes('staging'))).toEqual([])
    expect(await verifyEvidence(out)).toMatchObject({ problems: [] })

    const sums = await readFile(join(out, SUMS_FILE), 'utf8')
    await writeEvidence(out, await readEvidence(out), DEFAULT_RENDERERS)
    expect(await readFile(join(out, SUMS_FILE), 'utf8')).toBe(sums)
  })

  test('an interrupted swap is repaired: the previous evidence is put back before the next write', async ({ tmpDir }) => {
    const out = join(tmpDir, 'swap')
    const { files, tests } = suite()
    await writeEvidence(out, buildEvidence(files, tests, { suiteCommit: null, redact: false }), DEFAULT_RENDERERS)
    const previous = join(tmpDir, '.swap.previous-1-dead')
    await rm(previous, { recursive: true, force: true })
    await mkdir(previous)
    await writeFile(join(previous, 'marker'), 'old evidence')
    await rm(out, { recursive: true })
    // The write that was interrupted after its first rename: the directory is missing, the previous one is kept.
    const { writeDirectoryAtomically } = await import('./write.ts')
    await writeDirectoryAtomically(out, [{ path: 'fresh', content: 'new' }])
    expect(await readdir(out)).toEqual(['fresh'])
    expect((await readdir(tmpDir)).filter((n) => n.startsWith('.swap.'))).toEqual([])
  })

  test('an open-loop cell under an SLO shows its good share, goodput and send lag, and verifies', async ({ simEngine, tmpDir }) => {
    const out = join(tmpDir, 'open-loop')
    const record = await runCell({
      baseUrl: simEngine.url,
      model: 'm',
      requests: 16,
      maxTokens: 8,
      workload: { promptTokens: 32 },
      arrival: { kind: 'poisson', ratePerS: 40 },
      slo: { ttftMs: 1000 },
    })
    const built = buildEvidence(
      [
        {
          file: 'a',
          meta: { cells: [declared('open', { kind: 'cell', engines: { cell: 'sim' }, ladder: 'sweep', records: { cell: [record] } })] },
        },
      ],
      [],
      { suiteCommit: null, redact: false },
    )
    const cell = built.index.cells[0]
    expect(cell?.plan).toMatchObject({ arrival: 'poisson', arrivalRatePerS: 40 })
    expect(cell?.arms[0]?.load).toMatchObject({ goodFraction: record.metrics.goodput?.fraction, sendLagP99Ms: record.harness.sendLagP99Ms })
    expect(cell?.arms[0]?.load.inFlightMax).toBeGreaterThan(0)
    await writeEvidence(out, built, DEFAULT_RENDERERS)
    const board = await readFile(join(out, 'README.md'), 'utf8')
    expect(board).toMatch(/^## Open loop/m)
    expect(board).toMatch(/\| open · cell \| poisson 40 req\/s \| \d+\.\d% \[/)
    expect(await readFile(join(out, 'charts/goodput-by-rate.svg'), 'utf8')).toContain('>sweep<')
    expect(await verifyEvidence(out)).toMatchObject({ problems: [] })
  })

  test('redaction replaces URLs and the host name everywhere', async ({ tmpDir }) => {
    const out = join(tmpDir, 'redacted')
    const { files, tests } = suite()
    await writeEvidence(out, buildEvidence(files, tests, { suiteCommit: null, redact: true }), DEFAULT_RENDERERS)
    for (const name of ['index.json', 'runs/baseline/won.json', 'README.md']) {
      expect(await readFile(join(out, name), 'utf8'), name).not.toMatch(/https?:\/\/127\.0\.0\.1/)
    }
    expect(await readFile(join(out, 'runs/baseline/won.json'), 'utf8')).toContain('[redacted-url]')
    expect(JSON.parse(await readFile(join(out, 'index.json'), 'utf8')).provenance.redacted).toBe(true)
    expect(await verifyEvidence(out)).toMatchObject({ problems: [] })
  })
})
