import { createRandom, mixSeed, normalVariate } from '../random.ts'
import type { ResolvedSimOptions } from './sim-options.ts'

/**
 * The speed multiplier of one launch of the simulated engine: exp(launchNoise · Z), Z standard
 * normal, drawn from `launchSeed` (at random when it is null); exactly 1 without launch noise.
 * The log of the multiplier has sd `launchNoise`, the figure `servegate calibrate` measures.
 * @example launchSpeed({ launchNoise: 0.04, launchSeed: 7 }) // the same multiplier on every call
 */
export function launchSpeed(options: Pick<ResolvedSimOptions, 'launchNoise' | 'launchSeed'>): number {
  if (options.launchNoise === 0) return 1
  const seed = options.launchSeed ?? Math.floor(Math.random() * 2 ** 32)
  // Mixed, so that seeds 0, 1, 2… (a calibration's launches) give unrelated draws.
  return Math.exp(options.launchNoise * normalVariate(createRandom(mixSeed(seed, 0x51a0))))
}

/** The options with this launch's speed applied to its prefill and decode speeds. */
export function atLaunchSpeed(options: ResolvedSimOptions, speed: number): ResolvedSimOptions {
  if (speed === 1) return options
  return { ...options, prefillTokPerS: options.prefillTokPerS * speed, decodeTokPerS: options.decodeTokPerS * speed }
}
