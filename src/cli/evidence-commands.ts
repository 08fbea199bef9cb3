import { ServegateError } from '../errors.ts'
import { glanceLines } from '../evidence/board.ts'
import { markdownText } from '../evidence/markdown-text.ts'
import { GITHUB_COMMENT_LIMIT, PR_COMMENT_MARKER, renderPrComment } from '../evidence/pr-comment.ts'
import { PARTIAL_FIX, partialText } from '../evidence/partial-text.ts'
import { promotableSummary } from '../evidence/promotion-text.ts'
import { readEvidence, readIndex, readPublicKey, verifyEvidence } from '../evidence/verify.ts'
import { MAX_EVIDENCE_FILE_BYTES, UNINDEXED_FILES, writeEvidence } from '../evidence/write.ts'
import { pairMismatches, pairUnverifiable } from '../gates/fairness.ts'
import { DEFAULT_LAUNCH_NOISE } from '../gates/gate-options.ts'
import { holdLatencyGate } from '../gates/hold-latency.ts'
import { verdictLine } from '../gates/verdict.ts'
import { winGate } from '../gates/win.ts'
import { readRunRecord } from '../record/record-io.ts'
import { driftCoverText, runText, startGap } from '../record/stored-baseline.ts'
import type { GateDecision } from '../schema/gate.ts'
import type { RunRecord } from '../schema/run.ts'
import { parseFlags } from './flags.ts'
import type { CliIo } from './cli-io.ts'

const VERIFY_HELP = `servegate verify EVIDENCE_DIR [--require-promotable] [--public-key FILE]

  Recomputes every sha256 and every summary from the run records, and decides every gate, pair check,
  cell disposition and the promotion again from them; exit 1 on any mismatch, naming the file, cell and gate.
  The directory is a closed world: it also exits 1, naming the file, on a file index.json does not reference
  (other than ${UNINDEXED_FILES.join(', ')}), a name outside ASCII letters, digits, . _ - /, a file over
  ${MAX_EVIDENCE_FILE_BYTES} bytes (1 GiB), and JSON that names a key twice in one object.
  --require-promotable   also exit 1, printing index.json's promotion reasons, when the evidence is not
                         promotable (a partial run, a required cell not accepted, a gate or check not passed,
                         a test failed)
  --public-key FILE      an ed25519 public key (PEM): also exit 1 unless SHA256SUMS.sig is its signature of
                         SHA256SUMS (the reporter signs when SERVEGATE_SIGNING_KEY holds the private key)`
const REPORT_HELP = `servegate report EVIDENCE_DIR [--pr-comment]

  Renders the board (README.md), the charts and index.html again from index.json and the run records.
  --pr-comment   instead print the pull-request comment to stdout and write nothing: the gate table, the
                 promotion verdict with its reasons, then the board in <details>, cut to fit GitHub's
                 ${GITHUB_COMMENT_LIMIT}-character limit; it starts with ${PR_COMMENT_MARKER}, which the workflow
                 servegate init writes finds to update its one comment (also fit for $GITHUB_STEP_SUMMARY)`
const COMPARE_HELP =
  'servegate compare BASELINE_RUN CANDIDATE_RUN [--allow-unmatched] [--require-win decode,prefill,throughput] ' +
  `[--launch-noise X] [--json]

  Applies the pair checks and the default gates to two run records (servegate records or imports:
  anvil JSON; convert vLLM / SGLang results with servegate import first) outside vitest, e.g. a
  candidate's record against the main branch's stored CI artifact. It prints the pair checks first,
  then the two records' runs (ids, start times), then the verdicts.
  Default gates: TTFT p95 not worse than +10% and TPOT p50 not worse than +5% (non-regression:
  fail only on a confident regression), and the three win gates at margin 0 (reported; they count
  only when named in --require-win). Exit 1 when a counted gate fails or the pair is not matched.
  --allow-unmatched   report pair-check mismatches without failing (imported records lack manifests)
  --launch-noise X    relative sd of one launch, e.g. 0.02 or 2% (default ${DEFAULT_LAUNCH_NOISE}): the floor that covers
                      drift between the two records' launches, which were never interleaved A B B A`

