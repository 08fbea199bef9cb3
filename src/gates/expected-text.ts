/**
 * The words for a `.not` assertion that held: the gate or check did not pass, as the test said it
 * would. One wording for every place a verdict is shown (the UI annotation, the terminal, the
 * board, the page, the PR comment, the CLI summary), neutral: it is what was expected, not a
 * regression and not a plain pass.
 */
import type { CheckName, GateName } from '../schema/gate.ts'

/** What each check's `.not` asserts, when it held. */
const EXPECTED_CHECK: Record<CheckName, string> = {
  toBeMatchedPair: 'expected mismatch ✓',
  toPassCanaries: 'expected canary failure ✓',
  toReachConcurrency: 'expected shortfall ✓',
}

/**
 * A held `.not` assertion in words: `expected non-win ✓` for a gate, the check's own word for a
 * check.
 * @example expectedText('toWinDecode') // 'expected non-win ✓'
 * @example expectedText('toBeMatchedPair') // 'expected mismatch ✓'
 */
export function expectedText(name: GateName | CheckName): string {
  return name in EXPECTED_CHECK ? EXPECTED_CHECK[name as CheckName] : 'expected non-win ✓'
}
