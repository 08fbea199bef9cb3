import type { GateDecision } from '../schema/gate.ts'
import { pairedProportionDifference, type PairedTable } from '../stats/tests.ts'
import { type GatePair, type GateRecord, launchesOf, type OkRequest, pairByIndex, valuesByIndex } from './arms.ts'
import { accuracyGapClusterMethod, accuracyGapMethod, notEstimableMethod } from './method-text.ts'
import { accuracyGapClusterRule, accuracyGapRule } from './rule-text.ts'
import {
  accuracyInconclusiveWarning,
  NO_SCORED_PAIRS_WARNING,
  outputLengthWarning,
  pooledQuestionsWarning,
  repeatedQuestionsWarning,
  unevenLaunchesWarning,
} from './warning-text.ts'
import { AccuracyGapOptions, parseOptions, type ResolvedAccuracyGapOptions } from './gate-options.ts'
import { atLeastStudentT, sampleSd } from './interval.ts'
import { bcaInterval, bootstrapMeanOf } from '../stats/bootstrap.ts'

/** Distinct questions of the arms' dataset (every launch asks the same ones), or null without a dataset. */
function datasetRows(baseline: readonly GateRecord[], candidate: readonly GateRecord[]): number | null {
  const rows = [...baseline, ...candidate].map((r) => r.plan?.workload?.dataset?.rows ?? null)
  return rows.every((r) => r !== null && r === rows[0]) ? (rows[0] as number) : null
}

/**
 * Questions asked more than once (a dataset cycled over more requests than it has rows): the
 * question is the unit. Each arm's accuracy per question is its share right over that question's
 * paired requests; the effect is the mean of the per-question differences, in points, with a BCa
 * bootstrap interval over questions (at least Student's t). Fail when the upper bound is below
 * −points, pass when the lower bound is above it, otherwise inconclusive.
 */
function clusteredAccuracyGap(
  o: ResolvedAccuracyGapOptions,
  baseline: readonly GateRecord[],
  candidate: readonly GateRecord[],
  launches: number,
  rows: number,
  samples: GateDecision['samples'],
): GateDecision {
  const right = { baseline: new Float64Array(rows), candidate: new Float64Array(rows), asked: new Float64Array(rows) }
  for (let i = 0; i < launches; i++) {
    const paired = pairByIndex(valuesByIndex(baseline[i] as GateRecord, scoredOf), valuesByIndex(candidate[i] as GateRecord, scoredOf))
    paired.indices.forEach((index, k) => {
      const q = index % rows
      right.asked[q] = (right.asked[q] as number) + 1
      if ((paired.baseline[k] as Scored).correct) right.baseline[q] = (right.baseline[q] as number) + 1
      if ((paired.candidate[k] as Scored).correct) right.candidate[q] = (right.candidate[q] as number) + 1
    })
  }
  const differences: number[] = []
  for (let q = 0; q < rows; q++) {
    const asked = right.asked[q] as number
    if (asked > 0) differences.push(((right.candidate[q] as number) - (right.baseline[q] as number)) / asked)
  }
  const questions = differences.length
  const rule = accuracyGapClusterRule({ confidence: o.confidence, points: o.points })
  const warnings = [repeatedQuestionsWarning({ questions, requests: samples.paired })]
  let interval = { estimate: differences.reduce((a, b) => a + b, 0) / Math.max(1, questions), low: 0, high: 0 }
  if (questions >= 2 && differences.some((d) => d !== differences[0])) {
    const bca = bcaInterval(bootstrapMeanOf(differences, { seed: 1, resamples: 2000 }), o.confidence, { expandForN: questions })
    interval = atLeastStudentT(bca, sampleSd(differences), questions, o.confidence)
  } else {
    interval = { estimate: interval.estimate, low: interval.estimate, high: interval.estimate }
  }
  const [estimate, low, high] = [interval.estimate * 100, interval.low * 100, interval.high * 100]
  const outcome: GateDecision['outcome'] = high < -o.points ? 'fail' : low > -o.points ? 'pass' : 'inconclusive'
  if (outcome === 'inconclusive')
    warnings.push(accuracyInconclusiveWarning({ confidence: o.confidence, low, high, points: o.points, p: null }))
  return {
    gate: o.gate,
    outcome,
    kind: 'non-regression',
    metric: 'accuracy',
    effect: {
      estimate,
      low,
      high,
      unit: 'points',
      confidence: o.confidence,
      method: accuracyGapClusterMethod({ questions, requests: samples.paired }),
    },
    samples,
    rule,
    moreRequestsHint: null,
    warnings,
  }
}

interface Scored {
  correct: boolean
  completionTokens: number | null
}

const scoredOf = (r: OkRequest): Scored | null =>
  r.score === null ? null : { correct: r.score.correct, completionTokens: r.completionTokens }