/** The evidence directory a command was given, the boolean flags set and the string flags' values, or null when it printed its help. */
function directoryArgument(
  command: string,
  help: string,
  argv: string[],
  io: CliIo,
  booleans: readonly string[] = [],
  strings: readonly string[] = [],
): { dir: string; set: ReadonlySet<string>; strings: ReadonlyMap<string, string> } | null {
  const options: Record<string, { type: 'boolean' | 'string'; short?: string }> = { help: { type: 'boolean', short: 'h' } }
  for (const name of booleans) options[name] = { type: 'boolean' }
  for (const name of strings) options[name] = { type: 'string' }
  const { positionals, ...parsed } = parseFlags(command, argv, options, true)
  const values: Record<string, unknown> = parsed.values
  if (values.help === true) {
    io.stdout.write(`${help}\n`)
    return null
  }
  if (positionals.length !== 1)
    throw new ServegateError(
      'CONFIG_INVALID',
      `${command} takes one evidence directory, got ${positionals.length}; run servegate ${command} EVIDENCE_DIR`,
    )
  const given = strings.flatMap((name) => (typeof values[name] === 'string' ? [[name, values[name]] as const] : []))
  return { dir: positionals[0] as string, set: new Set(booleans.filter((name) => values[name] === true)), strings: new Map(given) }
}

/**
 * `servegate verify`: exit 0 when every hash, summary and verdict holds, 1 with each problem
 * otherwise; with `--public-key`, also 1 unless SHA256SUMS.sig is that key's signature; with
 * `--require-promotable`, also 1 with the promotion reasons when the evidence is not promotable.
 */
export async function verifyCommand(argv: string[], io: CliIo): Promise<number> {
  const args = directoryArgument('verify', VERIFY_HELP, argv, io, ['require-promotable'], ['public-key'])
  if (args === null) return 0
  const { dir } = args
  const keyFile = args.strings.get('public-key')
  const publicKey = keyFile === undefined ? undefined : await readPublicKey(keyFile, '--public-key')
  const { problems, files, records, signature } = await verifyEvidence(dir, { publicKey })
  if (problems.length > 0) {
    for (const p of problems) io.stderr.write(`servegate verify: ${p}\n`)
    io.stderr.write(`servegate verify: ${dir}: ${problems.length} problem(s)\n`)
    return 1
  }
  const signed = {
    verified: `; SHA256SUMS.sig is ${keyFile}'s signature`,
    unchecked: '; SHA256SUMS.sig not checked (pass --public-key FILE)',
    absent: '',
  }[signature]
  io.stdout.write(
    `verified ${dir}: ${files} files, ${records} run records; every sha256 and summary matches, every verdict decides again as recorded${signed}\n`,
  )
  if (!args.set.has('require-promotable')) return 0
  const index = await readIndex(dir)
  const { promotion } = index
  if (!promotion.promotable) {
    // Partial evidence is not promotable whatever its gates say: that comes first, with what was not run and the fix.
    if (index.partial !== null)
      io.stderr.write(
        `servegate verify: ${dir} holds a partial run's evidence, never promotable: ${partialText(index.partial)}; ${PARTIAL_FIX}\n`,
      )
    io.stderr.write(`servegate verify: ${dir} is not promotable:\n${promotion.reasons.map((r) => `  - ${r}\n`).join('')}`)
    return 1
  }
  io.stdout.write(`promotable: ${promotableSummary(index)}\n`)
  return 0
}

/** `servegate report`: the board, charts and page rendered again from index.json and the records. */
export async function reportCommand(argv: string[], io: CliIo, env: NodeJS.ProcessEnv = process.env): Promise<number> {
  const args = directoryArgument('report', REPORT_HELP, argv, io, ['pr-comment'])
  if (args === null) return 0
  const { dir } = args
  if (args.set.has('pr-comment')) {
    // Read only. The records are checked against the index first, so a comment never shows edited
    // evidence as it was; the index is read as written, with its artifacts (the charts the board lists).
    await readEvidence(dir)
    const index = await readIndex(dir)
    io.stdout.write(renderPrComment(index, { boardLocation: boardLocation(dir, env) }))
    return 0
  }
  const { DEFAULT_RENDERERS } = await import('../evidence/renderers.ts')
  const { index } = await writeEvidence(dir, await readEvidence(dir), DEFAULT_RENDERERS)
  for (const line of glanceLines(index)) io.stdout.write(`${line}\n`)
  io.stdout.write(`rendered ${dir}/README.md, ${dir}/charts/, ${dir}/index.html\n`)
  return 0
}

