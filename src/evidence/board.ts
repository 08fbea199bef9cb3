/**
 * The board: `evidence/README.md`, the page a reviewer reads in a PR comment or the job summary.
 * Rendered from the index alone, so `servegate report` re-renders it identically.
 */
import type { ArmSummary, EvidenceCell, EvidenceIndex, FileRef, GateEntry, MeasuredFacts, Percentiles } from '../schema/evidence.ts'
import { partialHeadline } from './partial-text.ts'
import { promotableSummary } from './promotion-text.ts'
import {
  cellTone,
  checkExpected,
  dispositionText,
  expectedCountText,
  findingView,
  gateCounts,
  gateExpected,
  type Tone,
} from './assertion-tone.ts'
import { estimatorText } from './estimator-text.ts'
import type { GateDecision, WinGateName } from '../schema/gate.ts'
import { ABSENT, formatFixed, formatFixedPercent, formatInUnit, formatSignificant } from '../number-format.ts'
import { failedCountText, failedOf } from './arm-summary.ts'
import { isMatchedPair } from './build.ts'
import { PREEMPTION_HEAD, preemptionCell, reportsPreemptions } from '../gates/preemption.ts'
import { appendedText, TREND_HEAD, trendRows } from './history-trend-text.ts'
import { markdownText } from './markdown-text.ts'
import { mermaidCharts } from './mermaid.ts'

const WIN_METRICS: ReadonlyArray<{ gate: WinGateName; words: string }> = [
  { gate: 'toWinDecode', words: 'decode' },
  { gate: 'toWinPrefill', words: 'prefill' },
  { gate: 'toWinThroughput', words: 'throughput' },
]

/**
 * A Markdown table of plain text: every cell, head included, escaped (`markdownText`), so a name
 * that holds `|`, a line break or a tag stays one cell of its row. `_none_` when it has no rows.
 */
export function table(head: readonly string[], rows: ReadonlyArray<readonly string[]>): string[] {
  if (rows.length === 0) return ['_none_']
  const row = (cells: readonly string[]) => `| ${cells.map(markdownText).join(' | ')} |`
  return [row(head), `| ${head.map(() => '---').join(' | ')} |`, ...rows.map(row)]
}

/** A section: its heading, a blank line, its body and a blank line; nothing when it has no body. */
function section(heading: string, body: readonly string[]): string[] {
  return body.length === 0 ? [] : [heading, '', ...body, '']
}

function armOf(c: EvidenceCell, arm: ArmSummary['arm']): ArmSummary | undefined {
  return c.arms.find((a) => a.arm === arm && a.launch === 1)
}

/**
 * A decision's effect in its own unit with its interval: `1.052× [1.010×, 1.090×]` for a ratio,
 * `-20.0 pt [-27.1 pt, -12.9 pt]` for an accuracy gap, `+3.1 ms […]` for a difference in time.
 */
function effectText(d: GateDecision): string {
  const e = d.effect
  if (e.estimate === null) return 'not estimable'
  const bounds = e.low === null && e.high === null ? '' : ` [${formatInUnit(e.low, e.unit)}, ${formatInUnit(e.high, e.unit)}]`
  return `${formatInUnit(e.estimate, e.unit)}${bounds}`
}

/** The gate's outcome, or for a `.not` that held what it expected: `fail: expected non-win ✓`. */
function outcomeText(g: GateEntry): string {
  const expected = gateExpected(g)
  return expected === null ? g.decision.outcome : `${g.decision.outcome}: ${expected}`
}

function effect(g: GateEntry | undefined): string {
  if (g === undefined) return 'no gate'
  return `${effectText(g.decision)} ${outcomeText(g)}`
}

/** A glyph for what blocks promotion; an expected outcome carries its own ✓ in its words, the rest none. */
const TONE_GLYPH: Record<Tone, string> = { blocks: '❌ ', expected: '', pass: '', note: '' }

const pairs = (index: EvidenceIndex) => index.cells.filter((c) => c.kind === 'pair')

/**
 * The at-a-glance lines: promotion, cells, wins per metric over matched cells, the `.not`
 * assertions that held (expected, not failures), what did not win or hold, checks and gates.
 */
