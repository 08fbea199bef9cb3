/**
 * What crosses from a vitest worker to the reporter, in task meta (JSON-safe, kept by blob
 * reports, so sharded runs merge into the same evidence): each spec file's declared cells with
 * their run records, and each test's gate decisions and checks with the cell they read.
 */
import type { GateDecision } from '../schema/gate.ts'
import type { RunRecord } from '../schema/run.ts'

/** A cell or pair declared in a spec file, as the file's meta carries it after the file ran. */
export interface DeclaredCell {
  id: string
  kind: 'cell' | 'pair'
  required: boolean
  /** A sweep this cell belongs to, or null. */
  ladder: string | null
  /** Engine name per arm (`cell`, or `baseline` and `candidate`). */
  engines: Record<string, string>
  /** `pending`: never run; `measured`: records below; `threw`: its measurement threw (see `error`). */
  status: 'pending' | 'measured' | 'threw'
  error: string | null
  /** Run records per arm, one per launch. */
  records: { cell?: RunRecord[]; baseline?: RunRecord[]; candidate?: RunRecord[] }
}

/** The servegate part of a spec file's meta. */
export interface FileMeta {
  cells: DeclaredCell[]
}

/** A yes/no check a matcher made on a cell. */
export interface CheckMeta {
  cell: string
  check: string
  passed: boolean
  findings: string[]
}

/** The servegate part of a test's meta. */
export interface TestMeta {
  decisions: Array<{ cell: string; decision: GateDecision }>
  checks: CheckMeta[]
}

declare module 'vitest' {
  interface TaskMeta {
    /** On a test: its gate decisions and checks. */
    servegate?: TestMeta
    /** On a spec file: its declared cells and their records. */
    servegateFile?: FileMeta
  }
}
