/**
 * `verifyEvidence` decides every verdict again from the run records, so an index.json whose
 * verdicts were edited, with its statistics and SHA256SUMS made consistent again as an attacker
 * would, is caught; and a signed directory is checked against its public key.
 */
import { generateKeyPairSync, type KeyObject } from 'node:crypto'
import { mkdir, mkdtemp, readdir, readFile, rm, truncate, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { reseal } from '../../fixtures/evidence-seal.ts'
import { okRequest } from '../../fixtures/gate-fixture.ts'
import { checkMeta, decisionMeta } from '../../fixtures/judged-meta.ts'
import { measuredArm } from '../../fixtures/manifest.ts'
import { decideAgain } from '../gates/decide-again.ts'
import { sloGate } from '../gates/slo.ts'
import { computeCellMetrics } from '../metrics/cell-metrics.ts'
import { parseRunRecord } from '../record/record-io.ts'
import { failedCellRecord } from '../runner/run-record.ts'
import type { JudgedSearch } from '../schema/task-meta.ts'
import type { EvidenceIndex } from '../schema/evidence.ts'
import type { RunRecord } from '../schema/run.ts'
import type { DeclaredCell } from '../schema/task-meta.ts'
import { armSummary } from './arm-summary.ts'
import { buildEvidence, promotionOf, sha256, statisticsOf, type TestInput } from './build.ts'
import { DEFAULT_RENDERERS } from './renderers.ts'
import { listFiles, verifyEvidence } from './verify.ts'
import { MAX_EVIDENCE_FILE_BYTES, SIGNATURE_FILE, signingKeyFromEnv, SUMS_FILE, writeEvidence } from './write.ts'

let dir: string
let slow: RunRecord
let fast: RunRecord

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'servegate-verify-'))
  slow = await measuredArm(300)
  fast = await measuredArm(600)
}, 60_000)

afterAll(async () => {
  await rm(dir, { recursive: true, force: true })
})

function declared(id: string, records: DeclaredCell['records'], over: Partial<DeclaredCell> = {}): DeclaredCell {
  return {
    id,
    kind: 'pair',
    required: true,
    ladder: null,
    engines: { baseline: 'a', candidate: 'b' },
    status: 'measured',
    error: null,
    records,
    ...over,
  }
}

/** A won pair and a lost one (the arms swapped), each with a matched-pair check and a decode win gate. */
function built() {
  const won = { baseline: [slow], candidate: [fast] }
  const lost = { baseline: [fast], candidate: [slow] }
  const tests: TestInput[] = (
    [
      ['won', won],
      ['lost', lost],
    ] as const
  ).flatMap(([id, records]) => {
    const gate = decisionMeta(id, records, { gate: 'toWinDecode', launchNoise: 0 })
    const check = checkMeta(id, 'toBeMatchedPair', records)
    return [
      {
        file: 'a.bench.ts',
        name: `${id} > wins decode`,
        state: gate.passed ? 'passed' : 'failed',
        meta: { decisions: [gate], checks: [] },
      },
      {
        file: 'a.bench.ts',
        name: `${id} > is matched`,
        state: check.passed ? 'passed' : 'failed',
        meta: { decisions: [], checks: [check] },
      },
    ] satisfies TestInput[]
  })
  const cells = [declared('won', won), declared('lost', lost)]
  return buildEvidence([{ file: 'a.bench.ts', meta: { cells } }], tests, { suiteCommit: null, redact: false })
}

/**
 * Edits index.json as an attacker would: the edit, then the statistics and the promotion made
 * to agree with it and SHA256SUMS written again over every file, so every hash, count and
 * reason agrees with the edited index.
 */
async function tamper(out: string, edit: (index: EvidenceIndex) => void): Promise<void> {
  const index = JSON.parse(await readFile(join(out, 'index.json'), 'utf8')) as EvidenceIndex
  edit(index)
  index.statistics = statisticsOf(index.cells, index.gates)
  index.promotion = promotionOf(index.cells, index.gates, [])
  await writeFile(join(out, 'index.json'), `${JSON.stringify(index, null, 2)}\n`)
  await reseal(out)
}

/** A fresh evidence directory of `built()`, unsigned unless a key is given. */
async function written(name: string, signingKey: KeyObject | null = null): Promise<string> {
  const out = join(dir, name)
  await writeEvidence(out, built(), DEFAULT_RENDERERS, { signingKey })
  return out
}

