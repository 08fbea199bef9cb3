export { accuracyGapGate } from './accuracy-gap.ts'
export { type CapacityInput, sustainGate } from './sustain-gate.ts'
export type { ArmInput, GatePair, GateRecord } from './arms.ts'
export { holdLatencyGate } from './hold-latency.ts'
export { type HolmGate, holmAdjust } from './holm.ts'
export {
  type AccuracyGapGateOptions,
  DEFAULT_CONFIDENCE,
  DEFAULT_LAUNCH_NOISE,
  DEFAULT_SEED,
  type HoldLatencyGateOptions,
  type LatencyMetric,
  type RateMetric,
  type ReuseCacheGateOptions,
  type SLOGateOptions,
  SUGGESTED_LOOKS,
  type SustainGateOptions,
  type WinGateName,
  type WinGateOptions,
} from './gate-options.ts'
export { sloGate, type SLORecord } from './slo.ts'
export { reuseCacheGate, type ReuseCacheInput } from './reuse-cache.ts'
export { requestsHint } from './decide-hints.ts'
export { winGate } from './win.ts'
export { bcaInterval, bootstrapPairedStatistic, bootstrapStatistic, percentileInterval } from '../stats/bootstrap.ts'
export { signedRankTest } from '../stats/signed-rank.ts'
export { groupSequentialBoundaries } from '../stats/sequential.ts'
export { wilsonInterval } from '../stats/wilson.ts'
export { mcnemarExact } from '../stats/mcnemar.ts'
export type { ArmPreemptions, GateDecision, GateOutcome, PreemptionFacts } from '../schema/gate.ts'
