import type { GateDecision } from '../schema/gate.ts'
import { pairedProportionDifference, type PairedTable } from '../stats/tests.ts'
import { type GatePair, type GateRecord, launchesOf, type OkRequest, pairByIndex, valuesByIndex } from './arms.ts'
import { accuracyGapMethod, notEstimableMethod } from './method-text.ts'
import { accuracyGapRule } from './rule-text.ts'
import {
  accuracyInconclusiveWarning,
  NO_SCORED_PAIRS_WARNING,
  outputLengthWarning,
  pooledQuestionsWarning,
  unevenLaunchesWarning,
} from './warning-text.ts'
import { AccuracyGapOptions, parseOptions } from './gate-options.ts'

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