describe('verify decides every verdict again', () => {
  test('an unedited directory verifies: every gate, check, disposition and the promotion', async () => {
    const out = await written('unedited')
    const index = JSON.parse(await readFile(join(out, 'index.json'), 'utf8')) as EvidenceIndex
    expect(index.gates.map((g) => [g.cell, g.decision.outcome, g.testPassed])).toEqual([
      ['lost', 'fail', false],
      ['won', 'pass', true],
    ])
    expect(index.promotion.promotable).toBe(false)
    expect(await verifyEvidence(out)).toMatchObject({ problems: [], records: 4, signature: 'absent' })
  })

  test('run records keep their gaps packed, one line a request, and read back as measured: verify re-derives every figure', async () => {
    const out = await written('packed')
    const path = 'runs/candidate/lost.json'
    const text = await readFile(join(out, path), 'utf8')
    const lines = text.split('\n').filter((l) => l.startsWith('{"status":'))
    expect(lines).toHaveLength(slow.requests.length)
    for (const line of lines) {
      expect(line).toMatch(
        /"itlMs":null,.*"itlPacked":\{"unit":"us","codec":"delta-zigzag-leb128","count":\d+,"base64":"[A-Za-z0-9+/]*={0,2}"\}\},?$/,
      )
    }
    expect(text).not.toMatch(/"itlMs":\s*\[/)
    expect(slow.metrics.distributions.itlMs.samples).toBeGreaterThan(100)
    // Bit for bit: the gaps were kept to the µs when measured, so the figures computed then are those verify computes now.
    expect(parseRunRecord(JSON.parse(text), path)).toEqual(slow)
    expect((await verifyEvidence(out)).problems).toEqual([])
  })

  test('a run record whose packed gaps were corrupted, sealed again, is refused naming the file, the request and the field', async () => {
    const out = await written('corrupt-gaps')
    const path = 'runs/candidate/lost.json'
    const text = await readFile(join(out, path), 'utf8')
    const corrupt = text.replace(/("index":2,.*"count":)(\d+)/, (_, head: string, count: string) => `${head}${Number(count) + 1}`)
    expect(corrupt).not.toBe(text)
    await writeFile(join(out, path), corrupt)
    await tamper(out, (index) => {
      const arm = index.cells.find((c) => c.id === 'lost')?.arms.find((a) => a.arm === 'candidate')
      if (arm === undefined) throw new Error('lost has no candidate arm')
      Object.assign(arm.record, { bytes: Buffer.byteLength(corrupt), sha256: sha256(corrupt) })
    })
    const { problems } = await verifyEvidence(out)
    expect(problems).toContainEqual(
      expect.stringMatching(
        /^runs\/candidate\/lost\.json: not a valid servegate\.run\/v1 record: ✖ request 2: itlPacked\.count is \d+ but the bytes hold only \d+ gaps; .*→ at requests\[2\]\.itlPacked\.count/,
      ),
    )
  })

  test('a gate outcome edited to pass, with its test, counts, promotion and SHA256SUMS made consistent, is named with both values', async () => {
    const out = await written('edited-outcome')
    await tamper(out, (index) => {
      const lost = index.gates.find((g) => g.cell === 'lost')
      if (lost === undefined) throw new Error('no gate on lost')
      Object.assign(lost, { testPassed: true, passed: true })
      lost.decision.outcome = 'pass'
      index.findings = index.findings.filter((f) => f.cell !== 'lost')
      index.promotion = { promotable: true, reasons: [] }
    })
    expect((await verifyEvidence(out)).problems).toEqual([
      'index.json: gate toWinDecode on cell lost ("lost > wins decode"): decision.outcome is "pass" in the index, "fail" from the run records',
    ])
  })

  test('a test result, a policy, a check, a disposition or the records a gate judged, each edited alone, is named', async () => {
    const out = await written('edited-each')
    const cases: Array<[string, (index: EvidenceIndex) => void]> = [
      [
        'index.json: gate toWinDecode on cell lost ("lost > wins decode"): testPassed is true in the index, but its assertion (passed false) did not hold',
        (index) => Object.assign(index.gates[0] as object, { testPassed: true }),
      ],
      [
        'index.json: gate toWinDecode on cell lost ("lost > wins decode"): passed is true in the index, false from its outcome fail under inconclusive \'fail\'',
        (index) => Object.assign(index.gates[0] as object, { passed: true, isNot: true, testPassed: true }),
      ],
      [
        "index.json: gate toWinDecode on cell lost (\"lost > wins decode\"): policy.inconclusive is 'pass' in the index, 'fail' by default for a superiority claim",
        (index) => Object.assign(index.gates[0]?.policy as object, { inconclusive: 'pass' }),
      ],
      [
        'index.json: check toBeMatchedPair on cell won ("won > is matched"): findings.0 is "the same" in the index, undefined from the run records',
        (index) => Object.assign(index.cells[0]?.checks[0] as object, { findings: ['the same'] }),
      ],
      [
        'index.json: cell won: disposition is "failed" in the index, "accepted" from its run records and checks',
        (index) => Object.assign(index.cells[0] as object, { disposition: 'failed' }),
      ],
    ]
    for (const [problem, edit] of cases) {
      await writeEvidence(out, built(), DEFAULT_RENDERERS, { signingKey: null })
      await tamper(out, edit)
      expect((await verifyEvidence(out)).problems, problem).toContain(problem)
    }
    // A gate pointed at a run record this evidence does not hold.
    await writeEvidence(out, built(), DEFAULT_RENDERERS, { signingKey: null })
    await tamper(out, (index) => {
      const judged = index.gates[0]?.judged
      if (judged?.kind !== 'pair') throw new Error('a pair gate expected')
      judged.candidate = ['run-not-kept']
    })
    expect((await verifyEvidence(out)).problems).toContain(
      'index.json: gate toWinDecode on cell lost ("lost > wins decode"): cannot be decided again: ' +
        'it judged the run record run-not-kept, which is not in this evidence (or could not be read)',
    )
  })

  test("a gate and a check on a pair's arms swapped verify from the records in the roles they judged", async () => {
    const won = { baseline: [slow], candidate: [fast] }
    const swapped = { baseline: [fast], candidate: [slow] }
    const gate = decisionMeta('won', swapped, { gate: 'toWinDecode', margin: 0.1, launchNoise: 0 }, { isNot: true })
    expect([gate.decision.outcome, gate.passed]).toEqual(['fail', false])
    const tests: TestInput[] = [
      { file: 'a.bench.ts', name: 'loses with its arms swapped', state: 'passed', meta: { decisions: [gate], checks: [] } },
      {
        file: 'a.bench.ts',
        name: 'is matched with its arms swapped',
        state: 'passed',
        meta: { decisions: [], checks: [checkMeta('won', 'toBeMatchedPair', swapped)] },
      },
    ]
    const out = join(dir, 'swapped')
    const evidence = buildEvidence([{ file: 'a.bench.ts', meta: { cells: [declared('won', won)] } }], tests, {
      suiteCommit: null,
      redact: false,
    })
    await writeEvidence(out, evidence, DEFAULT_RENDERERS, { signingKey: null })
    expect(evidence.index.promotion.promotable).toBe(true)
    expect(await verifyEvidence(out)).toMatchObject({ problems: [], records: 2 })
  })

  test('a run record edited, with its metrics, its summary, its reference and SHA256SUMS made to agree, is caught by its gate', async () => {
    const out = await written('edited-record')
    const index = JSON.parse(await readFile(join(out, 'index.json'), 'utf8')) as EvidenceIndex
    const arm = index.cells.find((c) => c.id === 'lost')?.arms.find((a) => a.arm === 'candidate')
    if (arm === undefined) throw new Error('lost has no candidate arm')
    // The losing candidate's decode rates tripled, as if it had won.
    const record = parseRunRecord(JSON.parse(await readFile(join(out, arm.record.path), 'utf8')), arm.record.path)
    const requests = record.requests.map((r) =>
      r.status === 'ok' && r.decodeTokPerS !== null ? { ...r, decodeTokPerS: r.decodeTokPerS * 3 } : r,
    )
    const metrics = {
      ...record.metrics,
      ...computeCellMetrics(requests, record.metrics.wallClockMs, record.metrics.goodput?.slo ?? null),
      openLoop: record.metrics.openLoop,
    }
    const content = `${JSON.stringify({ ...record, requests, metrics })}\n`
    await writeFile(join(out, arm.record.path), content)
    await tamper(out, (edited) => {
      const lost = edited.cells.find((c) => c.id === 'lost')
      const k = lost?.arms.findIndex((a) => a.arm === 'candidate') ?? -1
      if (lost === undefined || k < 0) throw new Error('lost has no candidate arm')
      const ref = { path: arm.record.path, bytes: Buffer.byteLength(content), sha256: sha256(content) }
      lost.arms[k] = armSummary(parseRunRecord(JSON.parse(content), ref.path), 'candidate', 1, ref)
    })
    expect((await verifyEvidence(out)).problems).toEqual([
      expect.stringMatching(
        /^index\.json: gate toWinDecode on cell lost \("lost > wins decode"\): decision\.\S+ is .+ in the index, .+ from the run records$/,
      ),
    ])
  })
})

