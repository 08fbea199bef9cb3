import { describe, expect, test } from 'vitest'
import { evidenceTarget, partialDirOf, type RunFacts, runScope } from './run-scope.ts'

const whole: RunFacts = {
  suiteFiles: ['a.bench.ts', 'b.bench.ts'],
  ranFiles: ['a.bench.ts', 'b.bench.ts'],
  testNamePattern: null,
  only: false,
  skippedTests: 0,
  interrupted: false,
}

describe('runScope', () => {
  test('a run of every file, nothing filtered, is complete', () => {
    expect(runScope(whole)).toEqual({ reasons: [], filesNotRun: [] })
    // A -t that skipped nothing, and a .skip without a filter, leave it complete.
    expect(runScope({ ...whole, testNamePattern: 'wins' })).toEqual({ reasons: [], filesNotRun: [] })
    expect(runScope({ ...whole, skippedTests: 1 })).toEqual({ reasons: [], filesNotRun: [] })
  })

  test('a file list, -t, .only and an interruption are each named; files not run are listed', () => {
    expect(runScope({ ...whole, ranFiles: ['a.bench.ts'] })).toEqual({
      reasons: ['only 1 of 2 spec files ran'],
      filesNotRun: ['b.bench.ts'],
    })
    expect(runScope({ ...whole, testNamePattern: 'wins decode', skippedTests: 2 }).reasons).toEqual([
      'tests filtered by name (-t "wins decode")',
    ])
    expect(runScope({ ...whole, only: true, skippedTests: 3 }).reasons).toEqual(['a test or suite marked .only'])
    expect(runScope({ ...whole, interrupted: true }).reasons).toEqual(['the run was interrupted before it ended'])
  })
})

describe('evidenceTarget', () => {
  const partial = { reasons: ['only 1 of 2 spec files ran'], filesNotRun: ['b.bench.ts'] }
  const complete = { partial: null }

  test('a partial run keeps complete evidence and writes beside it, unless told to replace it', () => {
    expect(evidenceTarget('evidence', partial, complete, 'beside')).toEqual({ dir: 'evidence-partial', keptComplete: true })
    expect(evidenceTarget('out/evidence/', partial, complete, 'beside')).toEqual({ dir: 'out/evidence-partial', keptComplete: true })
    expect(evidenceTarget('evidence', partial, complete, 'replace')).toEqual({ dir: 'evidence', keptComplete: false })
  })

  test('over no evidence or partial evidence, and for a complete run, it writes where it was told', () => {
    expect(evidenceTarget('evidence', partial, null, 'beside')).toEqual({ dir: 'evidence', keptComplete: false })
    expect(evidenceTarget('evidence', partial, { partial: { ...partial, cellsNotRun: [] } }, 'beside').dir).toBe('evidence')
    expect(evidenceTarget('evidence', { reasons: [], filesNotRun: [] }, complete, 'beside').dir).toBe('evidence')
  })

  test('the partial directory sits beside the evidence directory', () => {
    expect(partialDirOf('evidence')).toBe('evidence-partial')
  })
})