export function glanceLines(index: EvidenceIndex): string[] {
  const s = index.statistics
  const optional = index.cells.filter((c) => c.disposition !== 'accepted' && cellTone(c) !== 'blocks').length
  const lines = [
    index.promotion.promotable
      ? `Promotable: ${promotableSummary(index)}.`
      : index.partial !== null
        ? partialHeadline(index.partial)
        : `Not promotable: ${index.promotion.reasons.length} reason(s), first: ${index.promotion.reasons[0] ?? ''}`,
    `Cells: ${s.accepted} accepted, ${s.failed} failed, ${s.blocked} blocked, ${s.pending} pending ` +
      `of ${s.planned} planned (${s.required} required` +
      `${optional === 0 ? '' : `; ${optional} not accepted ${optional === 1 ? 'is optional and blocks' : 'are optional and block'} nothing`}).`,
  ]
  const matchedCells = pairs(index)
    .filter(isMatchedPair)
    .map((c) => c.id)
  for (const m of WIN_METRICS) {
    const judged = index.gates.filter((g) => g.decision.gate === m.gate && matchedCells.includes(g.cell))
    if (judged.length === 0) continue
    const won = new Set(judged.filter((g) => g.decision.outcome === 'pass').map((g) => g.cell))
    const expected = new Set(judged.filter((g) => gateExpected(g) !== null).map((g) => g.cell))
    lines.push(
      `Wins, ${m.words}: ${won.size} of ${new Set(judged.map((g) => g.cell)).size} matched cells` +
        `${expected.size === 0 ? '' : ` (${expected.size} expected non-win ✓, asserted with .not)`}.`,
    )
  }
  const expected = [
    ...index.gates.flatMap((g) => {
      const words = gateExpected(g)
      return words === null ? [] : [`${g.cell} (${g.decision.gate}: ${words})`]
    }),
    ...index.cells.flatMap((c) =>
      c.checks.flatMap((k) => {
        const words = checkExpected(k)
        return words === null ? [] : [`${c.id} (${k.check}: ${words})`]
      }),
    ),
  ]
  if (expected.length > 0) lines.push(`Expected, asserted with .not and held: ${[...new Set(expected)].join(', ')}.`)
  const nonWins = index.findings.filter(
    (f) => (f.kind === 'non-win' || f.kind === 'inconclusive' || f.kind === 'regression') && findingView(index, f).tone !== 'expected',
  )
  if (nonWins.length > 0) lines.push(`Not wins or not held: ${nonWins.map((f) => `${f.cell} (${f.message.split(':')[0]})`).join(', ')}.`)
  const checks = index.cells.flatMap((c) => c.checks)
  const expectedChecks = new Map<string, number>()
  for (const k of checks) {
    const words = checkExpected(k)
    if (words !== null) expectedChecks.set(words, (expectedChecks.get(words) ?? 0) + 1)
  }
  const unexpectedFailures = checks.filter((k) => !k.passed && checkExpected(k) === null).length
  const heldChecks = expectedCountText([...expectedChecks])
  lines.push(
    `Pair checks: ${checks.filter((k) => k.passed).length} passed, ${unexpectedFailures} failed` +
      `${heldChecks === '' ? '' : `, ${heldChecks} (asserted with .not)`}; ${s.matchedPairs} matched pair(s) of ${pairs(index).length}.`,
  )
  const quality = index.findings.filter((f) => f.kind === 'quality').length
  const g = gateCounts(index)
  const held = expectedCountText(g.expected)
  lines.push(
    `Gates: ${g.pass} pass, ${g.fail} fail, ${g.inconclusive} inconclusive${held === '' ? '' : `, ${held} (asserted with .not)`}; ` +
      `quality warnings: ${quality}.`,
  )
  return lines
}

function metricTables(index: EvidenceIndex): string[] {
  if (pairs(index).length === 0) return []
  const head = ['cell', 'baseline p50', 'candidate p50', "candidate/baseline, the gate's estimate [interval], outcome"]
  const rows = (gate: WinGateName, of: (a: ArmSummary) => number | null) =>
    pairs(index).map((c) => {
      const b = armOf(c, 'baseline')
      const k = armOf(c, 'candidate')
      return [
        c.id,
        formatSignificant(b === undefined ? null : of(b)),
        formatSignificant(k === undefined ? null : of(k)),
        effect(index.gates.find((g) => g.cell === c.id && g.decision.gate === gate)),
      ]
    })
  return [
    "## Rates per pair (baseline and candidate p50; the gates judge paired requests: the gate table names each gate's estimator)",
    '',
    ...section(
      '### Decode tok/s (p50 per request)',
      table(
        head,
        rows('toWinDecode', (a) => a.timings.decodeTokPerS.p50),
      ),
    ),
    ...section(
      '### Effective prefill tok/s (p50 per request)',
      table(
        head,
        rows('toWinPrefill', (a) => a.timings.effectivePrefillTokPerS.p50),
      ),
    ),
    ...section(
      '### Output throughput tok/s (cell aggregate; the gate judges tokens per service second per request)',
      table(
        head,
        rows('toWinThroughput', (a) => a.outputThroughputTokPerS),
      ),
    ),
  ]
}