describe('signed evidence', () => {
  const pair = () => generateKeyPairSync('ed25519')

  test('signs SHA256SUMS with the key from SERVEGATE_SIGNING_KEY, which no file holds; the public key verifies it', async () => {
    const { privateKey, publicKey } = pair()
    const pem = privateKey.export({ type: 'pkcs8', format: 'pem' }).toString()
    const key = signingKeyFromEnv({ SERVEGATE_SIGNING_KEY: pem })
    expect(key?.asymmetricKeyType).toBe('ed25519')
    const out = await written('signed', key)
    expect(await verifyEvidence(out, { publicKey })).toMatchObject({ problems: [], signature: 'verified' })
    expect(await verifyEvidence(out)).toMatchObject({ problems: [], signature: 'unchecked' })
    const body = pem.split('\n')[1] as string
    for (const name of await readdir(out, { recursive: true }))
      if (name.includes('.')) expect(await readFile(join(out, String(name)), 'utf8'), String(name)).not.toContain(body)
  })

  test('a wrong key, a missing signature and evidence edited after signing each fail with what to do', async () => {
    const { privateKey, publicKey } = pair()
    const out = await written('signed-checked', privateKey)
    expect((await verifyEvidence(out, { publicKey: pair().publicKey })).problems).toEqual([
      `${SIGNATURE_FILE}: not a signature of ${SUMS_FILE} by this public key: the evidence changed after it was signed, or another key signed it`,
    ])
    await tamper(out, (index) => Object.assign(index.provenance, { suiteCommit: 'f'.repeat(40) }))
    expect((await verifyEvidence(out, { publicKey })).problems).toEqual([
      `${SIGNATURE_FILE}: not a signature of ${SUMS_FILE} by this public key: the evidence changed after it was signed, or another key signed it`,
    ])
    await rm(join(out, SIGNATURE_FILE))
    expect((await verifyEvidence(out, { publicKey })).problems).toEqual([
      `${SIGNATURE_FILE}: missing, but a public key was given: this evidence is not signed ` +
        '(the reporter signs it when SERVEGATE_SIGNING_KEY holds the ed25519 private key)',
    ])
  })

  test('a signing key that is not an ed25519 private key is refused without quoting it', () => {
    const rsa = generateKeyPairSync('rsa', { modulusLength: 1024 }).privateKey.export({ type: 'pkcs8', format: 'pem' }).toString()
    expect(() => signingKeyFromEnv({ SERVEGATE_SIGNING_KEY: rsa })).toThrow(
      /^SERVEGATE_SIGNING_KEY holds a rsa key, not ed25519; set it to/,
    )
    const garbage = 'not-a-key-7f3a9c'
    expect(() => signingKeyFromEnv({ SERVEGATE_SIGNING_KEY: garbage })).toThrow(
      /^SERVEGATE_SIGNING_KEY is set but is not a private key in PEM; /,
    )
    try {
      signingKeyFromEnv({ SERVEGATE_SIGNING_KEY: garbage })
    } catch (error) {
      expect((error as Error).message).not.toContain(garbage)
    }
    expect(signingKeyFromEnv({})).toBeNull()
  })
})

