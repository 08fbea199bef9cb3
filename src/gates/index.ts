export { accuracyGapGate } from './accuracy-gap.ts'
export type { ArmInput, GatePair, GateRecord } from './arms.ts'
export { holdLatencyGate } from './hold-latency.ts'
export { type HolmGate, holmAdjust } from './holm.ts'
export {
  type AccuracyGapOptions, DEFAULT_CONFIDENCE, DEFAULT_LAUNCH_NOISE, DEFAULT_SEED, type HoldLatencyOptions, type LatencyMetric,
  type RateMetric, SUGGESTED_LOOKS, type WinGateName, type WinGateOptions,
} from './options.ts'
export { requestsHint, winGate } from './win.ts'
