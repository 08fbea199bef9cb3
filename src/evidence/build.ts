/**
 * The evidence index from what the spec files and their tests reported: pure, so the reporter,
 * a merge of shards and `servegate report` build the same index from the same inputs.
 */
import { createHash } from 'node:crypto'
import { hostname } from 'node:os'
import {
  type ArmSummary,
  type Disposition,
  EVIDENCE_SCHEMA_ID,
  type EvidenceCell,
  type EvidenceIndex,
  type Finding,
  type GateEntry,
  type PairCheck,
  type PartialRun,
} from '../schema/evidence.ts'
import { runRecordText } from '../record/record-writer.ts'
import type { RunRecord } from '../schema/run.ts'
import type { DeclaredCell, FileMeta, TestMeta } from '../schema/task-meta.ts'
import { scrubDeep } from '../secrets.ts'
import { formatFixedPercent, formatInUnit } from '../number-format.ts'
import { SERVEGATE_VERSION } from '../version.ts'
import { policyText } from '../gates/inconclusive-policy.ts'
import { decideText } from '../gates/verdict.ts'
import { armSummary, planSummary } from './arm-summary.ts'
import { partialReason } from './partial-text.ts'
import { checkReason, gateReason } from './promotion-text.ts'

/** A spec file and the cells it declared (its meta as read, the version tag already checked). */
export interface SpecFileInput {
  /** Path relative to the project root, `/`-separated. */
  file: string
  meta: Pick<FileMeta, 'cells'>
}

/** A test and what its servegate assertions recorded. */
export interface TestInput {
  file: string
  /** The full name, suites included, e.g. `qwen3 c4 > wins decode`. */
  name: string
  state: 'passed' | 'failed' | 'skipped' | 'pending'
  /** Its meta as read, the version tag already checked; undefined when it recorded none. */
  meta: (Pick<TestMeta, 'decisions' | 'checks'> & Partial<Pick<TestMeta, 'storedBaselines'>>) | undefined
}

export interface BuildOptions {
  /** `git rev-parse HEAD` of the suite, or null. */
  suiteCommit: string | null
  /** Replace URLs and this machine's host name in the run records and the index. */
  redact: boolean
  /**
   * Why the run did not cover the suite (each filter or cause in words) and the spec files it left
   * out; the cells it did not measure are added from the pending ones. Null or absent: a complete run.
   */
  scope?: RunScope | null
}

/** What the reporter knows of a run that did not cover the suite. */
export type RunScope = Pick<PartialRun, 'reasons' | 'filesNotRun'>

/** A file to write into the evidence directory. */
export interface EvidenceFile {
  path: string
  content: string
}

export interface BuiltEvidence {
  /** The index without its artifacts (charts and pages are added by whoever renders them). */
  index: EvidenceIndex
  /** The run records, one file per launch per arm. */
  runs: EvidenceFile[]
}

const ARMS = ['cell', 'baseline', 'candidate'] as const

/**
 * An arm whose host stole this share of the machine's CPU or more gets a `host-noise` finding:
 * a steal of a few percent already moves ITL tails of a few milliseconds, so 1% is where a
 * reviewer should start to doubt them (docs/client-benchmark.md, "The host").
 */
const HOST_NOISE_STEAL_SHARE = 0.01

/** sha256 of a string's UTF-8 bytes, hex. */
export function sha256(content: string | Uint8Array): string {
  return createHash('sha256').update(content).digest('hex')
}

/** A cell id as a file name: anything outside [A-Za-z0-9._-] becomes `_`. */
export function fileSafe(id: string): string {
  return id.replace(/[^A-Za-z0-9._-]/g, '_')
}

/**
 * Replaces every URL and this machine's host name in a serialized record or index. A URL ends at
 * whitespace, a quote, `<`, `>` or a backslash, so in JSON text it never runs on through an
 * escaped newline into the next line of a message (the record and the index redact alike).
 */
