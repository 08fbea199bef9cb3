import type { AccuracyDetail, ArmAccuracy, GateDecision } from '../schema/gate.ts'
import { normalQuantile, studentTQuantile } from '../stats/distributions.ts'
import { pairedProportionDifference, type PairedTable } from '../stats/tests.ts'
import { type GatePair, type GateRecord, launchesOf } from './arms.ts'
import { ScoredPairs } from './scored-pairs.ts'
import { accuracyArmsMethod, accuracyGapClusterMethod, accuracyGapMethod, notEstimableMethod } from './method-text.ts'
import { accuracyGapClusterRule, accuracyGapRule } from './rule-text.ts'
import {
  accuracyImprovedWarning,
  accuracyInconclusiveWarning,
  NO_SCORED_PAIRS_WARNING,
  outputLengthWarning,
  pooledQuestionsWarning,
  repeatedQuestionsWarning,
  unevenLaunchesWarning,
} from './warning-text.ts'
import { decideHint, questionsSetting } from './decide-hints.ts'
import { AccuracyGapGateOptions, parseOptions, type ResolvedAccuracyGapGateOptions } from './gate-options.ts'
import { atLeastStudentT, sampleSd } from './interval.ts'
import { bcaInterval, bootstrapMeanOf } from '../stats/bootstrap.ts'

/** Distinct questions of the arms' dataset (every launch asks the same ones), or null without a dataset. */
function datasetRows(baseline: readonly GateRecord[], candidate: readonly GateRecord[]): number | null {
  const rows = [...baseline, ...candidate].map((r) => r.plan?.workload?.dataset?.rows ?? null)
  return rows.every((r) => r !== null && r === rows[0]) ? (rows[0] as number) : null
}

/**
 * Questions asked more than once (a dataset cycled over more requests than it has rows): the
 * question is the unit. Each arm's accuracy on a question is its share right over that question's
 * paired requests; the effect is the mean of the per-question differences with a BCa bootstrap
 * interval over questions (at least Student's t), as accuracy shares (not points).
 */
function questionLevelInterval(differences: readonly number[], confidence: number): { estimate: number; low: number; high: number } {
  const questions = differences.length
  const estimate = differences.reduce((a, b) => a + b, 0) / Math.max(1, questions)
  // Every question moved alike (or one question): nothing to resample, the interval is the estimate.
  if (questions < 2 || differences.every((d) => d === differences[0])) return { estimate, low: estimate, high: estimate }
  const bca = bcaInterval(bootstrapMeanOf(differences, { seed: 1, resamples: 2000 }), confidence, { expandForN: questions })
  return atLeastStudentT(bca, sampleSd(differences), questions, confidence)
}

/** The z of a two-sided interval at `confidence`. */
const twoSidedZ = (confidence: number): number => normalQuantile(1 - (1 - confidence) / 2)

/**
 * The Wilson score interval of a share `rate` of `n` units. `wilsonInterval` takes whole counts;
 * a question's share right over its repeats is fractional, so this takes the share itself.
 */
function wilsonOfShare(rate: number, n: number, z: number): { low: number; high: number } {
  const z2 = z * z
  const denominator = 1 + z2 / n
  const center = (rate + z2 / (2 * n)) / denominator
  const half = (z / denominator) * Math.sqrt((rate * (1 - rate)) / n + z2 / (4 * n * n))
  return { low: rate === 0 ? 0 : Math.max(0, center - half), high: rate === 1 ? 1 : Math.min(1, center + half) }
}

/** One arm's accuracy: `correct` of `scored` units with its Wilson interval. */
function armAccuracy(correct: number, scored: number, z: number): ArmAccuracy {
  if (scored === 0) return { correct, scored, rate: null, low: null, high: null }
  const rate = Math.min(1, correct / scored)
  return { correct, scored, rate, ...wilsonOfShare(rate, scored, z) }
}

/** No dataset has more distinct questions than this; beyond it, "no practical number". */
const MAX_QUESTIONS = 1_000_000

/**
 * How many questions scored on both arms would likely decide an inconclusive gate (one request
 * per question): the observed table scaled up in proportion, the smallest size at which the
 * gate's own rule — Newcombe's interval above −points, or McNemar and the interval below it —
 * decides, found by doubling then bisection. Null when none up to a million does (the estimate
 * sits on the margin).
 * @example pairedQuestionsNeeded({ both: 40, firstOnly: 3, secondOnly: 4, neither: 53 }, 0.98, 2) // 3730 (observed −1 pt, margin 2 pt)
 */
export function pairedQuestionsNeeded(table: PairedTable, confidence: number, points: number): number | null {
  const n = table.both + table.firstOnly + table.secondOnly + table.neither
  if (n === 0) return null
  const decides = (m: number): boolean => {
    const scale = (count: number) => Math.round((count * m) / n)
    const t = {
      both: scale(table.both),
      firstOnly: scale(table.firstOnly),
      secondOnly: scale(table.secondOnly),
      neither: scale(table.neither),
    }
    const r = pairedProportionDifference(t, confidence)
    return r.low * 100 > -points || (r.p < 1 - confidence && t.secondOnly > t.firstOnly && r.high * 100 < -points)
  }
  let undecided = n
  let decided = n * 2
  while (!decides(decided)) {
    undecided = decided
    decided *= 2
    if (undecided >= MAX_QUESTIONS) return null
  }
  while (decided - undecided > 1) {
    const mid = Math.floor((undecided + decided) / 2)
    if (decides(mid)) decided = mid
    else undecided = mid
  }
  return decided
}

