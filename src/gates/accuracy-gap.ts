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
import { AccuracyGapOptions, parseOptions } from './gate-options.ts'
import { atLeastStudentT, sampleSd } from './interval.ts'
import { bcaInterval, bootstrapMeanOf } from '../stats/bootstrap.ts'

/** Distinct questions of the arms' dataset (every launch asks the same ones), or null without a dataset. */
function datasetRows(baseline: readonly GateRecord[], candidate: readonly GateRecord[]): number | null {
  const rows = [...baseline, ...candidate].map((r) => r.plan?.workload?.dataset?.rows ?? null)
  return rows.every((r) => r !== null && r === rows[0]) ? (rows[0] as number) : null
}

/** Per question, the paired requests asked and how many each arm got right. */
interface QuestionTally {
  asked: Float64Array
  baseline: Float64Array
  candidate: Float64Array
}

/**
 * Questions asked more than once (a dataset cycled over more requests than it has rows): the
 * question is the unit. Each arm's accuracy on a question is its share right over that question's
 * paired requests; the effect is the mean of the per-question differences with a BCa bootstrap
 * interval over questions (at least Student's t), as accuracy shares (not points).
 */
function questionLevelInterval(
  tally: QuestionTally,
  confidence: number,
): { estimate: number; low: number; high: number; questions: number } {
  const differences: number[] = []
  tally.asked.forEach((asked, q) => {
    if (asked > 0) differences.push(((tally.candidate[q] as number) - (tally.baseline[q] as number)) / asked)
  })
  const questions = differences.length
  const estimate = differences.reduce((a, b) => a + b, 0) / Math.max(1, questions)
  // Every question moved alike (or one question): nothing to resample, the interval is the estimate.
  if (questions < 2 || differences.every((d) => d === differences[0])) return { estimate, low: estimate, high: estimate, questions }
  const bca = bcaInterval(bootstrapMeanOf(differences, { seed: 1, resamples: 2000 }), confidence, { expandForN: questions })
  return { ...atLeastStudentT(bca, sampleSd(differences), questions, confidence), questions }
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
  const rows = datasetRows(baseline, candidate)
  const tally: QuestionTally | null =
    rows === null ? null : { asked: new Float64Array(rows), baseline: new Float64Array(rows), candidate: new Float64Array(rows) }
  for (let i = 0; i < launches; i++) {
    const b = valuesByIndex(baseline[i] as GateRecord, scoredOf)
    const c = valuesByIndex(candidate[i] as GateRecord, scoredOf)
    samplesB += b.size
    samplesC += c.size
    const paired = pairByIndex(b, c)
    paired.indices.forEach((index, k) => {
      const cb = paired.baseline[k] as Scored
      const cc = paired.candidate[k] as Scored
      if (tally !== null && rows !== null) {
        const q = index % rows
        tally.asked[q] = (tally.asked[q] as number) + 1
        if (cb.correct) tally.baseline[q] = (tally.baseline[q] as number) + 1
        if (cc.correct) tally.candidate[q] = (tally.candidate[q] as number) + 1
      }
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
  const clustered = tally !== null && rows !== null && n > rows
  const rule = clustered
    ? accuracyGapClusterRule({ confidence: o.confidence, points: o.points })
    : accuracyGapRule({ confidence: o.confidence, points: o.points, outputLengthPct: o.outputLengthPct })
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

  let verdict: { estimate: number; low: number; high: number; outcome: GateDecision['outcome']; method: string; p: number | null }
  if (clustered) {
    const q = questionLevelInterval(tally, o.confidence)
    const [estimate, low, high] = [q.estimate * 100, q.low * 100, q.high * 100]
    warnings.unshift(repeatedQuestionsWarning({ questions: q.questions, requests: n }))
    const outcome = high < -o.points ? 'fail' : low > -o.points ? 'pass' : 'inconclusive'
    verdict = { estimate, low, high, outcome, method: accuracyGapClusterMethod({ questions: q.questions, requests: n }), p: null }
  } else {
    const result = pairedProportionDifference(table, o.confidence)
    const [estimate, low, high] = [result.estimate * 100, result.low * 100, result.high * 100]
    const significant = result.p < 1 - o.confidence && table.secondOnly > table.firstOnly
    const outcome = significant && high < -o.points ? 'fail' : low > -o.points ? 'pass' : 'inconclusive'
    const method = accuracyGapMethod({ questions: n, candidateOnly: table.firstOnly, baselineOnly: table.secondOnly, p: result.p })
    verdict = { estimate, low, high, outcome, method, p: result.p }
  }
  const { estimate, low, high, outcome, method } = verdict
  if (outcome === 'inconclusive') {
    warnings.push(accuracyInconclusiveWarning({ confidence: o.confidence, low, high, points: o.points, p: verdict.p }))
  }
  return {
    gate: o.gate,
    outcome,
    kind: 'non-regression',
    metric: 'accuracy',
    effect: { estimate, low, high, unit: 'points', confidence: o.confidence, method },
    samples,
    rule,
    moreRequestsHint: null,
    warnings,
  }
}
