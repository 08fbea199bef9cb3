import { winMatcher } from './win-matcher.ts'

/**
 * A superiority claim on throughput (output tokens per service second): passes only when the
 * candidate's win (the typical paired per-prompt ratio) is proven beyond `margin` at the
 * configured confidence; an inconclusive result fails with how many more paired requests would
 * likely decide it.
 * @example expect(await p).toWinThroughput({ margin: 0.05 })
 */
export const toWinThroughput = winMatcher('toWinThroughput')
