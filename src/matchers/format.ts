import type { MatcherState } from 'vitest'

/**
 * The fixed message shape of servegate matchers: the matcher hint, a blank line,
 * labelled expected values, then received values (with samples and intervals).
 */
export function message(
  state: MatcherState,
  matcher: string,
  expected: Array<[string, string]>,
  received: Array<[string, string]>,
  detail: string[] = [],
): string {
  const hint = state.utils.matcherHint(`.${matcher}`, 'result', '', { isNot: state.isNot })
  const width = Math.max(...[...expected, ...received].map(([label]) => label.length)) + 2
  const line = ([label, value]: [string, string]) => `${`${label}:`.padEnd(width)}${value}`
  return [hint, '', ...expected.map(line), ...received.map(line), ...(detail.length > 0 ? ['', ...detail] : [])].join('\n')
}
