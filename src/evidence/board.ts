/**
 * The board: `evidence/README.md`, the page a reviewer reads in a PR comment or the job summary.
 * Rendered from the index alone, so `servegate report` re-renders it identically.
 */
import type { ArmSummary, EvidenceCell, EvidenceIndex, FileRef, GateEntry, Percentiles } from '../schema/evidence.ts'
import { promotableSummary } from './promotion-text.ts'
import type { WinGateName } from '../schema/gate.ts'
import { ABSENT, formatFixedPercent, formatSignificant } from '../number-format.ts'
import { isMatchedPair } from './build.ts'

const WIN_METRICS: ReadonlyArray<{ gate: WinGateName; words: string }> = [
  { gate: 'toWinDecode', words: 'decode' },
  { gate: 'toWinPrefill', words: 'prefill' },
  { gate: 'toWinThroughput', words: 'throughput' },
]

/** Escapes a string for a Markdown table cell. */
function cell(text: string): string {
  return text.replace(/\|/g, '\\|').replace(/\n/g, ' ')
}

function table(head: readonly string[], rows: ReadonlyArray<readonly string[]>): string[] {
  if (rows.length === 0) return ['_none_']
  return [`| ${head.join(' | ')} |`, `| ${head.map(() => '---').join(' | ')} |`, ...rows.map((r) => `| ${r.map(cell).join(' | ')} |`)]
}

function armOf(c: EvidenceCell, arm: ArmSummary['arm']): ArmSummary | undefined {
  return c.arms.find((a) => a.arm === arm && a.launch === 1)
}

function effect(g: GateEntry | undefined): string {
  if (g === undefined) return 'no gate'
  const e = g.decision.effect
  if (e.estimate === null) return `${g.decision.outcome} (not estimable)`
  return `${formatSignificant(e.estimate)}× [${formatSignificant(e.low)}, ${formatSignificant(e.high)}] ${g.decision.outcome}`
}

const pairs = (index: EvidenceIndex) => index.cells.filter((c) => c.kind === 'pair')

/** The at-a-glance lines: promotion, wins per metric over matched cells, non-wins, checks, warnings. */
export function glanceLines(index: EvidenceIndex): string[] {
  const s = index.statistics
  const lines = [
    index.promotion.promotable
      ? `Promotable: ${promotableSummary(index)}.`
      : `Not promotable: ${index.promotion.reasons.length} reason(s), first: ${index.promotion.reasons[0] ?? ''}`,
    `Cells: ${s.accepted} accepted, ${s.failed} failed, ${s.blocked} blocked, ${s.pending} pending ` +
      `of ${s.planned} planned (${s.required} required).`,
  ]
  const matchedCells = pairs(index)
    .filter(isMatchedPair)
    .map((c) => c.id)
  for (const m of WIN_METRICS) {
    const judged = index.gates.filter((g) => g.decision.gate === m.gate && matchedCells.includes(g.cell))
    if (judged.length === 0) continue
    const won = new Set(judged.filter((g) => g.decision.outcome === 'pass').map((g) => g.cell))
    lines.push(`Wins, ${m.words}: ${won.size} of ${new Set(judged.map((g) => g.cell)).size} matched cells.`)
  }
  const nonWins = index.findings.filter((f) => f.kind === 'non-win' || f.kind === 'inconclusive' || f.kind === 'regression')
  if (nonWins.length > 0) lines.push(`Not wins or not held: ${nonWins.map((f) => `${f.cell} (${f.message.split(':')[0]})`).join(', ')}.`)
  const checks = index.cells.flatMap((c) => c.checks)
  lines.push(
    `Pair checks: ${checks.filter((k) => k.passed).length} passed, ${checks.filter((k) => !k.passed).length} failed; ` +
      `${s.matchedPairs} matched pair(s) of ${pairs(index).length}.`,
  )
  const quality = index.findings.filter((f) => f.kind === 'quality').length
  lines.push(`Gates: ${s.gates.pass} pass, ${s.gates.fail} fail, ${s.gates.inconclusive} inconclusive; quality warnings: ${quality}.`)
  return lines
}