/**
 * Where the full board is, for the PR comment's note, as Markdown: this run's artifact on GitHub
 * Actions, else the directory (escaped: no directory name renders as markup).
 */
export function boardLocation(dir: string, env: NodeJS.ProcessEnv): string {
  const readme = markdownText(`${dir.replace(/\/+$/, '')}/README.md`)
  const { GITHUB_SERVER_URL: server, GITHUB_REPOSITORY: repo, GITHUB_RUN_ID: run } = env
  if (server === undefined || repo === undefined || run === undefined || server === '' || repo === '' || run === '') return readme
  return `${readme} in the evidence artifact of [this workflow run](${server}/${repo}/actions/runs/${run})`
}

const WIN_GATES = { decode: 'toWinDecode', prefill: 'toWinPrefill', throughput: 'toWinThroughput' } as const

/** The gates' own bound on `launchNoise`: a launch-to-launch sd above 50% is no floor but a broken setup. */
const MAX_LAUNCH_NOISE = 0.5

/** `--launch-noise` as a fraction ("0.02" or "2%"), or a CONFIG_INVALID error naming the flag and the fix. */
function launchNoiseFlag(value: string | undefined): number {
  if (value === undefined) return DEFAULT_LAUNCH_NOISE
  const text = value.trim()
  const percent = text.endsWith('%')
  const n = text === '' || text === '%' ? Number.NaN : Number(percent ? text.slice(0, -1) : text) / (percent ? 100 : 1)
  if (!Number.isFinite(n) || n < 0) {
    throw new ServegateError(
      'CONFIG_INVALID',
      `--launch-noise: "${value}" is not a relative sd; pass a fraction from 0 to ${MAX_LAUNCH_NOISE} or a percentage, ` +
        `e.g. --launch-noise 0.02 or --launch-noise 2%`,
    )
  }
  if (n > MAX_LAUNCH_NOISE) {
    throw new ServegateError(
      'CONFIG_INVALID',
      `--launch-noise: ${value} is above ${MAX_LAUNCH_NOISE}; it is a fraction of one (0.02 is 2%)` +
        (percent ? '' : `; for ${value}% write --launch-noise ${value}%`),
    )
  }
  return n
}

/** Where one compared record came from: its file, run id and start time. */
interface ComparedRun {
  file: string
  runId: string
  startedAt: string | null
}

/** The two records' runs, and whether they are one run: what the launch-noise floor has to cover. */
interface ComparedLaunches {
  baseline: ComparedRun
  candidate: ComparedRun
  sameRun: boolean
  launchNoise: number
  /** The same, in words (the line the text output prints after `launches: `). */
  note: string
}

/**
 * The records' runs in words: one run on both sides (an A/A comparison), or two runs (different
 * ids, perhaps different days) that were never interleaved A B B A, so that only the launch-noise
 * floor covers the drift between them.
 */
function comparedLaunches(
  files: readonly [string, string],
  baseline: RunRecord,
  candidate: RunRecord,
  launchNoise: number,
): ComparedLaunches {
  const run = (file: string, r: RunRecord): ComparedRun => ({ file, runId: r.runId, startedAt: r.startedAt })
  const sameRun = baseline.runId === candidate.runId
  const gap = startGap(baseline.startedAt, candidate.startedAt)
  const note = sameRun
    ? `both files hold the same run (${runText(baseline)}): one launch compared with itself`
    : `baseline ${files[0]} (${runText(baseline)}) and candidate ${files[1]} (${runText(candidate)}) are different runs` +
      `${gap === null ? '' : `, the baseline started ${gap}`}: not interleaved A B B A, so ${driftCoverText(launchNoise)} ` +
      '(set it with --launch-noise)'
  return { baseline: run(files[0], baseline), candidate: run(files[1], candidate), sameRun, launchNoise, note }
}