/**
 * How many distinct questions would likely decide an inconclusive gate whose questions repeat:
 * with the observed mean m and standard deviation s of the per-question differences (shares),
 * the smallest Q with t(Q − 1) · s / √Q < |m + points| (the interval of the mean then clears
 * −points on the side m lies), t the two-sided Student quantile at the gate's confidence. Null
 * when m sits on the margin or Q would exceed a million.
 */
export function clusteredQuestionsNeeded(differences: readonly number[], confidence: number, points: number): number | null {
  const questions = differences.length
  const gap = Math.abs(differences.reduce((a, b) => a + b, 0) / Math.max(1, questions) + points / 100)
  const sd = sampleSd(differences)
  if (gap < 1e-12) return null
  // The normal answer, then Student's t at that size until it settles (a few rounds).
  let needed = Math.ceil(((twoSidedZ(confidence) * sd) / gap) ** 2)
  for (let round = 0; round < 20; round++) {
    const t = studentTQuantile(1 - (1 - confidence) / 2, Math.max(1, needed - 1))
    const next = Math.ceil(((t * sd) / gap) ** 2)
    if (next === needed) break
    needed = next
  }
  // The bootstrap interval can be wider than t's, so a size at or below today's is never the answer.
  needed = Math.max(needed, questions + 1)
  return needed > MAX_QUESTIONS ? null : needed
}

/**
 * A non-regression gate on accuracy over the same questions: requests scored on both arms, paired
 * by index (with repeats, the i-th launch of each arm is paired with the other's i-th). The effect
 * is candidate − baseline accuracy in points with Newcombe's paired interval (method 10) and the
 * exact McNemar test. Fail when the candidate is confidently worse by at least `points`: McNemar
 * significant at 1 − confidence and the interval's upper bound below −points. Pass when the lower
 * bound is above −points. Otherwise inconclusive (passes with a warning that says how many
 * questions would likely decide it). A candidate confidently better (the interval above 0, McNemar
 * significant) is reported as an improvement in the warnings. `accuracy` holds each arm's accuracy
 * with its Wilson interval (per distinct question when questions repeat).
 *
 * A mean output-length gap (completion tokens on the paired questions) of at least
 * `outputLengthPct` adds a warning and never fails on its own: a different length is a fact to
 * review (verbosity, truncation), not a regression by itself (docs/gates.md: "a warning by default").
 * @example accuracyGapGate({ baseline, candidate }, { points: 2, outputLengthPct: 10 })
 */
export function accuracyGapGate(pair: GatePair, options: AccuracyGapGateOptions = {}): GateDecision {
  const o = parseOptions(typeof options?.gate === 'string' ? options.gate : 'toStayWithinAccuracyGap', AccuracyGapGateOptions, options)
  const baseline = launchesOf(pair.baseline)
  const candidate = launchesOf(pair.candidate)
  const launches = Math.min(baseline.length, candidate.length)
  const pairs = new ScoredPairs(datasetRows(baseline, candidate))
  for (let i = 0; i < launches; i++) pairs.addLaunch(baseline[i] as GateRecord, candidate[i] as GateRecord)
  const samples = pairs.samples()
  const clustered = pairs.clustered
  const rule = clustered
    ? accuracyGapClusterRule({ confidence: o.confidence, points: o.points })
    : accuracyGapRule({ confidence: o.confidence, points: o.points, outputLengthPct: o.outputLengthPct })
  const warnings: string[] = []
  if (baseline.length !== candidate.length)
    warnings.push(unevenLaunchesWarning({ baseline: baseline.length, candidate: candidate.length, paired: launches }))
  if (launches > 1) warnings.push(pooledQuestionsWarning(launches))
  const lengths = pairs.outputLengths()
  if (lengths !== null && Math.abs(lengths.gap) * 100 >= o.outputLengthPct) {
    warnings.push(outputLengthWarning({ ...lengths, thresholdPct: o.outputLengthPct }))
  }
  const z = twoSidedZ(o.confidence)
  // Nothing scored is a misconfiguration, not a held accuracy: the gate fails and says why.
  if (samples.paired === 0) return noScoredPairs(o, z, samples, rule, [...warnings, NO_SCORED_PAIRS_WARNING])

  const verdict = clustered ? clusteredVerdict(pairs, o, z) : pairedVerdict(pairs.table, o, z)
  if (verdict.leadWarning !== null) warnings.unshift(verdict.leadWarning)
  const { estimate, low, high, outcome, method } = verdict
  const questionsNeeded = outcome === 'inconclusive' ? verdict.needed() : null
  if (outcome === 'inconclusive') {
    const { confidence, points } = o
    const { p, questions } = verdict
    warnings.push(accuracyInconclusiveWarning({ confidence, low, high, points, p, estimate, questions, clustered, questionsNeeded }))
  }
  // Confidently better, as confidently as a drop would fail: McNemar agrees where it applies.
  const improved = low > 0 && (verdict.p === null || verdict.p < 1 - o.confidence)
  if (improved) warnings.push(accuracyImprovedWarning({ estimate, low, high, confidence: o.confidence }))
  const accuracy: AccuracyDetail = {
    unit: clustered ? 'question' : 'request',
    confidence: o.confidence,
    method: accuracyArmsMethod({ clustered, confidence: o.confidence }),
    ...verdict.arms,
    improved,
    questionsNeeded,
  }
  const effect: GateDecision['effect'] = { estimate, low, high, unit: 'points', confidence: o.confidence, method }
  return {
    gate: o.gate,
    outcome,
    kind: 'non-regression',
    metric: 'accuracy',
    effect,
    samples,
    rule,
    moreRequestsHint: null,
    // Distinct questions come from the dataset, not from an option; scored pairs from `requests`.
    decideHint:
      outcome === 'inconclusive' && !clustered && questionsNeeded !== null
        ? decideHint([questionsSetting(questionsNeeded, samples.paired)])
        : null,
    warnings,
    accuracy,
  }
}

