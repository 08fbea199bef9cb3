// The `servegate` entry: the spec API, the types a spec and its tests read, the errors, and the
// few library functions the docs teach (one cell without vitest, the simulated engine, run records,
// a stored baseline).
export { engine, type EngineHandle, type SimEngineConfig } from './declare/engine-handles.ts'
export {
  cell,
  pair,
  type CellResult,
  type CellSpec,
  type LadderStep,
  type Lazy,
  type PairResult,
  type PairSpec,
} from './declare/cell-declarations.ts'
export { sweep, type CellSweepSpec, type PairSweepSpec, type Sweep, type SweepResult } from './declare/sweep-declaration.ts'
export { capacity, type CapacitySpec } from './declare/capacity-declaration.ts'
export { calibrate, type CalibrateSpec } from './declare/calibrate-declaration.ts'
export type { Calibration } from './runner/calibration.ts'
export type { NoiseProfile } from './schema/noise.ts'
export type { StopEarly } from './runner/staged-pair.ts'
export type { EngineConfig, EngineKind, ModelRef } from './engines/config.ts'
export type { CellPlan, RunCellOptions } from './runner/cell-options.ts'
export type { WorkloadKind, WorkloadSpec } from './workload/workload-spec.ts'
export type { ArrivalSpec } from './load/arrival-spec.ts'
export type { Ladder } from './load/ladder.ts'
export type { SLO } from './schema/load.ts'
export type { CellMetrics, Distribution, ErrorInfo, RequestRecord, RunRecord } from './schema/run.ts'
export type { GateDecision, GateOutcome } from './schema/gate.ts'
export type { CapacitySearch } from './schema/capacity-record.ts'
export type { Manifest } from './schema/manifest.ts'
export type {
  HoldLatencyOptions,
  MeetSLOOptions,
  ReuseCacheOptions,
  StayWithinAccuracyGapOptions,
  SustainMoreThanOptions,
  WinDecodeOptions,
  WinPrefillOptions,
  WinThroughputOptions,
} from './matchers/index.ts'
export { ERROR_CODES, type ErrorCode, ServegateError } from './errors.ts'
export { runCell } from './runner/measure-cell.ts'
export { startSimServer, type SimServer } from './sim/server.ts'
export type { SimOptions } from './sim/sim-options.ts'
export { type ImportedFile, importRunFile, importRunFileRuns, readRunRecord, readRunRecords } from './record/record-io.ts'
export { storedBaseline, type StoredBaseline } from './record/stored-baseline.ts'
export { SERVEGATE_VERSION } from './version.ts'
