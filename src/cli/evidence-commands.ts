import { ServegateError } from '../errors.ts'
import { glanceLines } from '../evidence/board.ts'
import { promotableSummary } from '../evidence/promotion-text.ts'
import { readEvidence, readIndex, verifyEvidence } from '../evidence/verify.ts'
import { writeEvidence } from '../evidence/write.ts'
import { pairMismatches } from '../gates/fairness.ts'
import { holdLatencyGate } from '../gates/hold-latency.ts'
import { verdictLine } from '../gates/verdict.ts'
import { winGate } from '../gates/win.ts'
import { readRunRecord } from '../record/record-io.ts'
import type { GateDecision } from '../schema/gate.ts'
import { parseFlags } from './flags.ts'
import type { CliIo } from './cli-io.ts'

export const VERIFY_HELP = `servegate verify EVIDENCE_DIR [--require-promotable]

  Recomputes every sha256 and every summary from the run records; exit 1 on any mismatch, naming the file.
  --require-promotable   also exit 1, printing index.json's promotion reasons, when the evidence is not
                         promotable (a required cell not accepted, a gate or check not passed, a test failed)`
export const REPORT_HELP =
  'servegate report EVIDENCE_DIR — render the board (README.md), the charts and index.html again ' + 'from index.json and the run records'
export const COMPARE_HELP =
  'servegate compare BASELINE_RUN CANDIDATE_RUN [--allow-unmatched] [--require-win decode,prefill,throughput] [--json]' +
  `

  Applies the pair checks and the default gates to two run records (servegate records or imports:
  anvil JSON; convert vLLM / SGLang results with servegate import first) outside vitest.
  Default gates: TTFT p95 not worse than +10% and TPOT p50 not worse than +5% (non-regression:
  fail only on a confident regression), and the three win gates at margin 0 (reported; they count
  only when named in --require-win). Exit 1 when a counted gate fails or the pair is not matched.
  --allow-unmatched   report pair-check mismatches without failing (imported records lack manifests)`

/** The evidence directory a command was given and the boolean flags set, or null when it printed its help. */
function directoryArgument(
  command: string,
  help: string,
  argv: string[],
  io: CliIo,
  booleans: readonly string[] = [],
): { dir: string; set: ReadonlySet<string> } | null {
  const options: Record<string, { type: 'boolean'; short?: string }> = { help: { type: 'boolean', short: 'h' } }
  for (const name of booleans) options[name] = { type: 'boolean' }
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
  return { dir: positionals[0] as string, set: new Set(booleans.filter((name) => values[name] === true)) }
}

/**
 * `servegate verify`: exit 0 when every hash and summary holds, 1 with each problem otherwise;
 * with `--require-promotable`, also 1 with the promotion reasons when the evidence is not promotable.
 */
export async function verifyCommand(argv: string[], io: CliIo): Promise<number> {
  const args = directoryArgument('verify', VERIFY_HELP, argv, io, ['require-promotable'])
  if (args === null) return 0
  const { dir } = args
  const { problems, files, records } = await verifyEvidence(dir)
  if (problems.length > 0) {
    for (const p of problems) io.stderr.write(`servegate verify: ${p}\n`)
    io.stderr.write(`servegate verify: ${dir}: ${problems.length} problem(s)\n`)
    return 1
  }
  io.stdout.write(`verified ${dir}: ${files} files, ${records} run records; every sha256 and summary matches\n`)
  if (!args.set.has('require-promotable')) return 0
  const index = await readIndex(dir)
  const { promotion } = index
  if (!promotion.promotable) {
    io.stderr.write(`servegate verify: ${dir} is not promotable:\n${promotion.reasons.map((r) => `  - ${r}\n`).join('')}`)
    return 1
  }
  io.stdout.write(`promotable: ${promotableSummary(index)}\n`)
  return 0
}

/** `servegate report`: the board, charts and page rendered again from index.json and the records. */
export async function reportCommand(argv: string[], io: CliIo): Promise<number> {
  const args = directoryArgument('report', REPORT_HELP, argv, io)
  if (args === null) return 0
  const { dir } = args
  const { DEFAULT_RENDERERS } = await import('../evidence/renderers.ts')
  const { index } = await writeEvidence(dir, await readEvidence(dir), DEFAULT_RENDERERS)
  for (const line of glanceLines(index)) io.stdout.write(`${line}\n`)
  io.stdout.write(`rendered ${dir}/README.md, ${dir}/charts/, ${dir}/index.html\n`)
  return 0
}

const WIN_GATES = { decode: 'toWinDecode', prefill: 'toWinPrefill', throughput: 'toWinThroughput' } as const

/** `servegate compare`: pair checks and default gates on two run records. */
export async function compareCommand(argv: string[], io: CliIo): Promise<number> {
  const { values, positionals } = parseFlags(
    'compare',
    argv,
    {
      'allow-unmatched': { type: 'boolean' },
      'require-win': { type: 'string' },
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
  const baseline = await readRunRecord(positionals[0] as string)
  const candidate = await readRunRecord(positionals[1] as string)
  const mismatches = pairMismatches({ baseline: [baseline], candidate: [candidate] })
  const pair = { baseline, candidate }
  const counted: GateDecision[] = [
    holdLatencyGate(pair, { metric: 'ttft', percentile: 95, notWorseThanPct: 10 }),
    holdLatencyGate(pair, { metric: 'tpot', percentile: 50, notWorseThanPct: 5 }),
  ]
  const wins = Object.entries(WIN_GATES).map(([name, gate]) => ({ name, decision: winGate(pair, { gate }) }))
  const failedGates = [
    ...counted.filter((d) => d.outcome === 'fail'),
    ...wins.filter((w) => required.includes(w.name) && w.decision.outcome !== 'pass').map((w) => w.decision),
  ]
  const unmatched = mismatches.length > 0 && values['allow-unmatched'] !== true
  if (values.json === true) {
    io.stdout.write(
      `${JSON.stringify({ matched: mismatches.length === 0, mismatches, gates: [...counted, ...wins.map((w) => w.decision)] }, null, 2)}\n`,
    )
  } else {
    io.stdout.write(
      mismatches.length === 0
        ? 'pair checks: matched\n'
        : `pair checks: ${mismatches.length} mismatch(es)${unmatched ? '' : ' (allowed)'}\n${mismatches.map((m) => `  - ${m}\n`).join('')}`,
    )
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
