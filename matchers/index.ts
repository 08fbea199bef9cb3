import { toBeMatchedPair } from './toBeMatchedPair.ts'
import { toPassCanaries } from './toPassCanaries.ts'
import { toReachConcurrency } from './toReachConcurrency.ts'

/** Every servegate matcher, for `expect.extend` (the plugin's setup file does it). */
export const matchers = { toBeMatchedPair, toPassCanaries, toReachConcurrency }

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
  }
}
