/**
 * Whether a run covered the suite, from what vitest ran against what the suite holds, and where
 * its evidence goes: partial evidence never silently replaces a complete run's. Pure; the
 * reporter gathers the facts.
 */
import type { EvidenceIndex } from '../schema/evidence.ts'
import type { RunScope } from './build.ts'

/** What the reporter saw of a run. */
export interface RunFacts {
  /** The spec files the suite's benchmark projects include, relative to the project root, `/`-separated. */
  suiteFiles: readonly string[]
  /** The spec files this run ran (or a merge read), alike. */
  ranFiles: readonly string[]
  /** The `-t` pattern, or null. */
  testNamePattern: string | null
  /** Whether a test or suite of the run was marked `.only`. */
  only: boolean
  /** Tests that did not run (skipped by a filter, `.only` or `.skip`). */
  skippedTests: number
  /** The run stopped before it ended (Ctrl-C, `--bail`, a cancelled run). */
  interrupted: boolean
}

/**
 * Why a run did not cover the suite (empty reasons: it did) and the files it left out.
 * @example
 * runScope({ suiteFiles: ['a.bench.ts', 'b.bench.ts'], ranFiles: ['a.bench.ts'], testNamePattern: null, only: false,
 *   skippedTests: 0, interrupted: false })
 * // { reasons: ['only 1 of 2 spec files ran'], filesNotRun: ['b.bench.ts'] }
 */
export function runScope(f: RunFacts): RunScope {
  const ran = new Set(f.ranFiles)
  const filesNotRun = [...new Set(f.suiteFiles)].filter((file) => !ran.has(file)).sort()
  const reasons: string[] = []
  if (filesNotRun.length > 0) {
    const total = new Set([...f.suiteFiles, ...f.ranFiles]).size
    reasons.push(`only ${total - filesNotRun.length} of ${total} spec files ran`)
  }
  if (f.testNamePattern !== null && f.skippedTests > 0) reasons.push(`tests filtered by name (-t ${JSON.stringify(f.testNamePattern)})`)
  if (f.only && f.skippedTests > 0) reasons.push('a test or suite marked .only')
  if (f.interrupted) reasons.push('the run was interrupted before it ended')
  return { reasons, filesNotRun }
}

/**
 * How a partial run treats complete evidence: `beside` writes it to `<evidenceDir>-partial`
 * when `evidenceDir` holds a complete run's evidence, `replace` writes over it.
 */
export type PartialEvidence = 'beside' | 'replace'

/** The directory beside `dir` that a partial run writes to when `dir` holds complete evidence. */
export function partialDirOf(dir: string): string {
  return `${dir.replace(/[/\\]+$/, '')}-partial`
}

/**
 * Where a run writes its evidence: `dir`, unless the run is partial, `dir` holds a complete
 * run's evidence (`existing`, null when there is none or it cannot be read) and `policy` is
 * `beside`; then `partialDirOf(dir)`.
 */
export function evidenceTarget(
  dir: string,
  scope: RunScope,
  existing: Pick<EvidenceIndex, 'partial'> | null,
  policy: PartialEvidence,
): { dir: string; keptComplete: boolean } {
  const keep = scope.reasons.length > 0 && existing !== null && existing.partial === null && policy === 'beside'
  return keep ? { dir: partialDirOf(dir), keptComplete: true } : { dir, keptComplete: false }
}