function metricTables(index: EvidenceIndex): string[] {
  const out: string[] = []
  const rows = (gate: WinGateName, of: (a: ArmSummary) => Percentiles) =>
    pairs(index).map((c) => {
      const b = armOf(c, 'baseline')
      const k = armOf(c, 'candidate')
      return [
        c.id,
        formatSignificant(b === undefined ? null : of(b).p50),
        formatSignificant(k === undefined ? null : of(k).p50),
        effect(index.gates.find((g) => g.cell === c.id && g.decision.gate === gate)),
      ]
    })
  out.push(
    '### Decode tok/s (p50 per request)',
    '',
    ...table(
      ['cell', 'baseline', 'candidate', 'candidate/baseline [interval]'],
      rows('toWinDecode', (a) => a.timings.decodeTokPerS),
    ),
    '',
  )
  out.push(
    '### Effective prefill tok/s (p50 per request)',
    '',
    ...table(
      ['cell', 'baseline', 'candidate', 'candidate/baseline [interval]'],
      rows('toWinPrefill', (a) => a.timings.effectivePrefillTokPerS),
    ),
    '',
  )
  const throughput = pairs(index).map((c) => {
    const b = armOf(c, 'baseline')
    const k = armOf(c, 'candidate')
    return [
      c.id,
      formatSignificant(b?.outputThroughputTokPerS),
      formatSignificant(k?.outputThroughputTokPerS),
      effect(index.gates.find((g) => g.cell === c.id && g.decision.gate === 'toWinThroughput')),
    ]
  })
  out.push(
    '### Output throughput tok/s (cell aggregate; the gate judges tokens per service second per request)',
    '',
    ...table(['cell', 'baseline', 'candidate', 'candidate/baseline [interval]'], throughput),
    '',
  )
  return out
}

function armLabel(c: EvidenceCell, a: ArmSummary): string {
  return `${c.id} · ${a.arm}${c.arms.filter((x) => x.arm === a.arm).length > 1 ? ` #${a.launch}` : ''}`
}

function latencyTable(index: EvidenceIndex): string[] {
  const p = (x: Percentiles) => {
    const figures = [x.p50, x.p95, x.p99].map((v) => formatSignificant(v)).join(' / ')
    return `${figures}${x.samples < 100 && x.p99 !== null ? '*' : ''}`
  }
  const rows = index.cells.flatMap((c) =>
    c.arms.map((a) => [armLabel(c, a), p(a.timings.ttftMs), p(a.timings.tpotMs), p(a.timings.e2eMs), formatSignificant(a.itlJitterMs)]),
  )
  return [
    '## Latency (ms, p50 / p95 / p99; * p99 on fewer than 100 samples is descriptive only)',
    '',
    ...table(['arm', 'TTFT', 'TPOT', 'e2e', 'ITL jitter (sd)'], rows),
    '',
  ]
}

function loadTable(index: EvidenceIndex): string[] {
  const rows = index.cells.flatMap((c) =>
    c.plan === null || c.plan.arrival === 'closed'
      ? []
      : c.arms.map((a) => [
          armLabel(c, a),
          `${c.plan?.arrival} ${c.plan?.arrivalRatePerS === null ? '' : `${formatSignificant(c.plan?.arrivalRatePerS)} req/s`}`.trim(),
          `${formatFixedPercent(a.load.goodFraction)} ` +
            `[${formatFixedPercent(a.load.goodFractionLow)}, ${formatFixedPercent(a.load.goodFractionHigh)}]`,
          formatSignificant(a.load.goodputReqPerS),
          formatSignificant(a.load.sendLagP99Ms),
          a.load.inFlightMax === null ? ABSENT : String(a.load.inFlightMax),
          a.harnessLimited ? 'yes' : 'no',
        ]),
  )
  if (rows.length === 0) return []
  return [
    '## Open loop (good share: requests meeting every SLO, Wilson 95%)',
    '',
    ...table(['arm', 'arrivals', 'good share', 'goodput req/s', 'send lag p99 ms', 'in flight (max)', 'harness-limited'], rows),
    '',
  ]
}

function concurrencyTable(index: EvidenceIndex): string[] {
  const rows = index.cells.flatMap((c) =>
    c.arms.map((a) => [
      armLabel(c, a),
      String(a.concurrency.requested),
      String(a.concurrency.clientObservedMax),
      formatSignificant(a.concurrency.engineRunningMax),
      formatSignificant(a.concurrency.engineWaitingMax),
    ]),
  )
  return [
    '## Achieved concurrency',
    '',
    ...table(['arm', 'requested', 'client in flight (max)', 'engine running (max)', 'engine waiting (max)'], rows),
    '',
  ]
}

function qualityAudit(index: EvidenceIndex): string[] {
  const accuracy = index.gates.filter((g) => g.decision.gate === 'toStayWithinAccuracyGap')
  const canaries = index.cells.flatMap((c) =>
    c.checks
      .filter((k) => k.check === 'toPassCanaries')
      .map((k) => [c.id, k.passed ? 'passed' : `failed: ${k.findings.slice(0, 2).join('; ')}`]),
  )
  const warnings = index.findings.filter((f) => f.kind === 'quality').map((f) => [f.cell, f.message])
  return [
    '## Quality audit',
    '',
    ...table(
      ['cell', 'accuracy gap', 'rule'],
      accuracy.map((g) => [g.cell, effect(g), g.decision.rule]),
    ),
    '',
    ...table(['cell', 'canaries'], canaries),
    '',
    ...table(['cell', 'quality warning'], warnings),
    '',
  ]
}