function armLabel(c: EvidenceCell, a: ArmSummary): string {
  return `${c.id} · ${a.arm}${c.arms.filter((x) => x.arm === a.arm).length > 1 ? ` #${a.launch}` : ''}`
}

const allArms = (index: EvidenceIndex) => index.cells.flatMap((c) => c.arms.map((a) => ({ c, a })))

function latencyTable(index: EvidenceIndex): string[] {
  const p = (x: Percentiles) => {
    const figures = [x.p50, x.p95, x.p99].map((v) => formatSignificant(v)).join(' / ')
    return `${figures}${x.samples < 100 && x.p99 !== null ? '*' : ''}`
  }
  const rows = allArms(index).map(({ c, a }) => [
    armLabel(c, a),
    p(a.timings.ttftMs),
    p(a.timings.tpotMs),
    p(a.timings.e2eMs),
    formatSignificant(a.itlJitterMs),
  ])
  if (rows.length === 0) return []
  return section(
    '## Latency (ms, p50 / p95 / p99; * p99 on fewer than 100 samples is descriptive only)',
    table(['arm', 'TTFT ms', 'TPOT ms', 'e2e ms', 'ITL jitter ms (sd)'], rows),
  )
}

/**
 * Remote arms: the round trips probed and TTFT and e2e less the one subtracted, named
 * network-adjusted; the latency table above keeps the raw figures, which the gates judge.
 */
function networkTable(index: EvidenceIndex): string[] {
  const arms = allArms(index).filter(({ a }) => a.network !== undefined)
  if (arms.length === 0) return []
  const p = (x: Percentiles | null) => (x === null ? ABSENT : [x.p50, x.p95, x.p99].map((v) => formatSignificant(v)).join(' / '))
  const rows = arms.map(({ c, a }) => {
    const n = a.network as NonNullable<ArmSummary['network']>
    return [
      armLabel(c, a),
      n.host,
      n.httpRttP50Ms === null ? ABSENT : `${formatSignificant(n.httpRttP50Ms)} (GET ${n.httpEndpoint ?? '?'})`,
      formatSignificant(n.handshakeP50Ms),
      n.rttMs === null ? ABSENT : formatSignificant(n.rttMs),
      p(n.adjustedTtftMs),
      p(n.adjustedE2eMs),
    ]
  })
  return section(
    '## Network (remote arms, ms; network-adjusted = raw − subtracted: the HTTP RTT p50 before the cell, else the handshake p50)',
    table(
      [
        'arm',
        'host',
        'HTTP RTT p50',
        'TCP handshake p50',
        'subtracted',
        'TTFT network-adjusted p50 / p95 / p99',
        'e2e network-adjusted p50 / p95 / p99',
      ],
      rows,
    ),
  )
}

/** Each arm's engine-reported prefix-cache hit share and the reset before its cell, where there is one to show. */
function prefixCacheTable(index: EvidenceIndex): string[] {
  const arms = allArms(index).filter(({ a }) => a.prefixCache !== undefined)
  if (arms.length === 0) return []
  const rows = arms.map(({ c, a }) => {
    const p = a.prefixCache
    const known = p !== undefined && p.totalCachedPromptTokens !== null
    return [
      armLabel(c, a),
      known ? formatFixedPercent(p.cachedPromptShare) : 'not reported',
      known ? String(p.totalCachedPromptTokens) : ABSENT,
      p?.reset ?? ABSENT,
    ]
  })
  return section(
    '## Prefix cache (the share of prompt tokens the engine reported serving from its cache; reset: before the cell)',
    table(['arm', 'cached share', 'cached tokens', 'reset'], rows),
  )
}

/** Conversations: each arm's TTFT p50 per turn, where a prefix cache shows from turn 2 on. */
function turnTable(index: EvidenceIndex): string[] {
  const arms = allArms(index).filter(({ a }) => (a.ttftByTurn ?? null) !== null)
  if (arms.length === 0) return []
  const turns = Math.max(...arms.flatMap(({ a }) => (a.ttftByTurn ?? []).map((t) => t.turn)))
  const rows = arms.map(({ c, a }) => {
    const byTurn = new Map((a.ttftByTurn ?? []).map((t) => [t.turn, t.ttftMs]))
    return [armLabel(c, a), ...Array.from({ length: turns }, (_, k) => formatSignificant(byTurn.get(k + 1)?.p50 ?? null))]
  })
  return section(
    '## TTFT by turn (conversations; ms, p50 over the ok requests of each turn)',
    table(['arm', ...Array.from({ length: turns }, (_, k) => `turn ${k + 1}`)], rows),
  )
}

