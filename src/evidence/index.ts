// The `servegate/reporter` entry: the evidence reporter for a vitest config that wires reporters
// itself, and the evidence directory read, verified and rendered as the CLI does.
export { ServegateReporter, type ServegateReporterOptions } from './reporter.ts'
export { readEvidence, readIndex, verifyEvidence } from './verify.ts'
export { writeEvidence, type Renderers } from './write.ts'
export { renderBoard } from './board.ts'
export type { BuiltEvidence } from './build.ts'
export { EVIDENCE_SCHEMA_ID, type EvidenceCell, EvidenceIndex, type GateEntry, type PairCheck } from '../schema/evidence.ts'
