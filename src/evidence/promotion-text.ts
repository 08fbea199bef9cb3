import { policyText } from '../gates/inconclusive-policy.ts'
import { accuracyArmsText, decideText, samplesText } from '../gates/verdict.ts'
import { formatFixedPercent, formatInUnit } from '../number-format.ts'
import type { EvidenceIndex, GateEntry, PairCheck } from '../schema/evidence.ts'
import type { GateDecision } from '../schema/gate.ts'
import { expectedCountText, gateCounts, gateExpected } from './assertion-tone.ts'

/**
 * Why a promotable index is promotable, in words that count gate outcomes, not test results: a
 * gate that failed or was inconclusive while its test held (a non-win asserted with `.not`, a
 * latency hold that passes with a warning) is named as such, never as a passed gate.
 * @example promotableSummary(index)
 * // 'every required cell accepted and every gate's test held (gates: 2 pass, 1 fail, 0 inconclusive; the 1 that did not
 * // pass held as asserted: 1 expected non-win ✓)'
 */
export function promotableSummary(index: EvidenceIndex): string {
  const { pass, fail, inconclusive } = index.statistics.gates
  const notPassing = index.gates.filter((g) => g.decision.outcome !== 'pass' && g.testPassed)
  const byPolicy = notPassing.filter((g) => gateExpected(g) === null).length
  const how = [
    expectedCountText(gateCounts({ ...index, gates: notPassing }).expected),
    byPolicy === 0 ? '' : `${byPolicy} inconclusive that pass${byPolicy === 1 ? 'es' : ''} by policy with a warning`,
  ].filter((t) => t !== '')
  const held = notPassing.length === 0 ? '' : `; the ${notPassing.length} that did not pass held as asserted: ${how.join(', ')}`
  return `every required cell accepted and every gate's test held (gates: ${pass} pass, ${fail} fail, ${inconclusive} inconclusive${held})`
}

/**
 * A gate's figures for a promotion reason or a table: the outcome, the metric, the effect in its
 * unit with its interval and confidence, and the samples it rests on.
 * @example gateFigures(d) // 'fail: decodeTokPerS 0.960× [0.920×, 1.000×] at 95%, 128 paired (128/128)'
 */
function gateFigures(d: GateDecision): string {
  const e = d.effect
  const bounds = e.low === null && e.high === null ? '' : ` [${formatInUnit(e.low, e.unit)}, ${formatInUnit(e.high, e.unit)}]`
  const at = e.confidence === null || bounds === '' ? '' : ` at ${formatFixedPercent(e.confidence, 0)}`
  const estimate = e.estimate === null ? 'not estimable' : formatInUnit(e.estimate, e.unit)
  const arms = d.accuracy === undefined ? '' : `; ${accuracyArmsText(d.accuracy)}`
  return `${d.outcome}: ${d.metric} ${estimate}${bounds}${at}, ${samplesText(d.samples)}${arms}`
}

/**
 * Why a gate's test keeps the evidence from promotion, with its figures (and, for an inconclusive
 * one, the policy that made it fail).
 * @example gateReason(g)
 * // 'toWinDecode on c4 did not pass in "c4 > wins": fail: decodeTokPerS 0.960× [0.920×, 1.000×] at 95%, 128 paired (128/128)'
 */
export function gateReason(g: GateEntry): string {
  const decide = decideText(g.decision)
  const policy =
    g.decision.outcome === 'inconclusive' ? `; ${policyText(g.policy, g.decision.kind)}${decide === '' ? '' : `; ${decide}`}` : ''
  const not = g.isNot ? ' (asserted with .not)' : ''
  return `${g.decision.gate} on ${g.cell} did not pass in "${g.test}"${not}: ${gateFigures(g.decision)}${policy}`
}

/**
 * Why a check's test keeps the evidence from promotion, with what it found (the first three findings).
 * @example checkReason('c4', k)
 * // 'toBeMatchedPair on c4 did not pass in "c4 > is matched": GPU driver: baseline 550.54 ≠ 560.28 (1/2 launches as the baseline)'
 */
export function checkReason(cell: string, k: PairCheck): string {
  const shown = k.findings.slice(0, 3)
  const more = k.findings.length > shown.length ? `; and ${k.findings.length - shown.length} more` : ''
  const found =
    k.passed && k.isNot
      ? 'it held, but the test asserted it would not (.not)'
      : shown.length === 0
        ? 'no finding recorded'
        : shown.join('; ')
  return `${k.check} on ${cell} did not pass in "${k.test}": ${found}${more}`
}
