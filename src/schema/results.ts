/**
 * What awaiting a declaration gives a test, and what the matchers judge: plain data made of run
 * records. The runner produces these; nothing here runs anything.
 */
import type { RunRecord } from './run.ts'

/** Where a cell stands on the ladder of a sweep: the evidence keeps the ladder together. */
export interface LadderStep {
  /** The sweep's id. */
  readonly sweep: string
  readonly axis: 'rate' | 'concurrency'
  readonly value: number
  /** 0-based rung, of `of`. */
  readonly index: number
  readonly of: number
}

/** A measured cell as tests read it: its run record (one per launch when repeated). */
export interface CellResult {
  readonly kind: 'cell'
  readonly id: string
  /** Set when the cell is a rung of a sweep. */
  readonly ladder?: LadderStep
  /** The first (or only) launch's record. */
  readonly record: RunRecord
  /** Every launch's record, in launch order. */
  readonly records: readonly RunRecord[]
}

/** A measured pair: both arms' records, launches interleaved A B B A when repeated. */
export interface PairResult {
  readonly kind: 'pair'
  readonly id: string
  /** Set when the pair is a rung of a sweep. */
  readonly ladder?: LadderStep
  readonly baseline: readonly RunRecord[]
  readonly candidate: readonly RunRecord[]
  /** The arms in the order they were launched, e.g. ['baseline', 'candidate', 'candidate', 'baseline']. */
  readonly launchOrder: ReadonlyArray<'baseline' | 'candidate'>
}

/** A measured sweep: every rung's result, in ladder order. */
export interface SweepResult<R extends CellResult | PairResult> {
  readonly kind: 'sweep'
  readonly id: string
  readonly axis: 'rate' | 'concurrency'
  readonly steps: ReadonlyArray<{ readonly id: string; readonly value: number; readonly result: R }>
}
