/**
 * A realistic evidence index built from a few figures per cell (no randomness), for the tests of
 * the reporter, the charts and the page: Qwen3-8B on vLLM (baseline) against `photon`
 * (candidate), synthetic-summary prompts of 1024 and 8192 tokens at concurrency 1, 4 and 16,
 * with a mix of gate outcomes, a failed cell (the candidate ran out of memory) and a pending one.
 */
import { createHash } from 'node:crypto'
import type { GateDecision } from '../schema/gate.ts'
import {
  type ArmSummary,
  type EvidenceCell,
  EVIDENCE_SCHEMA_ID,
  type EvidenceIndex,
  type FileRef,
  type Finding,
  type GateEntry,
  type PairCheck,
  type Percentiles,
} from '../schema/evidence.ts'
import { statisticsOf } from './build.ts'
import { P99_MIN_SAMPLES } from '../schema/constants.ts'
import { SERVEGATE_VERSION } from '../version.ts'

/** The engines of the sample's pairs. */
export const SAMPLE_ENGINES = { baseline: 'vllm:Qwen/Qwen3-8B', candidate: 'photon' } as const

const MODEL = 'Qwen/Qwen3-8B'
const WORKLOAD = 'synthetic-summary'
const SPEC_FILE = 'benchmarks/qwen3-summary.bench.ts'
const MAX_TOKENS = 256
/** toWinDecode({ margin: 0.05 }) and toHoldLatency({ notWorseThanPct: 10 }) of the sample's spec. */
const WIN_MARGIN = 0.05
const HOLD_TOLERANCE = 1.1

/** One planned cell of the sample and what became of it. */
interface SampleCell {
  promptTokens: number
  concurrency: number
  state: 'accepted' | 'failed' | 'pending'
  /** candidate ÷ baseline p50 decode tok/s, with the half-width of its interval. */
  decodeRatio: number
  /** candidate ÷ baseline p95 TTFT, with the half-width of its interval. */
  ttftRatio: number
  halfWidth: number
}

const GRID: readonly SampleCell[] = [
  { promptTokens: 1024, concurrency: 1, state: 'accepted', decodeRatio: 1.12, ttftRatio: 0.92, halfWidth: 0.04 },
  { promptTokens: 1024, concurrency: 4, state: 'accepted', decodeRatio: 1.08, ttftRatio: 0.95, halfWidth: 0.02 },
  { promptTokens: 1024, concurrency: 16, state: 'accepted', decodeRatio: 1.03, ttftRatio: 1.06, halfWidth: 0.05 },
  { promptTokens: 8192, concurrency: 1, state: 'accepted', decodeRatio: 0.96, ttftRatio: 0.98, halfWidth: 0.04 },
  { promptTokens: 8192, concurrency: 4, state: 'accepted', decodeRatio: 1.1, ttftRatio: 1.02, halfWidth: 0.03 },
  { promptTokens: 8192, concurrency: 16, state: 'failed', decodeRatio: 1, ttftRatio: 1, halfWidth: 0 },
  { promptTokens: 8192, concurrency: 64, state: 'pending', decodeRatio: 1, ttftRatio: 1, halfWidth: 0 },
]

const CANDIDATE_FAILURE =
  'ENGINE_EXITED: photon exited with code 1 before the first request completed (CUDA out of memory allocating the KV cache)'

/**
 * The sample evidence index: schema-valid, deterministic, consistent (statistics, findings and
 * promotion follow from its cells and gates). `artifacts` is empty: the reporter lists the files
 * it writes.
 * @example EvidenceIndex.parse(sampleEvidence())
 */
export function sampleEvidence(): EvidenceIndex {
  const cells = GRID.map(cellOf)
  const gates = GRID.filter((g) => g.state === 'accepted').flatMap(gatesOf)
  const findings = GRID.flatMap((g, i) => findingsOf(g, cells[i] as EvidenceCell, gates))
  return {
    schema: EVIDENCE_SCHEMA_ID,
    generatedAt: '2025-11-28T14:03:12.000Z',
    provenance: {
      servegateVersion: SERVEGATE_VERSION,
      harnessHashes: [sha256('harness')],
      suiteCommit: sha256('suite').slice(0, 40),
      redacted: true,
    },
    cells,
    gates,
    findings,
    statistics: statisticsOf(cells, gates),
    promotion: promotionOf(cells, gates),
    artifacts: [],
  }
}

function sha256(text: string): string {
  return createHash('sha256').update(text).digest('hex')
}

function round2(x: number): number {
  return Math.round(x * 100) / 100
}

function cellId(g: SampleCell): string {
  return `qwen3-8b-summary-ctx${g.promptTokens}-c${g.concurrency}`
}

function testName(g: SampleCell, what: string): string {
  return `qwen3-8b summary ctx${g.promptTokens} c${g.concurrency} > ${what}`
}

function requestsOf(g: SampleCell): number {
  return 64 * Math.max(1, g.concurrency / 2)
}