/** The effect, outcome and arms' accuracies of a gate with pairs to judge, before its warnings. */
interface Verdict {
  estimate: number
  low: number
  high: number
  outcome: GateDecision['outcome']
  method: string
  /** McNemar's exact p; null where the question is the unit. */
  p: number | null
  /** The units judged: paired requests, or distinct questions when they repeat. */
  questions: number
  arms: { baseline: ArmAccuracy; candidate: ArmAccuracy }
  /** How many questions would likely decide it; asked only when inconclusive. */
  needed: () => number | null
  /** A warning that leads the list (the questions repeat); null when none. */
  leadWarning: string | null
}

/** One request per question: Newcombe's paired interval and the exact McNemar test, in points. */
function pairedVerdict(table: PairedTable, o: ResolvedAccuracyGapGateOptions, z: number): Verdict {
  const n = table.both + table.firstOnly + table.secondOnly + table.neither
  const result = pairedProportionDifference(table, o.confidence)
  const [estimate, low, high] = [result.estimate * 100, result.low * 100, result.high * 100]
  const significant = result.p < 1 - o.confidence && table.secondOnly > table.firstOnly
  const outcome = significant && high < -o.points ? 'fail' : low > -o.points ? 'pass' : 'inconclusive'
  return {
    estimate,
    low,
    high,
    outcome,
    method: accuracyGapMethod({ questions: n, candidateOnly: table.firstOnly, baselineOnly: table.secondOnly, p: result.p }),
    p: result.p,
    questions: n,
    arms: { baseline: armAccuracy(table.both + table.secondOnly, n, z), candidate: armAccuracy(table.both + table.firstOnly, n, z) },
    needed: () => pairedQuestionsNeeded(table, o.confidence, o.points),
    leadWarning: null,
  }
}

/** Questions asked more than once: the question is the unit, the interval over questions. */
function clusteredVerdict(pairs: ScoredPairs, o: ResolvedAccuracyGapGateOptions, z: number): Verdict {
  const shares = pairs.shares()
  const questions = shares.differences.length
  const requests = pairs.paired
  const q = questionLevelInterval(shares.differences, o.confidence)
  const [estimate, low, high] = [q.estimate * 100, q.low * 100, q.high * 100]
  const outcome = high < -o.points ? 'fail' : low > -o.points ? 'pass' : 'inconclusive'
  const sum = (xs: readonly number[]) => xs.reduce((a, b) => a + b, 0)
  return {
    estimate,
    low,
    high,
    outcome,
    method: accuracyGapClusterMethod({ questions, requests }),
    p: null,
    questions,
    arms: { baseline: armAccuracy(sum(shares.baseline), questions, z), candidate: armAccuracy(sum(shares.candidate), questions, z) },
    needed: () => clusteredQuestionsNeeded(shares.differences, o.confidence, o.points),
    leadWarning: repeatedQuestionsWarning({ questions, requests }),
  }
}

/** The failing decision when no request was scored on both arms. */
function noScoredPairs(
  o: ResolvedAccuracyGapGateOptions,
  z: number,
  samples: GateDecision['samples'],
  rule: string,
  warnings: string[],
): GateDecision {
  return {
    gate: o.gate,
    outcome: 'fail',
    kind: 'non-regression',
    metric: 'accuracy',
    effect: {
      estimate: null,
      low: null,
      high: null,
      unit: 'points',
      confidence: null,
      method: notEstimableMethod({ kind: 'no-scored-pairs' }),
    },
    samples,
    rule,
    moreRequestsHint: null,
    decideHint: null,
    warnings,
    accuracy: {
      unit: 'request',
      confidence: o.confidence,
      method: accuracyArmsMethod({ clustered: false, confidence: o.confidence }),
      baseline: armAccuracy(0, 0, z),
      candidate: armAccuracy(0, 0, z),
      improved: false,
      questionsNeeded: null,
    },
  }
}