/**
 * A non-regression gate on accuracy over the same questions: requests scored on both arms, paired
 * by index (with repeats, the i-th launch of each arm is paired with the other's i-th). The effect
 * is candidate − baseline accuracy in points with Newcombe's paired interval (method 10) and the
 * exact McNemar test. Fail when the candidate is confidently worse by at least `points`: McNemar
 * significant at 1 − confidence and the interval's upper bound below −points. Pass when the lower
 * bound is above −points. Otherwise inconclusive (passes with a warning).
 *
 * A mean output-length gap (completion tokens on the paired questions) of at least
 * `outputLengthPct` adds a warning and never fails on its own: a different length is a fact to
 * review (verbosity, truncation), not a regression by itself (docs/gates.md: "a warning by default").
 * @example accuracyGapGate({ baseline, candidate }, { points: 2, outputLengthPct: 10 })
 */
export function accuracyGapGate(pair: GatePair, options: AccuracyGapOptions = {}): GateDecision {
  const o = parseOptions(typeof options?.gate === 'string' ? options.gate : 'toStayWithinAccuracyGap', AccuracyGapOptions, options)
  const baseline = launchesOf(pair.baseline)
  const candidate = launchesOf(pair.candidate)
  const launches = Math.min(baseline.length, candidate.length)
  const table: PairedTable = { both: 0, firstOnly: 0, secondOnly: 0, neither: 0 }
  let samplesB = 0
  let samplesC = 0
  let tokensB = 0
  let tokensC = 0
  let lengthPairs = 0
  for (let i = 0; i < launches; i++) {
    const b = valuesByIndex(baseline[i] as GateRecord, scoredOf)
    const c = valuesByIndex(candidate[i] as GateRecord, scoredOf)
    samplesB += b.size
    samplesC += c.size
    const paired = pairByIndex(b, c)
    paired.indices.forEach((_, k) => {
      const cb = paired.baseline[k] as Scored
      const cc = paired.candidate[k] as Scored
      // First = candidate, second = baseline: the difference is candidate − baseline.
      if (cc.correct && cb.correct) table.both++
      else if (cc.correct) table.firstOnly++
      else if (cb.correct) table.secondOnly++
      else table.neither++
      if (cb.completionTokens !== null && cc.completionTokens !== null) {
        tokensB += cb.completionTokens
        tokensC += cc.completionTokens
        lengthPairs++
      }
    })
  }
  const n = table.both + table.firstOnly + table.secondOnly + table.neither
  const samples = { baseline: samplesB, candidate: samplesC, paired: n }
  const rows = datasetRows(baseline, candidate)
  if (rows !== null && n > rows) return clusteredAccuracyGap(o, baseline, candidate, launches, rows, samples)
  const rule = accuracyGapRule({ confidence: o.confidence, points: o.points, outputLengthPct: o.outputLengthPct })
  const warnings: string[] = []
  if (baseline.length !== candidate.length)
    warnings.push(unevenLaunchesWarning({ baseline: baseline.length, candidate: candidate.length, paired: launches }))
  if (launches > 1) warnings.push(pooledQuestionsWarning(launches))

  if (lengthPairs > 0 && tokensB > 0) {
    const gap = tokensC / tokensB - 1
    if (Math.abs(gap) * 100 >= o.outputLengthPct) {
      warnings.push(
        outputLengthWarning({
          gap,
          candidateMeanTokens: tokensC / lengthPairs,
          baselineMeanTokens: tokensB / lengthPairs,
          questions: lengthPairs,
          thresholdPct: o.outputLengthPct,
        }),
      )
    }
  }

  // Nothing scored is a misconfiguration, not a held accuracy: the gate fails and says why.
  if (n === 0) {
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
      warnings: [...warnings, NO_SCORED_PAIRS_WARNING],
    }
  }

  const result = pairedProportionDifference(table, o.confidence)
  const [estimate, low, high] = [result.estimate * 100, result.low * 100, result.high * 100]
  const significant = result.p < 1 - o.confidence && table.secondOnly > table.firstOnly
  const outcome: GateDecision['outcome'] = significant && high < -o.points ? 'fail' : low > -o.points ? 'pass' : 'inconclusive'
  if (outcome === 'inconclusive') {
    warnings.push(accuracyInconclusiveWarning({ confidence: o.confidence, low, high, points: o.points, p: result.p }))
  }
  return {
    gate: o.gate,
    outcome,
    kind: 'non-regression',
    metric: 'accuracy',
    effect: {
      estimate,
      low,
      high,
      unit: 'points',
      confidence: o.confidence,
      method: accuracyGapMethod({ questions: n, candidateOnly: table.firstOnly, baselineOnly: table.secondOnly, p: result.p }),
    },
    samples,
    rule,
    moreRequestsHint: null,
    warnings,
  }
}
