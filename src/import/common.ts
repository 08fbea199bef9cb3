import type { WorkloadPlan } from '../schema/run.ts'

/** The per-request checks another harness did not record: absent, never invented. */
export const NO_REQUEST_CHECKS = {
  plannedPromptTokens: null,
  wireSha256: null,
  canary: null,
  outputAdherence: null,
  score: null,
  outputText: null,
  engineTimings: null,
  enginePrefillTokPerS: null,
  sendAttempts: 1,
  scheduledOffsetMs: null,
} as const

/** The workload of an imported record: what the source said, every unknown fact null. */
export function importedWorkload(promptTokens: number, seed: number | null, promptTokensEstimator: string): WorkloadPlan {
  return {
    kind: 'imported',
    promptTokens,
    seed,
    prefixCache: { mode: 'unknown', tokens: null },
    canaries: false,
    outputControl: { mode: 'none', knob: null },
    sampling: null,
    dataset: null,
    calibration: null,
    promptTokensEstimator,
    requestStreamSha256: null,
    wireStreamSha256: null,
    wireMatchesPlan: null,
    requestsPerSlotFloor: null,
    floorMet: null,
  }
}