/** Speculative decoding: each arm's draft acceptance as its engine reported it, where one did. */
function specDecodeTable(index: EvidenceIndex): string[] {
  const arms = allArms(index).filter(({ a }) => a.specDecode !== undefined)
  if (arms.length === 0) return []
  const rows = allArms(index).map(({ c, a }) => {
    const s = a.specDecode
    if (s === undefined) return [armLabel(c, a), 'none reported', ABSENT, ABSENT, ABSENT]
    return [
      armLabel(c, a),
      formatFixedPercent(s.acceptanceRate),
      s.meanAcceptanceLength === null ? ABSENT : formatFixed(s.meanAcceptanceLength, 2),
      s.draftTokens === null ? ABSENT : String(s.draftTokens),
      s.source,
    ]
  })
  return section(
    '## Speculative decoding (acceptance = accepted ÷ draft tokens; mean acceptance length = 1 + accepted tokens ÷ drafts)',
    table(['arm', 'acceptance', 'mean acceptance length', 'draft tokens', 'from'], rows),
  )
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
  return section(
    '## Open loop (good share: requests meeting every SLO, Wilson 95%)',
    table(['arm', 'arrivals', 'good share', 'goodput req/s', 'send lag p99 ms', 'in flight (max)', 'harness-limited'], rows),
  )
}

function concurrencyTable(index: EvidenceIndex): string[] {
  const rows = allArms(index).map(({ c, a }) => [
    armLabel(c, a),
    String(a.concurrency.requested),
    String(a.concurrency.clientObservedMax),
    formatSignificant(a.concurrency.engineRunningMax),
    formatSignificant(a.concurrency.engineWaitingMax),
  ])
  if (rows.length === 0) return []
  return section(
    '## Achieved concurrency (requests in flight)',
    table(['arm', 'requested', 'client in flight (max)', 'engine running (max)', 'engine waiting (max)'], rows),
  )
}

/** An arm's accuracy with its Wilson 95% interval: `80.0% [72.7%, 85.8%]`. */
function accuracyText(a: NonNullable<ArmSummary['accuracy']>): string {
  return `${formatFixedPercent(a.rate)} [${formatFixedPercent(a.wilson95Low)}, ${formatFixedPercent(a.wilson95High)}]`
}

function qualityAudit(index: EvidenceIndex): string[] {
  const accuracy = index.gates.filter((g) => g.decision.gate === 'toStayWithinAccuracyGap')
  const perArm = allArms(index).flatMap(({ c, a }) =>
    a.accuracy === undefined || a.accuracy === null
      ? []
      : [[armLabel(c, a), accuracyText(a.accuracy), `${a.accuracy.correct}/${a.accuracy.samples}`]],
  )
  const canaries = index.cells.flatMap((c) =>
    c.checks
      .filter((k) => k.check === 'toPassCanaries')
      .map((k) => [c.id, k.passed ? 'passed' : `failed: ${k.findings.slice(0, 2).join('; ')}`]),
  )
  const warnings = index.findings.filter((f) => f.kind === 'quality').map((f) => [f.cell, f.message])
  const parts = [
    ...(perArm.length === 0
      ? []
      : ['Accuracy per arm (Wilson 95%):', '', ...table(['arm', 'accuracy [Wilson 95%]', 'right/scored'], perArm), '']),
    ...(accuracy.length === 0
      ? []
      : [
          'Accuracy gap, candidate − baseline in points:',
          '',
          ...table(
            ['cell', 'gap pt [interval]', 'rule'],
            accuracy.map((g) => [g.cell, effect(g), g.decision.rule]),
          ),
          '',
        ]),
    ...(canaries.length === 0 ? [] : [...table(['cell', 'canaries'], canaries), '']),
    ...(warnings.length === 0 ? [] : [...table(['cell', 'quality warning'], warnings), '']),
  ]
  return section('## Quality audit', parts.length === 0 ? ['No accuracy, canary or quality check ran.'] : parts.slice(0, -1))
}

function gpuTable(index: EvidenceIndex): string[] {
  const rows = allArms(index).map(({ c, a }) => [
    armLabel(c, a),
    formatSignificant(a.memory.peakVramMiB),
    formatSignificant(a.memory.vramGrowthMiB),
    formatSignificant(a.gpu.activePowerMeanW),
    formatSignificant(a.gpu.temperatureP95C),
    formatSignificant(a.gpu.joulesPerToken),
    formatSignificant(a.memory.hostPeakMiB),
  ])
  if (rows.length === 0) return []
  return section(
    '## GPU operating characteristics (worst device; — where not observed)',
    table(['arm', 'peak VRAM MiB', 'VRAM growth MiB', 'active power W', 'temp p95 °C', 'J/token', 'host peak MiB'], rows),
  )
}

