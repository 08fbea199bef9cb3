import { winMatcher } from './win-matcher.ts'

/**
 * A superiority claim on the service's throughput: the cell's aggregate output tokens per second
 * of wall clock (`metric: 'requestRateReqPerS'` for completed requests per second). Passes only
 * when the candidate's figure is proven beyond `margin` over the baseline's at the configured
 * confidence; one launch per arm carries the launch-noise floor, repeats are judged over launches.
 * @example expect(await p).toWinThroughput({ margin: 0.05 })
 */
export const toWinThroughput = winMatcher('toWinThroughput')
