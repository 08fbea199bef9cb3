import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { cellFromFlags } from './cell-flags.ts'
import { lengthFlag } from './length-flags.ts'

let dir = ''
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'servegate-length-flags-'))
})
afterAll(async () => {
  await rm(dir, { recursive: true, force: true })
})

describe('--prompt-tokens and --max-tokens take a size or a distribution', () => {
  test.each([
    ['256', 256],
    ['uniform:100,200', { uniform: [100, 200] }],
    ['normal:512,64', { normal: { mean: 512, sd: 64 } }],
    ['lognormal:512,0.5', { lognormal: { median: 512, sigma: 0.5 } }],
  ])('%s', (value, expected) => {
    expect(cellFromFlags({ 'prompt-tokens': value, 'max-tokens': value }).workload?.promptTokens).toEqual(expected)
    expect(cellFromFlags({ 'max-tokens': value }).maxTokens).toEqual(expected)
  })

  test('histogram:PATH reads the file now', async () => {
    const path = join(dir, 'sizes.csv')
    await writeFile(path, 'tokens,weight\n64,1\n128,2\n')
    expect(lengthFlag('--max-tokens', `histogram:${path}`, 1)).toEqual({ histogram: path })
    expect(() => lengthFlag('--prompt-tokens', `histogram:${join(dir, 'none.csv')}`, 8)).toThrow(
      `--prompt-tokens: "histogram:${join(dir, 'none.csv')}" is not valid: ${join(dir, 'none.csv')} cannot be read (ENOENT)`,
    )
  })

  test.each([
    ['--max-tokens', 'uniform:200,100', '--max-tokens: "uniform:200,100" is not valid: min 200 > max 100; pass [min, max] with min ≤ max'],
    ['--max-tokens', 'normal:64,-2', '--max-tokens: "normal:64,-2" is not valid: sd -2 is negative; pass sd ≥ 0'],
    ['--prompt-tokens', 'lognormal:512,-1', '--prompt-tokens: "lognormal:512,-1" is not valid: sigma -1 is negative; pass sigma ≥ 0'],
    ['--prompt-tokens', 'uniform:4,20', '--prompt-tokens: "uniform:4,20" is not valid: min 4 is not from 8 to 10000000'],
    ['--max-tokens', 'uniform:1.5,3', '--max-tokens: "uniform:1.5,3" is not valid; pass uniform:MIN,MAX with whole numbers of tokens'],
    ['--max-tokens', 'poisson:4,5', '--max-tokens: "poisson:4,5" is not valid; pass N, uniform:MIN,MAX, normal:MEAN,SD'],
    ['--max-tokens', 'normal:64', '--max-tokens: "normal:64" is not valid; pass N, uniform:MIN,MAX'],
    ['--max-tokens', 'histogram:', '--max-tokens: "histogram:" names no file; pass histogram:PATH'],
    ['--max-tokens', '0', '--max-tokens: "0" is not valid; pass an integer from 1 to 10000000'],
  ])('%s %s is refused, naming the flag and the fix', (flag, value, message) => {
    expect(() => lengthFlag(flag, value, flag === '--max-tokens' ? 1 : 8)).toThrow(message)
  })
})
