import type { EvidenceIndex } from '../schema/evidence.ts'

/**
 * Why a promotable index is promotable, in words that count gate outcomes, not test results: a
 * gate that failed or was inconclusive while its test held (a non-win asserted with `.not`, a
 * latency hold that passes with a warning) is named as such, never as a passed gate.
 * @example promotableSummary(index) // 'every required cell accepted and every gate's test held (gates: 2 pass, 1 fail, …)'
 */
export function promotableSummary(index: EvidenceIndex): string {
  const { pass, fail, inconclusive } = index.statistics.gates
  const notPassing = index.gates.filter((g) => g.decision.outcome !== 'pass' && g.testPassed).length
  const held =
    notPassing === 0
      ? ''
      : `; the ${notPassing} that did not pass held as asserted: non-wins expected with .not, or holds that pass with a warning`
  return `every required cell accepted and every gate's test held (gates: ${pass} pass, ${fail} fail, ${inconclusive} inconclusive${held})`
}
