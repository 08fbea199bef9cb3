import { describe, expect, test } from 'vitest'
import { BENCH_WORKER_NODE_FLAGS, flagsNotSetIn, flagsThisNodeTakes, nodeTakesFlag, v8OptionsOf } from './node-flags.ts'

const LISTING = [
  'Options:',
  '  --max-semi-space-size (max size of a semi-space (in MBytes))',
  '        type: size_t  default: --max-semi-space-size=0',
  '  --wasm_tiering_budget (budget for dynamic tiering)',
  '        type: int  default: 13000000',
].join('\n')

describe('the worker flags this Node takes', () => {
  test("this Node takes every default flag, and Node's own options are known without V8's list", () => {
    const options = v8OptionsOf()
    expect(options).not.toBeNull()
    for (const flag of BENCH_WORKER_NODE_FLAGS) expect(nodeTakesFlag(flag, options as string), flag).toBe(true)
    expect(nodeTakesFlag('--enable-source-maps', '')).toBe(true)
    expect(nodeTakesFlag('--heap-growing-percentx=50', options as string)).toBe(false)
  })

  test('names are matched whole, with dashes or underscores, and a no- prefix is the same flag', () => {
    expect(nodeTakesFlag('--max-semi-space-size=2', LISTING)).toBe(true)
    expect(nodeTakesFlag('--wasm-tiering-budget=5', LISTING)).toBe(true)
    expect(nodeTakesFlag('--no-max-semi-space-size', LISTING)).toBe(true)
    expect(nodeTakesFlag('--max-semi-space', LISTING)).toBe(false)
    expect(nodeTakesFlag('--heap-growing-percent=50', LISTING)).toBe(false)
  })

  test('a default this Node lacks is left out; one the project chose is an error naming it; an unread list checks nothing', () => {
    const flags = ['--max-semi-space-size=2', '--heap-growing-percent=50']
    expect(flagsThisNodeTakes(flags, false, LISTING)).toEqual(['--max-semi-space-size=2'])
    expect(() => flagsThisNodeTakes(flags, true, LISTING)).toThrow(
      /servegate\(options\)\.workerNodeFlags: --heap-growing-percent=50 is not an option of this Node/,
    )
    expect(flagsThisNodeTakes(flags, true, null)).toEqual(flags)
  })
})

test('a flag the user set in execArgv or NODE_OPTIONS, with any value, is not added again', () => {
  const flags = ['--max-semi-space-size=2', '--wasm-tiering-budget=2000000000', '--heap-growing-percent=50']
  expect(flagsNotSetIn(flags, ['--heap-growing-percent=30'], '--max-semi-space-size=8  --enable-source-maps')).toEqual([
    '--wasm-tiering-budget=2000000000',
  ])
  expect(flagsNotSetIn(flags, [], '')).toEqual(flags)
  // A flag switched on or off is the same flag: the user's `--memory-reducer` stays.
  expect(flagsNotSetIn(['--no-memory-reducer', '--max-semi-space-size=2'], ['--memory-reducer'], '')).toEqual(['--max-semi-space-size=2'])
  expect(flagsNotSetIn(['--no-memory-reducer'], [], '--no-memory-reducer')).toEqual([])
})
