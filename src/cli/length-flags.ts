import { ServegateError } from '../errors.ts'
import type { Length, LengthDistribution } from '../schema/lengths.ts'
import { lengthProblems, MAX_LENGTH_TOKENS } from '../workload/lengths.ts'
import { intFlag } from './flags.ts'

const FORMS = 'N, uniform:MIN,MAX, normal:MEAN,SD, lognormal:MEDIAN,SIGMA or histogram:PATH'

/**
 * A size flag (`--prompt-tokens`, `--max-tokens`): one number of tokens, or a distribution each
 * request draws its own from: `uniform:100,200`, `normal:512,64`, `lognormal:512,0.5`,
 * `histogram:PATH` (a CSV of `tokens,weight` rows, read now). Checked as the option is.
 * @throws ServegateError CONFIG_INVALID naming the flag and the fix
 * @example lengthFlag('--max-tokens', 'uniform:64,256', 1) // { uniform: [64, 256] }
 */
export function lengthFlag(flag: string, value: string | undefined, floor: number): Length | undefined {
  if (value === undefined) return undefined
  const colon = value.indexOf(':')
  if (colon < 0) return intFlag(flag, value, floor, MAX_LENGTH_TOKENS)
  const kind = value.slice(0, colon)
  const rest = value.slice(colon + 1)
  const bad = (why: string): ServegateError => new ServegateError('CONFIG_INVALID', `${flag}: "${value}" ${why}`)
  let distribution: LengthDistribution
  if (kind === 'histogram') {
    if (rest === '') throw bad('names no file; pass histogram:PATH (a CSV of tokens,weight rows)')
    distribution = { histogram: rest }
  } else {
    const parts = rest.split(',').map((p) => p.trim())
    const numbers = parts.map(Number)
    if (parts.length !== 2 || parts.some((p) => p === '') || !numbers.every(Number.isFinite)) {
      throw bad(`is not valid; pass ${FORMS}`)
    }
    const [a, b] = numbers as [number, number]
    if (kind === 'uniform') {
      if (!Number.isInteger(a) || !Number.isInteger(b)) throw bad('is not valid; pass uniform:MIN,MAX with whole numbers of tokens')
      distribution = { uniform: [a, b] }
    } else if (kind === 'normal') distribution = { normal: { mean: a, sd: b } }
    else if (kind === 'lognormal') distribution = { lognormal: { median: a, sigma: b } }
    else throw bad(`is not valid; pass ${FORMS}`)
  }
  const problems = lengthProblems(distribution, floor)
  if (problems.length > 0) throw bad(`is not valid: ${problems.map((p) => p.message).join('; ')}`)
  return distribution
}