describe('a capacity comparison', () => {
  const slo = { ttftMs: 500, tpotMs: null, e2eMs: null, itlMs: null, itlPercentile: 99 }

  /** A probe's record: 100 requests, `bad` of them over the 500 ms TTFT bound, metrics from its requests. */
  function probeRecord(bad: number): RunRecord {
    const base = failedCellRecord(
      { baseUrl: 'http://127.0.0.1:1', model: 'm', requests: 100 },
      { code: 'INTERNAL', message: 'x', httpStatus: null, retryAfterS: null },
    )
    const requests = Array.from({ length: 100 }, (_, i) => okRequest(i, { ttftMs: i < bad ? 900 : 200, e2eMs: 300 }))
    return { ...base, cellFailure: null, requests, completed: 100, metrics: computeCellMetrics(requests, 10_000) }
  }

  /** A search of probes at these rates, each with that many requests over the bound; the bracket from their SLO verdicts. */
  function search(id: string, probes: ReadonlyArray<[rate: number, bad: number]>): { judged: JudgedSearch; records: RunRecord[] } {
    const records = probes.map(([, bad]) => probeRecord(bad))
    const judged = probes.map(([value], k) => {
      const d = sloGate(records[k] as RunRecord, { ...slo, percentile: 90, confidence: 0.98, gate: 'capacity probe' })
      const { estimate: fraction, low, high } = d.effect
      const good = Math.round((fraction ?? 0) * 100)
      return {
        value,
        outcome: d.outcome,
        samples: 100,
        good,
        fraction,
        low,
        high,
        sendLagP99Ms: null,
        invalid: null,
        runId: records[k]?.runId ?? '',
      }
    })
    const passing = judged.filter((p) => p.outcome === 'pass').map((p) => p.value)
    const failing = judged.filter((p) => p.outcome !== 'pass').map((p) => p.value)
    const bracket = { low: passing.length > 0 ? Math.max(...passing) : null, high: failing.length > 0 ? Math.min(...failing) : null }
    const s: JudgedSearch = {
      id,
      axis: 'rate',
      slo,
      requiredFraction: 0.9,
      confidence: 0.98,
      bracket,
      status: 'bracketed',
      probes: judged,
      warnings: [],
    }
    return { judged: s, records }
  }

  test("its probes' SLO verdicts are checked against their records, and the gate decided again from the brackets", async () => {
    const candidate = search('cand', [
      [8, 0],
      [16, 0],
      [32, 40],
    ])
    const baseline = search('base', [
      [4, 0],
      [8, 40],
    ])
    const judged = { kind: 'capacity' as const, candidate: candidate.judged, baseline: baseline.judged }
    const options = { gate: 'toSustainMoreThan', by: 0.2 }
    const decision = decideAgain('toSustainMoreThan', judged, options)
    expect(decision.outcome).toBe('pass')
    const policy = { inconclusive: 'fail' as const, from: 'default' as const }
    const entry = { cell: 'cand', decision, judged, options, policy, passed: true, isNot: false }
    const cells = [candidate, baseline].flatMap(({ judged: s, records }) =>
      records.map((r, k) => ({
        id: `${s.id}-probe${k + 1}`,
        kind: 'cell' as const,
        required: true,
        ladder: s.id,
        engines: { cell: s.id },
        status: 'measured' as const,
        error: null,
        records: { cell: [r] },
      })),
    )
    const tests: TestInput[] = [
      { file: 'c.bench.ts', name: 'sustains 20% more', state: 'passed', meta: { decisions: [entry], checks: [] } },
    ]
    const out = join(dir, 'capacity')
    await writeEvidence(
      out,
      buildEvidence([{ file: 'c.bench.ts', meta: { cells } }], tests, { suiteCommit: null, redact: false }),
      DEFAULT_RENDERERS,
      {
        signingKey: null,
      },
    )
    expect(await verifyEvidence(out)).toMatchObject({ problems: [] })
    // The baseline's failing probe claimed to pass, with its bracket and the verdict made to agree.
    await tamper(out, (index) => {
      const gate = index.gates[0]
      if (gate?.judged.kind !== 'capacity') throw new Error('a capacity gate expected')
      Object.assign(gate.judged.baseline.probes[1] as object, { outcome: 'pass' })
      gate.judged.baseline.bracket = { low: 8, high: null }
      gate.decision = JSON.parse(JSON.stringify(decideAgain('toSustainMoreThan', gate.judged, options)))
      gate.passed = gate.decision.outcome === 'pass'
      gate.testPassed = gate.passed
    })
    expect((await verifyEvidence(out)).problems).toEqual([
      `index.json: gate toSustainMoreThan on cell cand ("sustains 20% more"): search base probe 2 (${baseline.records[1]?.runId}): ` +
        'outcome is "pass" in the index, "fail" from its run record',
    ])
  })
})

