import type { CapacitySearch } from '../schema/capacity-record.ts'
import { toBeMatchedPair } from './toBeMatchedPair.ts'
import { type HoldLatencyOptions, toHoldLatency } from './toHoldLatency.ts'
import { type MeetSLOOptions, toMeetSLO } from './toMeetSLO.ts'
import { toPassCanaries } from './toPassCanaries.ts'
import { toReachConcurrency } from './toReachConcurrency.ts'
import { type ReuseCacheOptions, toReuseCache } from './toReuseCache.ts'
import { type StayWithinAccuracyGapOptions, toStayWithinAccuracyGap } from './toStayWithinAccuracyGap.ts'
import { type SustainMoreThanOptions, toSustainMoreThan } from './toSustainMoreThan.ts'
import { toWinDecode } from './toWinDecode.ts'
import { toWinPrefill } from './toWinPrefill.ts'
import { toWinThroughput } from './toWinThroughput.ts'
import type { WinMatcherOptions } from './win-matcher.ts'

/** Options of `toWinDecode`: the margin, confidence, sequential looks, seed, launch noise. */
export type WinDecodeOptions = WinMatcherOptions
/** Options of `toWinPrefill`: the margin, confidence, sequential looks, seed, launch noise. */
export type WinPrefillOptions = WinMatcherOptions
/** Options of `toWinThroughput`: the margin, confidence, sequential looks, seed, launch noise. */
export type WinThroughputOptions = WinMatcherOptions

/** Every servegate matcher, for `expect.extend` (the plugin's setup file does it). */
export const matchers = {
  toBeMatchedPair,
  toWinDecode,
  toWinPrefill,
  toWinThroughput,
  toHoldLatency,
  toStayWithinAccuracyGap,
  toPassCanaries,
  toReachConcurrency,
  toMeetSLO,
  toSustainMoreThan,
  toReuseCache,
}

declare module 'vitest' {
  // Declaration merging needs vitest's exact type parameters (T is unused here).
  // eslint-disable-next-line @typescript-eslint/no-unused-vars
  interface Matchers<R extends void | Promise<void> = void | Promise<void>, T = unknown> {
    /** Both arms measured the same thing: request stream on the wire, model, GPU, driver, harness, host, sampling. */
    toBeMatchedPair(): R
    /** Every reply began with its own canary marker and held no other. */
    toPassCanaries(): R
    /** The engine's metrics show the requested concurrency actually running. */
    toReachConcurrency(): R
    /** The candidate's decode tok/s win over the baseline is proven beyond the margin. */
    toWinDecode(options?: WinDecodeOptions): R
    /** The candidate's effective prefill tok/s win is proven beyond the margin. */
    toWinPrefill(options?: WinPrefillOptions): R
    /** The candidate's output tokens per service second win is proven beyond the margin. */
    toWinThroughput(options?: WinThroughputOptions): R
    /** No confident regression of a latency percentile beyond the tolerance. */
    toHoldLatency(options: HoldLatencyOptions): R
    /** No confident accuracy drop on the same questions beyond `points`. */
    toStayWithinAccuracyGap(options?: StayWithinAccuracyGapOptions): R
    /**
     * At least `percentile`% of requests (default 90) are shown to meet every objective; a cell, a pair's
     * candidate, a sweep step or a capacity probe (`atRate`).
     */
    toMeetSLO(options: MeetSLOOptions): R
    /** This capacity search's bracket is above (1 + `by`) × the baseline search's: the candidate sustains more. */
    toSustainMoreThan(baseline: CapacitySearch, options?: SustainMoreThanOptions): R
    /**
     * The engine reported serving at least `atLeast` of the prompt tokens from its prefix cache (turns ≥ 2 of a
     * conversation by default); on a pair, both arms unless `arm` names one. Unreported fails.
     */
    toReuseCache(options: ReuseCacheOptions): R
  }
}

export type { HoldLatencyOptions, MeetSLOOptions, ReuseCacheOptions, StayWithinAccuracyGapOptions, SustainMoreThanOptions }
