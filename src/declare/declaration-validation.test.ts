/**
 * Declarations check their options when they are declared: a typo or a bad value fails at once,
 * naming the field and the fix, and no engine is launched for it.
 */
import { existsSync, mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { fileURLToPath } from 'node:url'
import { describe, expect, test } from 'vitest'
import type { CellSpec } from './cell-declarations.ts'
import { capacity } from './capacity-declaration.ts'
import { cell, pair } from './cell-declarations.ts'
import { engine } from './engine-handles.ts'
import { declaredCell } from '../worker/cell-registry.ts'
import { sweep } from './sweep-declaration.ts'

const FAKES = fileURLToPath(new URL('../../fixtures/fakes/', import.meta.url))
const dir = mkdtempSync(join(tmpdir(), 'servegate-declare-'))
const pids = join(dir, 'pids.txt')
// Writes its pid to `pids` the moment it is launched.
const fake = engine.vllm({ executable: join(FAKES, 'vllm'), model: { id: 'fake/m' }, env: { FAKE_ENGINE_PIDFILE: pids }, logDir: dir })

/** The spec as a user might mistype it, past the type checker (a JavaScript spec, or a cast). */
const untyped = (spec: object): CellSpec => spec as CellSpec

describe('options are resolved when a cell is declared', () => {
  test('a mistyped option is refused at once, with the option it most likely meant; nothing launches', async () => {
    expect(() => cell(untyped({ engine: fake, id: 'typo', concurency: 4, requests: 8 }))).toThrow(
      /invalid cell "typo" options: cell "typo"\.concurency: not an option of a cell; did you mean `concurrency`\?/,
    )
    expect(declaredCell('typo')).toBeUndefined()
    await sleep(300)
    expect(existsSync(pids)).toBe(false)
  })

  test('a bad value names its field, on cells, pairs, sweeps and capacity searches', () => {
    expect(() => cell({ engine: fake, requests: 0 })).toThrow(/invalid cell options: cell\.requests: .*>=1/)
    expect(() => pair({ baseline: fake, candidate: fake, id: 'p', workload: { promptTokens: -5 } })).toThrow(
      /pair "p"\.workload\.promptTokens/,
    )
    expect(() => pair({ baseline: fake, candidate: fake, repeats: 0 })).toThrow(/pair\.repeats: an integer of at least 1/)
    expect(() => cell({ engine: fake, maxFailedShare: 5 })).toThrow(/cell\.maxFailedShare: a share from 0 to 1/)
    expect(() => cell(untyped({ engine: { name: 'vllm' }, requests: 4 }))).toThrow(/cell\.engine: an engine from engine\.vllm/)
    expect(() => sweep({ engine: fake, ladder: { concurrencies: [1, 2] }, maxTokens: 0 })).toThrow(/sweep.*maxTokens/)
    expect(() => capacity({ engine: fake, slo: { ttftMs: 100 }, bracket: { start: 4 }, percentile: 140 })).toThrow(
      /percentile: 140 must lie in \(0, 100\)/,
    )
    expect(() => capacity({ engine: fake, slo: { ttftMs: 100 }, bracket: { start: 4 }, requests: -1 })).toThrow(/capacity cell\.requests/)
  })

  test('defaults are filled once, at the declaration: the id is built from the resolved plan', () => {
    cell({ engine: fake, concurrency: 3 })
    expect(declaredCell('vllm:fake/m-synthetic-summary-ctx256-c3')).toMatchObject({ kind: 'cell', required: true, status: 'pending' })
  })
})
