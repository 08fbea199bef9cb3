import { parseArgs, type ParseArgsConfig } from 'node:util'
import { ServegateError } from '../errors.ts'

type Options = NonNullable<ParseArgsConfig['options']>

/**
 * `parseArgs` in strict mode with errors rewritten to one line that names the flag and the
 * fix (node's own messages are multi-sentence and mention positionals).
 */
export function parseFlags<O extends Options>(command: string, argv: string[], options: O, allowPositionals = false) {
  try {
    return parseArgs({ args: argv, options, strict: true, allowPositionals })
  } catch (err) {
    const code = (err as { code?: string }).code
    const message = (err as Error).message
    const flag = /'(-[^']*)'/.exec(message)?.[1] ?? ''
    if (code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION') {
      throw new ServegateError('CONFIG_INVALID', `unknown flag ${flag}; see servegate ${command} --help`, { cause: err })
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

/** Parses an integer flag value, or throws naming the flag and the accepted range. */
export function intFlag(flag: string, value: string | undefined, min: number, max = Number.MAX_SAFE_INTEGER): number | undefined {
  if (value === undefined) return undefined
  const n = Number(value)
  if (!Number.isInteger(n) || n < min || n > max) {
    const range = max === Number.MAX_SAFE_INTEGER ? `an integer ≥ ${min}` : `an integer from ${min} to ${max}`
    throw new ServegateError('CONFIG_INVALID', `${flag}: "${value}" is not valid; pass ${range}`)
  }
  return n
}
