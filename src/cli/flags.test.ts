import { describe, expect, test } from 'vitest'
import { numberFlag } from './cell-flags.ts'
import { intFlag, parseFlags, rangeText } from './flags.ts'

const OPTIONS = { requests: { type: 'string' }, temperature: { type: 'string' }, json: { type: 'boolean' } } as const

describe('parseFlags', () => {
  test.for([['-1'], ['-0.5'], ['-1e3'], ['-Infinity']])('--requests %s is the flag’s value, not a flag', ([value]) => {
    expect(parseFlags('run', ['--requests', value as string, '--json'], OPTIONS).values).toEqual({ requests: value, json: true })
  })

  test('a negative number after a flag that takes no value, or after --, is left to parseArgs', () => {
    expect(() => parseFlags('run', ['--json', '-1'], OPTIONS)).toThrow('unknown flag -1; see servegate run --help')
    expect(parseFlags('run', ['--json', '--', '--requests', '-1'], OPTIONS, true).positionals).toEqual(['--requests', '-1'])
  })

  test.for<[string[], string]>([
    [['--requets', '4'], 'unknown flag --requets; did you mean --requests? see servegate run --help'],
    [['--temprature=1'], 'unknown flag --temprature; did you mean --temperature? see servegate run --help'],
    [['--JSON'], 'unknown flag --JSON; did you mean --json? see servegate run --help'],
    [['--concurrency', '4'], 'unknown flag --concurrency; see servegate run --help'],
    [['-x'], 'unknown flag -x; see servegate run --help'],
  ])('%j: an unknown flag gets the one it most likely meant, when one is close', ([argv, message]) => {
    expect(() => parseFlags('run', argv as string[], OPTIONS)).toThrow(message)
  })

  test('a flag followed by another flag still needs a value', () => {
    expect(() => parseFlags('run', ['--requests', '--json'], OPTIONS)).toThrow(/^--requests needs a value/)
    expect(() => parseFlags('run', ['--requests', '-x'], OPTIONS)).toThrow(/^--requests needs a value/)
  })
})

describe('bounds print as people write them', () => {
  test.for<[string, () => unknown]>([
    ['--requests: "-1" is not valid; pass an integer from 1 to 1000000', () => intFlag('--requests', '-1', 1, 1_000_000)],
    ['--seed: "-1" is not valid; pass an integer ≥ 0', () => intFlag('--seed', '-1', 0)],
    ['--seed: " " is not valid; pass an integer ≥ 0', () => intFlag('--seed', ' ', 0)],
    ['--temperature: "-1" is not valid; pass a number from 0 to 2', () => numberFlag('--temperature', '-1', 0, 2)],
    ['--top-p: "7" is not valid; pass a number > 0 and ≤ 1', () => numberFlag('--top-p', '7', { above: 0 }, 1)],
    ['--rate: "0" is not valid; pass a number > 0 and ≤ 100000', () => numberFlag('--rate', '0', { above: 0 }, 100_000)],
  ])('%s', ([message, call]) => {
    expect(call).toThrow(message)
  })

  test('an exclusive bound is exclusive, an inclusive one inclusive; no bound prints the smallest double', () => {
    expect(numberFlag('--top-p', '1', { above: 0 }, 1)).toBe(1)
    expect(numberFlag('--top-p', '1e-300', { above: 0 }, 1)).toBe(1e-300)
    expect(numberFlag('--temperature', '0', 0, 2)).toBe(0)
    expect(rangeText({ above: 0 }, Number.MAX_SAFE_INTEGER)).toBe('> 0')
    expect(rangeText(1, Number.POSITIVE_INFINITY)).toBe('≥ 1')
    for (const min of [0, 1, { above: 0 }, { above: 0.5 }]) expect(rangeText(min, 10)).not.toMatch(/e-|\d{8}/)
  })
})