function cellOf(g: SampleCell): EvidenceCell {
  const reason = { accepted: null, failed: `candidate: ${CANDIDATE_FAILURE}`, pending: 'declared but never run in this run' }[g.state]
  return {
    id: cellId(g),
    kind: 'pair',
    file: SPEC_FILE,
    required: true,
    disposition: g.state,
    reason,
    ladder: null,
    plan: {
      api: 'chat',
      concurrency: g.concurrency,
      arrival: 'closed',
      arrivalRatePerS: null,
      requests: requestsOf(g),
      maxTokens: MAX_TOKENS,
      workload: WORKLOAD,
      promptTokens: g.promptTokens,
      requestStreamSha256: sha256(`stream-${cellId(g)}`),
    },
    engines: { ...SAMPLE_ENGINES },
    arms: g.state === 'pending' ? [] : [armOf(g, 'baseline'), armOf(g, 'candidate')],
    checks: g.state === 'pending' ? [] : checksOf(g),
  }
}

/** Percentiles from a median and how far the tail reaches above it. */
function spread(p50: number | null, tail: number, samples: number): Percentiles {
  if (p50 === null) return { p50: null, p95: null, p99: null, samples: 0 }
  return { p50: round2(p50), p95: round2(p50 * tail), p99: round2(p50 * tail ** 1.5), samples }
}

/**
 * One arm's figures from a small serving model: decode slows as the batch grows and the context
 * lengthens; effective prefill (queueing included) slows with concurrency.
 */
function armOf(g: SampleCell, arm: 'baseline' | 'candidate'): ArmSummary {
  const candidate = arm === 'candidate'
  const dead = candidate && g.state === 'failed'
  const requests = requestsOf(g)
  const n = dead ? 0 : requests
  const longContext = g.promptTokens > 4096
  const decode = (72 / (1 + 0.09 * (g.concurrency - 1))) * (longContext ? 0.82 : 1) * (candidate ? g.decodeRatio : 1)
  const prefill = (longContext ? 8200 : 11000) / (1 + 0.12 * (g.concurrency - 1)) / (candidate ? g.ttftRatio : 1)
  const ttftMs = (1000 * g.promptTokens) / prefill
  const tpotMs = 1000 / decode
  const e2eMs = ttftMs + (MAX_TOKENS - 1) * tpotMs
  const throughput = (0.95 * g.concurrency * MAX_TOKENS * 1000) / e2eMs
  const power = 310 + 18 * g.concurrency
  const value = <T>(v: T): T | null => (dead ? null : v)
  return {
    arm,
    launch: 1,
    engine: SAMPLE_ENGINES[arm],
    engineVersion: candidate ? '0.4.0-rc2' : '0.11.0',
    model: MODEL,
    completed: n,
    failed: requests - n,
    cellFailure: dead ? CANDIDATE_FAILURE : null,
    timings: {
      ttftMs: spread(value(ttftMs), 1.35, n),
      timeToFirstOutputMs: spread(value(ttftMs), 1.35, n),
      tpotMs: spread(value(tpotMs), 1.18, n),
      itlMs: spread(value(tpotMs), 1.4, n * (MAX_TOKENS - 1)),
      e2eMs: spread(value(e2eMs), 1.2, n),
      decodeTokPerS: spread(value(decode), 1.08, n),
      effectivePrefillTokPerS: spread(value(prefill), 1.15, n),
    },
    outputThroughputTokPerS: value(round2(throughput)),
    itlJitterMs: value(round2(tpotMs * 0.21)),
    concurrency: {
      requested: g.concurrency,
      clientObservedMax: dead ? 0 : g.concurrency,
      engineRunningMax: value(g.concurrency),
      engineWaitingMax: value(0),
    },
    memory: {
      peakVramMiB: dead ? 79_872 : candidate ? 61_440 + 0.5 * g.promptTokens : 72_530,
      vramGrowthMiB: value(candidate ? 96 : 12),
      hostPeakMiB: candidate ? 5_120 : 9_830,
    },
    gpu: {
      activePowerMeanW: value(power),
      temperatureP95C: value(61 + g.concurrency / 2),
      joulesPerToken: value(round2(power / throughput)),
    },
    load: {
      goodFraction: null,
      goodFractionLow: null,
      goodFractionHigh: null,
      goodputReqPerS: null,
      sendLagP99Ms: value(0.4),
      inFlightMax: null,
    },
    harnessLimited: false,
    p99DescriptiveOnly:
      n > 0 && n < P99_MIN_SAMPLES ? ['ttftMs', 'timeToFirstOutputMs', 'tpotMs', 'e2eMs', 'decodeTokPerS', 'effectivePrefillTokPerS'] : [],
    sequential: null,
    record: recordRef(`runs/${cellId(g)}/${arm}-1.json`, requests),
  }
}

function recordRef(path: string, requests: number): FileRef {
  return { path, bytes: 18_000 + 1_150 * requests, sha256: sha256(path) }
}

function checksOf(g: SampleCell): PairCheck[] {
  const failed = g.state === 'failed'
  const check = (check: string, what: string, findings: string[]): PairCheck => ({
    check,
    passed: findings.length === 0,
    findings,
    test: testName(g, what),
    testPassed: findings.length === 0,
  })
  return [
    check(
      'toBeMatchedPair',
      'is a matched pair',
      failed ? ['candidate: no measured requests, so its request stream and input tokens cannot be compared'] : [],
    ),
    check('toPassCanaries', 'passes canaries', []),
    check('toReachConcurrency', 'reaches concurrency', failed ? [`candidate: reached 0 of ${g.concurrency} requests in flight`] : []),
  ]
}