function redactText(text: string): string {
  const host = hostname()
  const urls = text.replace(/https?:\/\/[^\s"'<>\\]+/g, '[redacted-url]')
  return host.length >= 3 ? urls.split(host).join('[redacted-host]') : urls
}

/**
 * `<stem><suffix>.json`, or `<stem>-2<suffix>.json`, `-3`… when that path is taken: two ids that
 * `fileSafe` makes alike (`a b`, `a_b`) still get a run record each.
 */
function freePath(stem: string, suffix: string, taken: Set<string>): string {
  let path = `${stem}${suffix}.json`
  for (let k = 2; taken.has(path); k++) path = `${stem}-${k}${suffix}.json`
  taken.add(path)
  return path
}

/** The path of one launch's run record in the evidence directory. */
function runPath(arm: string, cell: string, launch: number, launches: number, taken: Set<string>): string {
  return freePath(`runs/${arm}/${fileSafe(cell)}`, launches > 1 ? `.launch${launch}` : '', taken)
}

/**
 * Serializes a run record for the evidence as a run record file is laid out (record-writer.ts:
 * one line a request, its gaps packed), scrubbed of the registered secrets always, and redacted
 * (URLs, host name) if asked. One string a record: the evidence keeps, hashes and renders each
 * file whole before it writes the directory.
 */
export function serializeRecord(record: RunRecord, redact: boolean): string {
  return runRecordText(record, redact ? redactText : undefined)
}

/** Evidence ids: the declared id, suffixed with `~2`, `~3`… when another file used it first. */
function evidenceIds(files: readonly SpecFileInput[]): Map<string, string> {
  const taken = new Set<string>()
  const ids = new Map<string, string>()
  for (const f of files) {
    for (const c of f.meta.cells) {
      let id = c.id
      for (let k = 2; taken.has(id); k++) id = `${c.id}~${k}`
      taken.add(id)
      ids.set(`${f.file}\u0000${c.id}`, id)
    }
  }
  return ids
}

/** Why a cell that threw is blocked; `servegate verify` reads the error back from it. */
export const BLOCKED_PREFIX = 'its measurement threw before a record existed: '

/** Why a pending cell is pending. */
const PENDING_REASON = 'declared but not run: no test awaited it, or the run ended first'

/**
 * What became of a declared cell, and why: from its status, its records (a failed engine, failed
 * requests over its maximum share) and its checks (an unmatched pair).
 */
export function cellDisposition(
  cell: Pick<DeclaredCell, 'status' | 'error' | 'records' | 'required' | 'maxFailedShare'>,
  checks: readonly Pick<PairCheck, 'check' | 'passed' | 'findings'>[],
): { disposition: Disposition; reason: string | null } {
  if (cell.status === 'pending') return { disposition: 'pending', reason: PENDING_REASON }
  if (cell.status === 'threw') return { disposition: 'blocked', reason: `${BLOCKED_PREFIX}${cell.error ?? 'unknown error'}` }
  for (const arm of ARMS) {
    for (const r of cell.records[arm] ?? []) {
      if (r.cellFailure !== null)
        return { disposition: 'failed', reason: `${arm}: ${r.cellFailure.code}: ${r.cellFailure.message.split('\n')[0]}` }
    }
  }
  // The acceptance policy: an arm whose failed share is over the cell's maximum fails the cell.
  const limit = cell.maxFailedShare ?? (cell.required ? 0 : 1)
  const declared = cell.maxFailedShare !== undefined && cell.maxFailedShare !== null
  for (const arm of ARMS) {
    for (const r of cell.records[arm] ?? []) {
      // Requests cancelled on purpose are neither failed nor counted against the share.
      const total = r.requests.length - r.cancelled
      if (total > 0 && r.failed !== null && r.failed / total > limit) {
        const policy = !declared ? 'the default for a required cell; set maxFailedShare to allow some' : 'maxFailedShare'
        return {
          disposition: 'failed',
          reason: `${arm}: ${r.failed}/${total} requests failed, over the maximum failed share ${limit} (${policy})`,
        }
      }
    }
  }
  const unmatched = checks.find((c) => c.check === 'toBeMatchedPair' && !c.passed)
  if (unmatched !== undefined) return { disposition: 'failed', reason: `not a matched pair: ${unmatched.findings[0] ?? 'see its checks'}` }
  return { disposition: 'accepted', reason: null }
}

/** The findings a reviewer should read about one cell and its gates. */
function cellFindings(cell: EvidenceCell, gates: readonly GateEntry[]): Finding[] {
  const out: Finding[] = []
  const add = (kind: Finding['kind'], message: string) => out.push({ kind, cell: cell.id, message })
  if (cell.disposition !== 'accepted') add('cell-not-accepted', `${cell.disposition}: ${cell.reason ?? ''}`)
  for (const c of cell.checks) if (!c.passed) add('check-failed', `${c.check}: ${c.findings.slice(0, 3).join('; ') || 'failed'}`)
  for (const g of gates) {
    const d = g.decision
    // What would decide an undecided gate, in the option's own name.
    const decide = decideText(d) === '' ? '' : `; ${decideText(d)}`
    if (d.kind === 'superiority' && d.outcome !== 'pass') {
      const effect = d.outcome === 'inconclusive' ? `; ${policyText(g.policy, d.kind)}${decide}` : ''
      add(d.outcome === 'fail' ? 'non-win' : 'inconclusive', `${d.gate} ${d.outcome}: ${d.metric}${effect}`)
    }
    if (d.kind === 'non-regression' && d.outcome === 'fail') add('regression', `${d.gate}: confident regression of ${d.metric}`)
    if (d.kind === 'non-regression' && d.outcome === 'inconclusive')
      add('inconclusive', `${d.gate}: ${d.metric} not shown to hold; ${policyText(g.policy, d.kind)}${decide}`)
    if (d.kind === 'check' && d.outcome !== 'pass')
      add('check-failed', `${d.gate}: ${d.metric} ${formatInUnit(d.effect.estimate, d.effect.unit)}; ${d.rule}`)
    if (d.gate === 'toStayWithinAccuracyGap') for (const w of d.warnings) add('quality', w)
  }
  // Where a floor was assumed, or a profile or history could not be used, once a cell: the text names the command.
  const floors = new Set(gates.flatMap((g) => (g.decision.noiseFloor?.source === 'assumed' ? [g.decision.noiseFloor.text] : [])))
  for (const text of floors) add('noise-floor', text)
  const label = (a: ArmSummary) => (a.arm === 'cell' ? `launch ${a.launch}` : `${a.arm}${a.launch > 1 ? ` launch ${a.launch}` : ''}`)
  const descriptive = [...new Set(cell.arms.flatMap((a) => a.p99DescriptiveOnly))]
  if (descriptive.length > 0)
    add(
      'descriptive-p99',
      `p99 of ${descriptive.join(', ')} rests on fewer samples than a p99 needs (${cell.arms
        .filter((a) => a.p99DescriptiveOnly.length > 0)
        .map(label)
        .join(', ')}): descriptive only`,
    )
  const failing = cell.arms.flatMap((a) => (a.failed !== null && a.failed > 0 ? [{ a, failed: a.failed }] : []))
  if (failing.length > 0) {
    const counts = failing.map(({ a, failed }) => `${label(a)} ${failed}/${a.completed + failed}`).join(', ')
    add('failed-requests', `requests failed: ${counts} (see failures in the run records)`)
  }
  const noisy = cell.arms.filter((a) => (a.hostStealShare ?? 0) >= HOST_NOISE_STEAL_SHARE)
  if (noisy.length > 0)
    add(
      'host-noise',
      `the hypervisor took ${noisy.map((a) => `${formatFixedPercent(a.hostStealShare as number)} (${label(a)})`).join(', ')} of the ` +
        "machine's CPU while it measured: a chunk due in a stolen slice is read late, so tails of a few ms measure the host as much as the engine",
    )
  const limited = cell.arms.filter((a) => a.harnessLimited)
  if (limited.length > 0)
    add(
      'harness-limited',
      `${limited.map(label).join(', ')}: the client, not the engine, may have limited this cell (see harness.reasons in the run records)`,
    )
  return out
}

/** Builds the index and the run-record files from the spec files' cells and the tests' assertions. */
export function buildEvidence(files: readonly SpecFileInput[], tests: readonly TestInput[], options: BuildOptions): BuiltEvidence {
  const sortedFiles = [...files].sort((a, b) => (a.file < b.file ? -1 : a.file > b.file ? 1 : 0))
  const sortedTests = [...tests].sort((a, b) =>
    a.file === b.file ? (a.name < b.name ? -1 : a.name > b.name ? 1 : 0) : a.file < b.file ? -1 : 1,
  )
  const ids = evidenceIds(sortedFiles)
  const idOf = (file: string, cell: string) => ids.get(`${file}\u0000${cell}`) ?? cell

  const gates: GateEntry[] = []
  const checksByCell = new Map<string, PairCheck[]>()
  for (const t of sortedTests) {
    for (const { cell, ...d } of t.meta?.decisions ?? [])
      gates.push({ cell: idOf(t.file, cell), test: t.name, testPassed: t.state === 'passed', ...d })
    for (const c of t.meta?.checks ?? []) {
      const id = idOf(t.file, c.cell)
      const { check, passed, findings, judged, isNot, unverifiable } = c
      checksByCell.set(id, [
        ...(checksByCell.get(id) ?? []),
        {
          check,
          passed,
          findings,
          test: t.name,
          testPassed: t.state === 'passed',
          judged,
          isNot,
          ...(unverifiable === undefined ? {} : { unverifiable }),
        },
      ])
    }
  }

  const runs: EvidenceFile[] = []
  const paths = new Set<string>()
  const cells: EvidenceCell[] = []
  const finishedAt: string[] = []
  const harnessHashes = new Set<string>()
  for (const f of sortedFiles) {
    for (const declared of f.meta.cells) {
      const id = idOf(f.file, declared.id)
      const checks = checksByCell.get(id) ?? []
      const arms: ArmSummary[] = []
      let plan: EvidenceCell['plan'] = null
      for (const arm of ARMS) {
        const records = declared.records[arm] ?? []
        records.forEach((record, i) => {
          const path = runPath(arm, id, i + 1, records.length, paths)
          const content = serializeRecord(record, options.redact)
          runs.push({ path, content })
          arms.push(armSummary(record, arm, i + 1, { path, bytes: Buffer.byteLength(content), sha256: sha256(content) }))
          plan ??= planSummary(record)
          if (record.finishedAt !== null) finishedAt.push(record.finishedAt)
          if (record.manifest !== null) harnessHashes.add(record.manifest.harness.hash)
        })
      }
      cells.push({
        id,
        kind: declared.kind,
        file: f.file,
        required: declared.required,
        maxFailedShare: declared.maxFailedShare ?? null,
        ...cellDisposition(declared, checks),
        ladder: declared.ladder,
        plan,
        engines: { ...declared.engines },
        arms,
        checks,
      })
    }
  }

  // Baselines judged from a stored record (another run's artifact), each once, kept so verify can decide again.
  const storedBaselines: EvidenceIndex['storedBaselines'] = []
  for (const t of sortedTests) {
    for (const { file, record } of t.meta?.storedBaselines ?? []) {
      if (storedBaselines.some((s) => s.runId === record.runId)) continue
      const path = freePath(`runs/stored/${fileSafe(record.runId)}`, '', paths)
      const content = serializeRecord(record, options.redact)
      runs.push({ path, content })
      storedBaselines.push({
        runId: record.runId,
        source: file,
        record: { path, bytes: Buffer.byteLength(content), sha256: sha256(content) },
      })
    }
  }

  const scope = options.scope ?? null
  const partial: PartialRun | null =
    scope === null || scope.reasons.length === 0
      ? null
      : { ...scope, cellsNotRun: cells.filter((c) => c.disposition === 'pending').map((c) => c.id) }
  const findings = cells.flatMap((c) =>
    cellFindings(
      c,
      gates.filter((g) => g.cell === c.id),
    ),
  )
  const index: EvidenceIndex = {
    schema: EVIDENCE_SCHEMA_ID,
    generatedAt: finishedAt.length === 0 ? null : finishedAt.reduce((a, b) => (a > b ? a : b)),
    provenance: {
      servegateVersion: SERVEGATE_VERSION,
      harnessHashes: [...harnessHashes].sort(),
      suiteCommit: options.suiteCommit,
      redacted: options.redact,
    },
    cells,
    gates,
    findings,
    statistics: statisticsOf(cells, gates),
    promotion: promotionOf(cells, gates, failedTestReasons(sortedTests), partial),
    artifacts: [],
    storedBaselines,
    partial,
    history: null,
  }
  const scrubbed = scrubDeep(index)
  return { index: options.redact ? (JSON.parse(redactText(JSON.stringify(scrubbed))) as EvidenceIndex) : scrubbed, runs }
}

/** A pair whose matched-pair check ran and held every time. */
export function isMatchedPair(cell: EvidenceCell): boolean {
  const checks = cell.checks.filter((k) => k.check === 'toBeMatchedPair')
  return cell.kind === 'pair' && checks.length > 0 && checks.every((k) => k.passed)
}

/** The statistics block: cells by disposition, matched pairs, gates by outcome. */
export function statisticsOf(cells: readonly EvidenceCell[], gates: readonly GateEntry[]): EvidenceIndex['statistics'] {
  const count = (d: Disposition) => cells.filter((c) => c.disposition === d).length
  const outcomes = { pass: 0, fail: 0, inconclusive: 0 }
  for (const g of gates) outcomes[g.decision.outcome]++
  return {
    planned: cells.length,
    required: cells.filter((c) => c.required).length,
    accepted: count('accepted'),
    failed: count('failed'),
    blocked: count('blocked'),
    pending: count('pending'),
    matchedPairs: cells.filter(isMatchedPair).length,
    gates: outcomes,
  }
}

/** The shape of a promotion reason from `failedTestReasons`: the only reasons the index alone cannot give again. */
export const FAILED_TEST_REASON_PATTERN = /^test ".*" in .* failed$/s

/** The failed tests that made no servegate assertion (their failure is not in any gate or check), as promotion reasons. */
function failedTestReasons(tests: readonly TestInput[]): string[] {
  return tests
    .filter((t) => t.state === 'failed' && (t.meta?.decisions.length ?? 0) === 0 && (t.meta?.checks.length ?? 0) === 0)
    .map((t) => `test "${t.name}" in ${t.file} failed`)
}

/**
 * Promotable only when the run covered the suite (`partial` null), every required cell is
 * accepted, the test of every gate and check passed (a `.not` assertion that held counts as
 * passed; its cell's disposition still says why), and no other test of the suite failed
 * (`failedTests`, from `failedTestReasons`). A partial run's reason comes first.
 */
export function promotionOf(
  cells: readonly EvidenceCell[],
  gates: readonly GateEntry[],
  failedTests: readonly string[],
  partial: PartialRun | null = null,
): EvidenceIndex['promotion'] {
  const reasons: string[] = [...(partial === null ? [] : [partialReason(partial)]), ...failedTests]
  if (cells.length === 0) reasons.push('no cells were planned')
  for (const c of cells)
    if (c.required && c.disposition !== 'accepted') reasons.push(`required cell ${c.id} is ${c.disposition}: ${c.reason ?? ''}`)
  for (const g of gates) if (!g.testPassed) reasons.push(gateReason(g))
  for (const c of cells) for (const k of c.checks) if (!k.testPassed) reasons.push(checkReason(c.id, k))
  return { promotable: reasons.length === 0, reasons }
}
