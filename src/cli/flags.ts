import { parseArgs, type ParseArgsConfig } from 'node:util'
import { ServegateError } from '../errors.ts'
import { closest } from '../runner/cell-options.ts'

type Options = NonNullable<ParseArgsConfig['options']>

/** `-1`, `-0.5`, `-1e3`: an argument that reads as a negative number is a value, never a flag. */
function isNegativeNumber(arg: string): boolean {
  return arg.length > 1 && arg.startsWith('-') && arg.trim() === arg && !Number.isNaN(Number(arg))
}

/**
 * `--flag -1` as `--flag=-1` where the flag takes a value: `parseArgs` would read `-1` as a short
 * option and say the flag needs a value, when the flag's own bound is what to say (`--requests`
 * must be ≥ 1). Nothing after `--` is touched.
 */
function joinNegativeValues(argv: readonly string[], options: Options): string[] {
  const joined: string[] = []
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i] as string
    if (arg === '--') return [...joined, ...argv.slice(i)]
    const next = argv[i + 1]
    const option = arg.startsWith('--') && !arg.includes('=') ? options[arg.slice(2)] : undefined
    if (option?.type === 'string' && next !== undefined && isNegativeNumber(next)) {
      joined.push(`${arg}=${next}`)
      i++
    } else {
      joined.push(arg)
    }
  }
  return joined
}

/**
 * `parseArgs` in strict mode with errors rewritten to one line that names the flag and the
 * fix (node's own messages are multi-sentence and mention positionals); a mistyped flag gets the
 * one it most likely meant, as a mistyped cell option does. A value that reads as a
 * negative number is taken as the flag's value (`--temperature -1`), so its bound can refuse it.
 */
export function parseFlags<O extends Options>(command: string, argv: string[], options: O, allowPositionals = false) {
  try {
    return parseArgs({ args: joinNegativeValues(argv, options), options, strict: true, allowPositionals })
  } catch (err) {
    const code = (err as { code?: string }).code
    const message = (err as Error).message
    const flag = /'(-[^']*)'/.exec(message)?.[1] ?? ''
    if (code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION') {
      const meant = flag.startsWith('--') ? closest(flag.slice(2), Object.keys(options)) : null
      const fix = meant === null ? '' : `did you mean --${meant}? `
      throw new ServegateError('CONFIG_INVALID', `unknown flag ${flag}; ${fix}see servegate ${command} --help`, { cause: err })
    }
    if (code === 'ERR_PARSE_ARGS_INVALID_OPTION_VALUE') {
      const name = flag.split(' ')[0] || 'a flag'
      throw new ServegateError(
        'CONFIG_INVALID',
        `${name} needs a value (write ${name}=VALUE when it starts with "-"); see servegate ${command} --help`,
        { cause: err },
      )
    }
    if (code === 'ERR_PARSE_ARGS_UNEXPECTED_POSITIONAL') {
      throw new ServegateError(
        'CONFIG_INVALID',
        `unexpected argument ${/'([^']*)'/.exec(message)?.[1] ?? ''}; see servegate ${command} --help`,
        { cause: err },
      )
    }
    throw new ServegateError('CONFIG_INVALID', `${message.split('. ')[0]}; see servegate ${command} --help`, { cause: err })
  }
}

/** A flag's lower bound: a number it may equal, or `{ above: n }`, a number it must exceed. */
export type LowerBound = number | { above: number }

/**
 * A flag's range as people write it: `≥ 1`, `> 0`, `from 0 to 2`, `> 0 and ≤ 1` (never the
 * smallest double standing in for "above 0").
 * @example rangeText({ above: 0 }, 1) // '> 0 and ≤ 1'
 */
export function rangeText(min: LowerBound, max: number): string {
  const bounded = max !== Number.MAX_SAFE_INTEGER && Number.isFinite(max)
  if (typeof min === 'number') return bounded ? `from ${min} to ${max}` : `≥ ${min}`
  return bounded ? `> ${min.above} and ≤ ${max}` : `> ${min.above}`
}

/** Whether `n` is within the range. */
export function inRange(n: number, min: LowerBound, max: number): boolean {
  return (typeof min === 'number' ? n >= min : n > min.above) && n <= max
}

/** Parses an integer flag value, or throws naming the flag and the accepted range. */
export function intFlag(flag: string, value: string | undefined, min: number, max = Number.MAX_SAFE_INTEGER): number | undefined {
  if (value === undefined) return undefined
  const n = Number(value)
  if (value.trim() === '' || !Number.isInteger(n) || !inRange(n, min, max)) {
    throw new ServegateError('CONFIG_INVALID', `${flag}: "${value}" is not valid; pass an integer ${rangeText(min, max)}`)
  }
  return n
}