/** Who set an inconclusive gate's policy, in a table cell. */
const POLICY_SOURCE = {
  gate: "the gate's inconclusive option",
  plugin: 'servegate({ inconclusive })',
  default: 'the default of its kind',
} as const

function gateTable(index: EvidenceIndex): string[] {
  // The preemptions column only where an engine reported them.
  const withPreemptions = reportsPreemptions(index.gates.map((g) => g.decision))
  const rows = index.gates.map((g) => [
    g.cell,
    g.decision.gate,
    // An undecided gate says what its policy made of it, so it never reads as a pass; a held
    // `.not` says what it expected, so it never reads as a failure.
    g.decision.outcome === 'inconclusive' && gateExpected(g) === null
      ? `inconclusive (${g.passed ? 'passes' : 'fails'}: ${POLICY_SOURCE[g.policy.from]})`
      : outcomeText(g),
    effectText(g.decision),
    estimatorText(g.decision),
    `${g.decision.samples.paired} paired`,
    ...(withPreemptions ? [preemptionCell(g.decision.preemptions, ABSENT)] : []),
    g.testPassed ? 'passed' : 'FAILED',
  ])
  return section(
    '## Every gate',
    rows.length === 0
      ? ['No gate was asserted.']
      : table(
          ['cell', 'gate', 'outcome', 'effect [interval]', 'estimator', 'samples', ...(withPreemptions ? [PREEMPTION_HEAD] : []), 'test'],
          rows,
        ),
  )
}

/** The trend of main: each gated figure of this run beside the runs of main on its testbed; nothing without a history. */
function trendTable(index: EvidenceIndex): string[] {
  const history = index.history
  if (history === null) return []
  const body =
    history.trend.length === 0 ? ['No run of main measured these cells on this testbed yet.'] : table(TREND_HEAD, trendRows(history.trend))
  return section('## Trend of main (95% intervals; ▸ marks this run)', [markdownText(appendedText(history)), '', ...body])
}

function cellTable(index: EvidenceIndex): string[] {
  const rows = index.cells.map((c) => [
    c.id,
    c.ladder ?? '',
    c.kind,
    dispositionText(c),
    c.plan === null
      ? ABSENT
      : `${c.plan.workload} ctx${c.plan.promptTokens} ` +
        `${c.plan.arrivalRatePerS === null ? `c${c.plan.concurrency}` : `${c.plan.arrivalRatePerS} req/s`}, ${c.plan.requests} requests`,
    Object.entries(c.engines)
      .map(([arm, e]) => `${arm}: ${e}`)
      .join('; '),
    c.reason ?? '',
  ])
  return section(
    '## Cells (a sweep or capacity search keeps its cells together on one ladder)',
    rows.length === 0 ? ['No cells were planned.'] : table(['cell', 'ladder', 'kind', 'disposition', 'plan', 'engines', 'reason'], rows),
  )
}

/** Requests completed and failed: per arm over every cell, then per cell and arm. */
function requestsSection(index: EvidenceIndex): string[] {
  const arms = allArms(index)
  if (arms.length === 0) return []
  const roles = [...new Set(arms.map(({ a }) => a.arm))]
  const totals = roles.map((role) => {
    const of = arms.filter(({ a }) => a.arm === role)
    const completed = of.reduce((n, { a }) => n + a.completed, 0)
    const failed = failedOf(of.map(({ a }) => a))
    const cellFailures = of.filter(({ a }) => a.cellFailure !== null).length
    return [
      role,
      String(completed),
      failedCountText(failed),
      `${of.length} launch(es) in ${new Set(of.map(({ c }) => c.id)).size} cell(s)`,
      String(cellFailures),
    ]
  })
  // Cancelled requests (a cell's own `cancel` plan) get a column only where some cell cancelled any.
  const cancels = arms.some(({ a }) => a.cancelled !== undefined)
  const cancelled = (a: ArmSummary): string[] => (cancels ? [String(a.cancelled ?? 0)] : [])
  const perCell = arms.map(({ c, a }) => [
    armLabel(c, a),
    String(a.completed),
    failedCountText(a.failed),
    ...cancelled(a),
    a.cellFailure ?? '',
  ])
  return section('## Requests completed and failed', [
    ...table(['arm', 'completed', 'failed', 'over', 'launches that failed'], totals),
    '',
    ...table(['cell · arm', 'completed', 'failed', ...(cancels ? ['cancelled'] : []), 'cell failure'], perCell),
  ])
}