function outcomeOf(low: number, high: number, bound: number, kind: GateDecision['kind']): GateDecision['outcome'] {
  if (kind === 'superiority') return low > bound ? 'pass' : high < bound ? 'fail' : 'inconclusive'
  return low > bound ? 'fail' : high <= bound ? 'pass' : 'inconclusive'
}

function gatesOf(g: SampleCell): GateEntry[] {
  const requests = requestsOf(g)
  const samples = { baseline: requests, candidate: requests, paired: requests }
  const decision = (
    gate: string,
    kind: GateDecision['kind'],
    metric: string,
    estimate: number,
    bound: number,
    rule: string,
  ): GateDecision => {
    const low = round2(estimate - g.halfWidth)
    const high = round2(estimate + g.halfWidth)
    const outcome = outcomeOf(low, high, bound, kind)
    return {
      gate,
      outcome,
      kind,
      metric,
      effect: {
        estimate,
        low,
        high,
        unit: 'ratio',
        confidence: 0.95,
        method: `geometric mean of ${requests} paired ratios (mean log-ratio), BCa bootstrap (2000 resamples, seed 1)`,
      },
      samples,
      rule,
      moreRequestsHint: outcome === 'inconclusive' && kind === 'superiority' ? requests * 3 : null,
      warnings:
        outcome === 'inconclusive' && kind === 'non-regression'
          ? [
              `inconclusive: the 95% interval [${low.toFixed(3)}, ${high.toFixed(3)}] straddles the tolerance ${bound.toFixed(3)}; passes with this annotation, more requests would settle it`,
            ]
          : [],
    }
  }
  const win = decision(
    'toWinDecode',
    'superiority',
    'decodeTokPerS',
    g.decodeRatio,
    1 + WIN_MARGIN,
    `pass if the lower bound of the 95% interval of candidate/baseline decode tok/s exceeds ${(1 + WIN_MARGIN).toFixed(3)}; fail if its upper bound is below it; otherwise inconclusive`,
  )
  const hold = decision(
    'toHoldLatency',
    'non-regression',
    'ttftMs p95',
    g.ttftRatio,
    HOLD_TOLERANCE,
    `fail if the lower bound of the 95% interval of candidate/baseline TTFT p95 exceeds ${HOLD_TOLERANCE.toFixed(3)}; pass if its upper bound is at most ${HOLD_TOLERANCE.toFixed(3)}; otherwise inconclusive, which passes with a warning`,
  )
  return [
    { cell: cellId(g), test: testName(g, 'wins decode by 5%'), testPassed: win.outcome === 'pass', decision: win },
    { cell: cellId(g), test: testName(g, 'holds p95 TTFT'), testPassed: hold.outcome !== 'fail', decision: hold },
  ]
}

function findingsOf(g: SampleCell, cell: EvidenceCell, gates: readonly GateEntry[]): Finding[] {
  const findings: Finding[] = []
  for (const { decision: d } of gates.filter((e) => e.cell === cell.id)) {
    const interval = `${d.effect.estimate?.toFixed(2)}× (95% CI ${d.effect.low?.toFixed(2)}–${d.effect.high?.toFixed(2)})`
    if (d.outcome === 'fail')
      findings.push({
        kind: d.kind === 'superiority' ? 'non-win' : 'regression',
        cell: cell.id,
        message: `${d.gate}: ${d.metric} ${interval}`,
      })
    if (d.outcome === 'inconclusive')
      findings.push({ kind: 'inconclusive', cell: cell.id, message: `${d.gate}: ${d.metric} ${interval}, not decided` })
  }
  if (cell.arms.some((a) => a.p99DescriptiveOnly.length > 0)) {
    findings.push({
      kind: 'descriptive-p99',
      cell: cell.id,
      message: `p99 over ${requestsOf(g)} requests per arm is descriptive only (fewer than ${P99_MIN_SAMPLES})`,
    })
  }
  for (const check of cell.checks.filter((c) => !c.passed)) {
    findings.push({ kind: 'check-failed', cell: cell.id, message: `${check.check}: ${check.findings.join('; ')}` })
  }
  if (cell.disposition !== 'accepted')
    findings.push({ kind: 'cell-not-accepted', cell: cell.id, message: `${cell.disposition}: ${cell.reason}` })
  return findings
}

function promotionOf(cells: readonly EvidenceCell[], gates: readonly GateEntry[]): EvidenceIndex['promotion'] {
  const reasons = [
    ...cells.filter((c) => c.required && c.disposition !== 'accepted').map((c) => `required cell ${c.id} is ${c.disposition}: ${c.reason}`),
    ...gates.filter((e) => !e.testPassed).map((e) => `${e.test}: ${e.decision.gate} ${e.decision.outcome}`),
  ]
  return { promotable: reasons.length === 0, reasons }
}