/**
 * `servegate compare`: pair checks and default gates on two run records. The pair checks and the
 * records' runs are written before any gate is judged, so no verdict ever precedes them.
 */
export async function compareCommand(argv: string[], io: CliIo): Promise<number> {
  const { values, positionals } = parseFlags(
    'compare',
    argv,
    {
      'allow-unmatched': { type: 'boolean' },
      'require-win': { type: 'string' },
      'launch-noise': { type: 'string' },
      json: { type: 'boolean' },
      help: { type: 'boolean', short: 'h' },
    },
    true,
  )
  if (values.help === true) {
    io.stdout.write(`${COMPARE_HELP}\n`)
    return 0
  }
  if (positionals.length !== 2)
    throw new ServegateError(
      'CONFIG_INVALID',
      `compare takes two run record files, got ${positionals.length}; run servegate compare BASELINE_RUN CANDIDATE_RUN`,
    )
  const required = (values['require-win'] ?? '').split(',').filter(Boolean)
  for (const name of required) {
    if (!(name in WIN_GATES))
      throw new ServegateError('CONFIG_INVALID', `--require-win: unknown gate "${name}"; use any of decode, prefill, throughput`)
  }
  const launchNoise = launchNoiseFlag(values['launch-noise'])
  const files = [positionals[0] as string, positionals[1] as string] as const
  const baseline = await readRunRecord(files[0])
  const candidate = await readRunRecord(files[1])
  const mismatches = pairMismatches({ baseline: [baseline], candidate: [candidate] })
  const unverifiable = pairUnverifiable({ baseline: [baseline], candidate: [candidate] })
  const unmatched = mismatches.length > 0 && values['allow-unmatched'] !== true
  const launches = comparedLaunches(files, baseline, candidate, launchNoise)
  if (values.json !== true) {
    io.stdout.write(
      mismatches.length === 0
        ? 'pair checks: matched\n'
        : `pair checks: ${mismatches.length} mismatch(es)${unmatched ? '' : ' (allowed)'}\n${mismatches.map((m) => `  - ${m}\n`).join('')}`,
    )
    for (const u of unverifiable) io.stdout.write(`  unverifiable: ${u}\n`)
    io.stdout.write(`launches: ${launches.note}\n`)
  }
  const pair = { baseline, candidate }
  const counted: GateDecision[] = [
    holdLatencyGate(pair, { metric: 'ttft', percentile: 95, notWorseThanPct: 10, launchNoise }),
    holdLatencyGate(pair, { metric: 'tpot', percentile: 50, notWorseThanPct: 5, launchNoise }),
  ]
  const wins = Object.entries(WIN_GATES).map(([name, gate]) => ({ name, decision: winGate(pair, { gate, launchNoise }) }))
  const failedGates = [
    ...counted.filter((d) => d.outcome === 'fail'),
    ...wins.filter((w) => required.includes(w.name) && w.decision.outcome !== 'pass').map((w) => w.decision),
  ]
  if (values.json === true) {
    // Key order as in the text: the pair checks, the runs, then the verdicts.
    const report = {
      matched: mismatches.length === 0,
      mismatches,
      ...(unverifiable.length === 0 ? {} : { unverifiable }),
      launches,
      gates: [...counted, ...wins.map((w) => w.decision)],
    }
    io.stdout.write(`${JSON.stringify(report, null, 2)}\n`)
  } else {
    for (const d of counted) io.stdout.write(`${verdictLine(d)}\n`)
    for (const w of wins) io.stdout.write(`${verdictLine(w.decision)}${required.includes(w.name) ? '' : ' (reported, not required)'}\n`)
  }
  if (unmatched || failedGates.length > 0) {
    const reasons = [unmatched ? 'the pair is not matched' : '', ...failedGates.map((d) => `${d.gate} ${d.outcome}`)].filter(Boolean)
    io.stderr.write(`servegate compare: ${reasons.join('; ')}\n`)
    return 1
  }
  return 0
}