/** The facts `toBeMatchedPair` compares, in the order it reports them (src/gates/fairness.ts). */
const PAIR_FACTS = [
  'served model',
  'request stream sha256',
  'wire bytes',
  'request count',
  'concurrency',
  'arrivals',
  'max tokens',
  'sampling parameters',
  'output control',
  'output length',
  'failed share',
  'input tokens',
  'manifest',
  'model revision',
  'model fingerprint',
  'GPU model and memory',
  'GPU driver',
  'harness hash',
  'host',
] as const

/** The fact a matched-pair finding is about: its label, or for a per-arm finding what it says is missing. */
function factOf(finding: string): string {
  const [label = '', rest = ''] = finding.split(/: (.*)/s)
  if (label === 'baseline' || label === 'candidate') {
    if (rest.startsWith('no request stream hash')) return 'request stream sha256'
    if (rest.startsWith('the bytes written')) return 'wire bytes'
    if (rest.startsWith('no manifest')) return 'manifest'
    return rest.split(/[,:(]/)[0]?.trim() ?? rest
  }
  return label
}

const NOT_COMPARED = 'a cell failed, so nothing can be compared'

/** The GPUs' UUIDs of a launch, sorted; null when its record had no GPU facts. */
function uuids(m: MeasuredFacts | null | undefined): string | null {
  if (m === undefined || m === null || m.gpus.length === 0) return null
  return m.gpus
    .map((d) => d.uuid ?? '?')
    .sort()
    .join(',')
}

/**
 * Pair checks per fact: for each fact of the matched-pair check, the pairs where it held of those
 * compared; then the same GPU devices on both arms (UUIDs, from the index's measured facts), and
 * the other checks per cell.
 */
function pairCheckSection(index: EvidenceIndex): string[] {
  const all = pairs(index)
  if (all.length === 0) return []
  const checked = all.filter((c) => c.checks.some((k) => k.check === 'toBeMatchedPair'))
  const findingsOf = (c: EvidenceCell) => c.checks.filter((k) => k.check === 'toBeMatchedPair').flatMap((k) => k.findings)
  const uncompared = checked.filter((c) => findingsOf(c).length > 0 && findingsOf(c).every((f) => f.startsWith(NOT_COMPARED)))
  const compared = checked.filter((c) => !uncompared.includes(c))
  const failedFacts = new Map(compared.map((c) => [c.id, new Set(findingsOf(c).map(factOf))]))
  const facts = [
    ...PAIR_FACTS,
    ...new Set([...failedFacts.values()].flatMap((s) => [...s]).filter((f) => !PAIR_FACTS.includes(f as never))),
  ]
  const rows = facts.map((fact) => {
    const off = compared.filter((c) => failedFacts.get(c.id)?.has(fact)).map((c) => c.id)
    return [fact, `${compared.length - off.length}/${compared.length}`, list(off)]
  })
  const withGpus = compared.filter((c) => [armOf(c, 'baseline'), armOf(c, 'candidate')].every((a) => uuids(a?.measured) !== null))
  const sameGpu = withGpus.filter((c) => uuids(armOf(c, 'baseline')?.measured) === uuids(armOf(c, 'candidate')?.measured))
  if (withGpus.length > 0)
    rows.push([
      'GPU UUID (same devices on both arms; not required for a match)',
      `${sameGpu.length}/${withGpus.length}`,
      list(withGpus.filter((c) => !sameGpu.includes(c)).map((c) => c.id)),
    ])
  const others = (['toPassCanaries', 'toReachConcurrency'] as const).flatMap((check) => {
    const ran = index.cells.filter((c) => c.checks.some((k) => k.check === check))
    const held = ran.filter((c) => c.checks.filter((k) => k.check === check).every((k) => k.passed))
    return ran.length === 0 ? [] : [[check, `${held.length}/${ran.length}`, list(ran.filter((c) => !held.includes(c)).map((c) => c.id))]]
  })
  const notes = [
    ...(uncompared.length > 0 ? [`Not compared (an arm failed, so no fact can be): ${list(uncompared.map((c) => c.id))}.`] : []),
    ...(checked.length < all.length
      ? [`Never checked with toBeMatchedPair: ${list(all.filter((c) => !checked.includes(c)).map((c) => c.id))}.`]
      : []),
  ].map((note) => `- ${markdownText(note)}`)
  return section(`## Pair checks per fact (${compared.length} pair(s) compared of ${all.length})`, [
    ...(compared.length === 0 ? ['No pair was compared.'] : table(['fact', 'held', 'not held in'], [...rows, ...others])),
    ...(notes.length === 0 ? [] : ['', ...notes]),
  ])
}

/** Cell ids, the first six and a count of the rest; `—` when none. */
function list(ids: readonly string[]): string {
  if (ids.length === 0) return ABSENT
  return ids.length <= 6 ? ids.join(', ') : `${ids.slice(0, 6).join(', ')} and ${ids.length - 6} more`
}

/** Where a value of a fact was seen: every launch, or the launches by label. */
function seenIn(labels: readonly string[], total: number): string {
  return labels.length === total ? (total === 1 ? 'the one launch' : `all ${total} launches`) : list(labels)
}

/** One row per distinct value of a fact over the launches. */
function factRows(name: string, of: ReadonlyArray<{ label: string; value: string }>, total: number): string[][] {
  const by = new Map<string, string[]>()
  for (const { label, value } of of) by.set(value, [...(by.get(value) ?? []), label])
  return [...by].map(([value, labels]) => [name, value, seenIn(labels, total)])
}

function gpuText(m: MeasuredFacts): string {
  if (m.gpus.length === 0) return `none (${m.gpusAbsent ?? 'not reported'})`
  const kinds = new Map<string, number>()
  for (const d of m.gpus) {
    const key = `${d.name ?? 'unknown GPU'}, ${d.memoryTotalMiB === null ? 'memory unknown' : `${formatSignificant(d.memoryTotalMiB / 1024)} GiB`}`
    kinds.set(key, (kinds.get(key) ?? 0) + 1)
  }
  return [...kinds].map(([k, n]) => `${n}× ${k}`).join(' + ')
}

function hostText(h: MeasuredFacts['host']): string {
  return (
    `${h.os} ${h.kernel} ${h.arch}, ${h.cpuModel ?? 'CPU unknown'} (${h.cpus} CPUs), ` +
    `${formatSignificant(h.memoryBytes / 2 ** 30)} GiB RAM, Node ${h.node}`
  )
}

const orAbsent = (v: string | null | undefined) => v ?? ABSENT
const short = (hash: string | null) => (hash === null ? ABSENT : `${hash.slice(0, 12)}…`)

/**
 * What was measured, from the index's per-launch facts: the hardware (GPUs, driver, host), each
 * arm's engine (declared name, kind, version, commit) and model (id, revision, fingerprint), and
 * servegate (version, harness hash). A fact that differs between launches gets a row per value.
 */
function measuredSection(index: EvidenceIndex): string[] {
  const launches = allArms(index).map(({ c, a }) => ({ label: armLabel(c, a), c, a, m: a.measured }))
  if (launches.length === 0) return section('## What was measured', ['Nothing: no cell ran.'])
  const known = launches.flatMap((l) => (l.m === undefined || l.m === null ? [] : [{ ...l, m: l.m }]))
  const total = launches.length
  const unknown = launches.filter((l) => l.m === undefined || l.m === null).map((l) => l.label)
  const hardware = [
    ...factRows(
      'GPUs',
      known.map((l) => ({ label: l.label, value: gpuText(l.m) })),
      total,
    ),
    ...factRows(
      'GPU driver',
      known.map((l) => ({ label: l.label, value: [...new Set(l.m.gpus.map((d) => d.driverVersion ?? 'unknown'))].join(', ') || ABSENT })),
      total,
    ),
    ...factRows(
      'host',
      known.map((l) => ({ label: l.label, value: hostText(l.m.host) })),
      total,
    ),
    ...factRows(
      'harness',
      known.map((l) => ({ label: l.label, value: `servegate ${l.m.harness.version}, hash ${short(l.m.harness.hash)}` })),
      total,
    ),
  ]
  const roles = [...new Set(launches.map((l) => l.a.arm))]
  const software = roles.flatMap((role) => {
    const of = launches.filter((l) => l.a.arm === role)
    const by = new Map<string, string[]>()
    for (const l of of) {
      const m = l.m ?? null
      const row = [
        role,
        l.c.engines[role] ?? ABSENT,
        orAbsent(l.a.engine),
        orAbsent(l.a.engineVersion),
        orAbsent(m?.engineCommit),
        m?.modelId ?? l.a.model,
        orAbsent(m?.modelRevision),
        m === null ? ABSENT : short(m.modelFingerprint),
      ]
      const key = JSON.stringify(row)
      by.set(key, [...(by.get(key) ?? []), l.c.id])
    }
    const cells = new Set(of.map((l) => l.c.id)).size
    return [...by].map(([key, ids]) => [
      ...(JSON.parse(key) as string[]),
      new Set(ids).size === cells ? `all ${cells}` : list([...new Set(ids)]),
    ])
  })
  return section('## What was measured', [
    '### Hardware and harness',
    '',
    ...(hardware.length === 0 ? [] : [...table(['fact', 'value', 'launches'], hardware), '']),
    ...(unknown.length === 0 ? [] : [markdownText(`No manifest, so hardware and software unknown: ${list(unknown)}.`), '']),
    '### Engines and model per arm',
    '',
    ...table(['arm', 'declared', 'engine', 'version', 'commit', 'model', 'revision', 'fingerprint', 'cells'], software),
  ])
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
  '- Units: × for ratios (candidate ÷ baseline), pt for accuracy points (candidate − baseline), ms for times, tok/s and req/s for rates.',
  '- Run records are in `runs/`; `servegate verify` recomputes every hash and summary from them.',
  '',
]

function inventory(files: readonly FileRef[]): string[] {
  if (files.length === 0) return []
  return section(
    '## Artifacts',
    table(
      ['file', 'bytes', 'sha256'],
      files.map((f) => [f.path, String(f.bytes), `${f.sha256.slice(0, 16)}…`]),
    ),
  )
}

/**
 * The files the board lists in its inventory, from the index alone: the run records (cells, then
 * stored baselines) and the charts, in the order the writer lists them, so `renderBoard(index,
 * boardFiles(index))` is the board the evidence directory holds.
 */
export function boardFiles(index: EvidenceIndex): FileRef[] {
  return [
    ...index.cells.flatMap((c) => c.arms.map((a) => a.record)),
    ...index.storedBaselines.map((s) => s.record),
    ...index.artifacts.filter((f) => f.path !== 'README.md' && f.path !== 'index.html'),
  ]
}

/** The promotion verdict as a heading and its numbered reasons, each with its figures, as Markdown. */
export function promotionLines(index: EvidenceIndex): string[] {
  if (index.promotion.promotable) return [`**Promotable**: ${markdownText(promotableSummary(index))}.`]
  const n = index.promotion.reasons.length
  return [
    `**${index.partial === null ? 'Not promotable' : 'Partial run, not promotable'}**: ${n} reason${n === 1 ? '' : 's'}.`,
    '',
    ...index.promotion.reasons.map((r, i) => `${i + 1}. ${markdownText(r)}`),
  ]
}

/** How the board is drawn beyond the index. */
export interface BoardOptions {
  /** Markdown charts to embed; by default the index's Mermaid charts (`mermaidCharts`), '' for none. */
  charts?: string
}

/**
 * The board as Markdown; `files` are the run records and artifacts to list in its inventory.
 * Each section appears once; with no pair, the pair sections are left out; with no cell, it says so.
 * @example renderBoard(index, boardFiles(index))
 */
export function renderBoard(index: EvidenceIndex, files: readonly FileRef[], options: BoardOptions = {}): string {
  const p = index.provenance
  const findings = index.findings.filter((f) => f.kind !== 'descriptive-p99')
  const charts = (options.charts ?? mermaidCharts(index)).trim()
  return [
    '# servegate evidence',
    '',
    // The promotion verdict and its reasons follow in full, so the glance lines start after it.
    ...glanceLines(index)
      .slice(1)
      .map((l) => `- ${markdownText(l)}`),
    '',
    ...promotionLines(index),
    '',
    ...section(
      '### Findings',
      findings.map((f) => {
        const { tone, label } = findingView(index, f)
        return `- ${TONE_GLYPH[tone]}**${markdownText(label)}** ${markdownText(`${f.cell}: ${f.message}`)}`
      }),
    ),
    ...measuredSection(index),
    ...section('## Charts', charts === '' ? [] : [charts]),
    ...metricTables(index),
    ...latencyTable(index),
    ...networkTable(index),
    ...turnTable(index),
    ...prefixCacheTable(index),
    ...specDecodeTable(index),
    ...requestsSection(index),
    ...pairCheckSection(index),
    ...concurrencyTable(index),
    ...loadTable(index),
    ...qualityAudit(index),
    ...gpuTable(index),
    ...gateTable(index),
    ...trendTable(index),
    ...cellTable(index),
    ...METHODOLOGY,
    markdownText(
      `servegate ${p.servegateVersion}; harness ${p.harnessHashes.map((h) => h.slice(0, 12)).join(', ') || 'unknown'}; ` +
        `suite commit ${p.suiteCommit ?? 'unknown'}${p.redacted ? '; URLs and host names redacted' : ''}; ` +
        `generated from records finished by ${index.generatedAt ?? ABSENT}.`,
    ),
    '',
    ...inventory(files),
  ].join('\n')
}