function gpuTable(index: EvidenceIndex): string[] {
  const rows = index.cells.flatMap((c) =>
    c.arms.map((a) => [
      armLabel(c, a),
      formatSignificant(a.memory.peakVramMiB),
      formatSignificant(a.memory.vramGrowthMiB),
      formatSignificant(a.gpu.activePowerMeanW),
      formatSignificant(a.gpu.temperatureP95C),
      formatSignificant(a.gpu.joulesPerToken),
      formatSignificant(a.memory.hostPeakMiB),
    ]),
  )
  return [
    '## GPU operating characteristics (worst device; — where not observed)',
    '',
    ...table(['arm', 'peak VRAM MiB', 'VRAM growth MiB', 'active power W', 'temp p95 °C', 'J/token', 'host peak MiB'], rows),
    '',
  ]
}

/** Who set an inconclusive gate's policy, in a table cell. */
const POLICY_SOURCE = {
  gate: "the gate's inconclusive option",
  plugin: 'servegate({ inconclusive })',
  default: 'the default of its kind',
} as const

function gateTable(index: EvidenceIndex): string[] {
  const rows = index.gates.map((g) => [
    g.cell,
    g.decision.gate,
    // An undecided gate says what its policy made of it, so it never reads as a pass.
    g.decision.outcome === 'inconclusive'
      ? `inconclusive (${g.passed ? 'passes' : 'fails'}: ${POLICY_SOURCE[g.policy.from]})`
      : g.decision.outcome,
    effect(g),
    `${g.decision.samples.paired} paired`,
    g.testPassed ? 'passed' : 'FAILED',
  ])
  return ['## Every gate', '', ...table(['cell', 'gate', 'outcome', 'effect [interval]', 'samples', 'test'], rows), '']
}

function cellTable(index: EvidenceIndex): string[] {
  const rows = index.cells.map((c) => [
    c.id,
    c.ladder ?? '',
    c.kind,
    c.disposition + (c.required ? '' : ' (optional)'),
    c.plan === null
      ? ABSENT
      : `${c.plan.workload} ctx${c.plan.promptTokens} ` +
        `${c.plan.arrivalRatePerS === null ? `c${c.plan.concurrency}` : `${c.plan.arrivalRatePerS} req/s`} × ${c.plan.requests}`,
    Object.entries(c.engines)
      .map(([arm, e]) => `${arm}: ${e}`)
      .join('; '),
    c.reason ?? '',
  ])
  return [
    '## Cells (a sweep or capacity search keeps its cells together on one ladder)',
    '',
    ...table(['cell', 'ladder', 'kind', 'disposition', 'plan', 'engines', 'reason'], rows),
    '',
  ]
}

const METHODOLOGY = [
  '## Methodology',
  '',
  '- Timings are taken on the client per streamed read (monotonic clock); TTFT, TPOT, ITL, e2e, decode and effective prefill ' +
    "per request as servegate's docs/metrics.md defines them; percentiles are nearest-rank.",
  '- Both arms of a pair receive the same request bytes (planned and wire sha256 per record); ' +
    'gates compare per prompt (paired by request index).',
  '- Win gates pass only when proven at the stated confidence and margin (one-sided 99% by default) with a launch-noise floor; ' +
    'non-regression gates fail only on a confident regression.',
  '- Run records are in `runs/`; `servegate verify` recomputes every hash and summary from them.',
  '',
]

function inventory(files: readonly FileRef[]): string[] {
  return [
    '## Artifacts',
    '',
    ...table(
      ['file', 'bytes', 'sha256'],
      files.map((f) => [f.path, String(f.bytes), `${f.sha256.slice(0, 16)}…`]),
    ),
    '',
  ]
}

/** The board as Markdown; `files` are the run records and artifacts to list in its inventory. */
export function renderBoard(index: EvidenceIndex, files: readonly FileRef[]): string {
  const p = index.provenance
  return [
    '# servegate evidence',
    '',
    ...glanceLines(index).map((l) => `- ${l}`),
    '',
    ...(index.promotion.reasons.length > 0
      ? ['### Why not promotable', '', ...index.promotion.reasons.map((r) => `- ${cell(r)}`), '']
      : []),
    ...(index.findings.filter((f) => f.kind !== 'descriptive-p99').length > 0
      ? ['### Findings', '', ...index.findings.map((f) => `- **${f.kind}** ${f.cell}: ${cell(f.message)}`), '']
      : []),
    ...metricTables(index),
    ...latencyTable(index),
    ...concurrencyTable(index),
    ...loadTable(index),
    ...qualityAudit(index),
    ...gpuTable(index),
    ...gateTable(index),
    ...cellTable(index),
    ...METHODOLOGY,
    `servegate ${p.servegateVersion}; harness ${p.harnessHashes.map((h) => h.slice(0, 12)).join(', ') || 'unknown'}; ` +
      `suite commit ${p.suiteCommit ?? 'unknown'}${p.redacted ? '; URLs and host names redacted' : ''}; ` +
      `generated from records finished by ${index.generatedAt ?? ABSENT}.`,
    '',
    ...inventory(files),
  ].join('\n')
}
