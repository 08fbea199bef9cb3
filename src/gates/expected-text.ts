/**
 * The words for a `.not` assertion that held: the gate or check did not pass, as the test said it
 * would. One wording for every place a verdict is shown (the UI annotation, the terminal, the
 * board, the page, the PR comment, the CLI summary), neutral: it is what was expected, not a
 * regression and not a plain pass.
 */
import type { CheckName, GateName } from '../schema/gate.ts'

/** What a `.not` on each gate or check asserted, once it held. */
const EXPECTED_WORDS: Readonly<Record<GateName | CheckName, string>> = {
  toWinDecode: 'expected non-win',
  toWinPrefill: 'expected non-win',
  toWinThroughput: 'expected non-win',
  toSustainMoreThan: 'expected non-win',
  toHoldLatency: 'expected latency not held',
  toStayWithinAccuracyGap: 'expected accuracy gap',
  toMeetSLO: 'expected SLO miss',
  'capacity probe': 'expected SLO miss',
  toReuseCache: 'expected no cache reuse',
  toBeMatchedPair: 'expected mismatch',
  toPassCanaries: 'expected canary failure',
  toReachConcurrency: 'expected concurrency not reached',
}

/**
 * A held `.not` assertion in words, with a plain tick (not the green ✅ of a pass).
 * @example expectedText('toWinDecode') // 'expected non-win ✓'
 * @example expectedText('toBeMatchedPair') // 'expected mismatch ✓'
 */
export function expectedText(name: GateName | CheckName): string {
  return `${EXPECTED_WORDS[name]} ✓`
}