describe('evidence is a closed world', () => {
  const unreferenced = (path: string) =>
    `${path}: not referenced by index.json and not one of index.json, SHA256SUMS, SHA256SUMS.sig: ` +
    'servegate wrote no such file, so it is not part of this evidence; remove it'
  const lookAlike = (shown: string) =>
    `${shown}: its name holds "і" (U+0456), outside the safe set of evidence names (ASCII letters, digits, ".", "_", "-", "/"); ` +
    'servegate writes no such name'

  test('a run record planted under a look-alike name (a Cyrillic і), with SHA256SUMS sealed again, is refused by name', async () => {
    const out = await written('look-alike')
    // The losing candidate's record with its decode rates tripled, beside the real one.
    const record = JSON.parse(await readFile(join(out, 'runs/candidate/lost.json'), 'utf8')) as RunRecord
    const requests = record.requests.map((r) => (r.decodeTokPerS === null ? r : { ...r, decodeTokPerS: r.decodeTokPerS * 3 }))
    const forged = 'runs/cand\u0456date/lost.json'
    await mkdir(join(out, dirname(forged)), { recursive: true })
    await writeFile(join(out, forged), `${JSON.stringify({ ...record, requests })}\n`)
    await reseal(out)
    expect((await verifyEvidence(out)).problems).toEqual([
      lookAlike('runs/cand\\u{456}date/lost.json'),
      unreferenced('runs/cand\\u{456}date/lost.json'),
    ])

    // The index pointed at it, with its reference, SHA256SUMS and the real record's absence made to agree.
    await tamper(out, (index) => {
      const arm = index.cells.find((c) => c.id === 'lost')?.arms.find((a) => a.arm === 'candidate')
      if (arm === undefined) throw new Error('lost has no candidate arm')
      arm.record.path = forged
    })
    await rm(join(out, 'runs/candidate/lost.json'))
    await reseal(out)
    const { problems } = await verifyEvidence(out)
    expect(problems).toContain(lookAlike('runs/cand\\u{456}date/lost.json'))
    expect(problems).toContain(
      'index.json cell lost: references runs/cand\\u{456}date/lost.json, but its name holds "і" (U+0456), outside the safe set ' +
        'of evidence names (ASCII letters, digits, ".", "_", "-", "/"); it is not read',
    )
  })

  test('a file no index entry references, sealed into SHA256SUMS, is refused by name', async () => {
    const out = await written('unreferenced')
    await writeFile(join(out, 'junk.bin'), Buffer.from([0, 0xff, 0x80, 0x7f]))
    await writeFile(join(out, 'runs/cell-notes.json'), '{}\n')
    await reseal(out)
    expect((await verifyEvidence(out)).problems).toEqual([unreferenced('junk.bin'), unreferenced('runs/cell-notes.json')])
  })

  test('a file past the size bound is refused by name, size and bound, and not read; the default bound is 1 GiB', async () => {
    const out = await written('oversized')
    const largest = Math.max(...(await Promise.all((await listFiles(out)).map(async (p) => (await readFile(join(out, p))).length))))
    // The bound holds: honest evidence of exactly that size verifies.
    expect(await verifyEvidence(out, { maxFileBytes: largest })).toMatchObject({ problems: [] })
    await writeFile(join(out, 'padding.bin'), Buffer.alloc(largest + 1))
    await reseal(out)
    expect((await verifyEvidence(out, { maxFileBytes: largest })).problems).toEqual([
      `padding.bin: ${largest + 1} bytes, over the ${largest}-byte bound of a file of evidence; servegate writes none so large, and verify does not read it`,
      unreferenced('padding.bin'),
    ])
    expect(MAX_EVIDENCE_FILE_BYTES).toBe(1024 ** 3)
    // Sparse: a file one byte past the default bound that takes no disk; only its size is read.
    await truncate(join(out, 'padding.bin'), MAX_EVIDENCE_FILE_BYTES + 1)
    expect((await verifyEvidence(out)).problems).toContain(
      `padding.bin: ${MAX_EVIDENCE_FILE_BYTES + 1} bytes, over the ${MAX_EVIDENCE_FILE_BYTES}-byte bound of a file of evidence; ` +
        'servegate writes none so large, and verify does not read it',
    )
  })

  test('an index.json or a run record with a duplicated key, sealed again, is refused naming the file, the key and its path', async () => {
    const out = await written('duplicate-key')
    const text = await readFile(join(out, 'index.json'), 'utf8')
    // JSON.parse keeps the last "promotable" (the honest false); a reader that keeps the first sees true.
    expect(text).toMatch(/\n {2}"promotion": \{\n {4}"promotable": false,/)
    const forged = text.replace('"promotion": {\n', '"promotion": {\n    "promotable": true,\n')
    await writeFile(join(out, 'index.json'), forged)
    await reseal(out)
    const line = forged.split('\n').findIndex((l) => l.includes('"promotable": false')) + 1
    expect((await verifyEvidence(out)).problems).toEqual([
      `${join(out, 'index.json')}: the key "promotable" appears twice in one object, at $.promotion.promotable (line ${line}); ` +
        'JSON readers differ on which value counts, so evidence holds each key once',
    ])

    await writeEvidence(out, built(), DEFAULT_RENDERERS, { signingKey: null })
    const path = 'runs/candidate/lost.json'
    // The first request's TTFT given twice, once escaped: readers that keep the first see 1 ms.
    const record = (await readFile(join(out, path), 'utf8')).replace('"requests": [\n{', '"requests": [\n{"\\u0074tftMs":1,')
    const requestLine = record.split('\n').findIndex((l) => l.startsWith('{"\\u0074tftMs":1,')) + 1
    expect(requestLine).toBeGreaterThan(1)
    await writeFile(join(out, path), record)
    await tamper(out, (index) => {
      const arm = index.cells.find((c) => c.id === 'lost')?.arms.find((a) => a.arm === 'candidate')
      if (arm === undefined) throw new Error('lost has no candidate arm')
      Object.assign(arm.record, { bytes: Buffer.byteLength(record), sha256: sha256(record) })
    })
    expect((await verifyEvidence(out)).problems).toContain(
      `${path}: the key "ttftMs" appears twice in one object, at $.requests[0].ttftMs (line ${requestLine}); ` +
        'JSON readers differ on which value counts, so evidence holds each key once',
    )
  })

  test('the writer holds itself to the same rules: a file the index does not reference, or one written twice, is not written', async () => {
    const out = join(dir, 'writer-rules')
    const evidence = built()
    const record = evidence.runs[0] as { path: string; content: string }
    const runs = (extra: { path: string; content: string }) => ({ ...evidence, runs: [...evidence.runs, extra] })
    await expect(
      writeEvidence(out, runs({ path: 'runs/extra.json', content: '{}' }), DEFAULT_RENDERERS, { signingKey: null }),
    ).rejects.toThrow('evidence file path is not referenced by index.json: "runs/extra.json"; servegate verify would refuse it')
    await expect(writeEvidence(out, runs(record), DEFAULT_RENDERERS, { signingKey: null })).rejects.toThrow(
      `evidence file path is written twice: "${record.path}"`,
    )
    await expect(readdir(out)).rejects.toThrow(/ENOENT/)
  })

  test('cells whose ids make the same file name get a run record and a chart each, and verify', async () => {
    const out = join(dir, 'alike-ids')
    const one = (id: string) => declared(id, { cell: [slow] }, { kind: 'cell', engines: { cell: 'a' } })
    // `fileSafe` makes the first two `a_b`, and the Cyrillic і of the third `_`.
    const cells = [one('a b'), one('a_b'), one('t\u0456ny')]
    const evidence = buildEvidence([{ file: 'a.bench.ts', meta: { cells } }], [], { suiteCommit: null, redact: false })
    await writeEvidence(out, evidence, DEFAULT_RENDERERS, { signingKey: null })
    const files = await listFiles(out)
    expect(files.filter((f) => f.startsWith('runs/'))).toEqual(['runs/cell/a_b-2.json', 'runs/cell/a_b.json', 'runs/cell/t_ny.json'])
    expect(files.filter((f) => f.startsWith('charts/cells/'))).toEqual([
      'charts/cells/a_b-2.svg',
      'charts/cells/a_b.svg',
      'charts/cells/t_ny.svg',
    ])
    expect(await verifyEvidence(out)).toMatchObject({ problems: [], records: 3 })
  })
})
