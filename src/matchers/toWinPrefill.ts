import type { MatcherState } from 'vitest'
import { type WinGateOptions, winGate } from '../gates/index.ts'
import { gateResult } from './decision.ts'
import { asPair } from './subject.ts'

/** Options of `toWinPrefill`: the margin, confidence, sequential looks, seed, launch noise. */
export type WinPrefillOptions = Omit<WinGateOptions, 'gate' | 'metric'>

/**
 * A superiority claim on prefill: passes only when the candidate's win (geometric mean of the
 * paired per-prompt ratios) is proven beyond `margin` at the configured confidence; an
 * inconclusive result fails with how many more paired requests would likely decide it.
 */
export function toWinPrefill(this: MatcherState, received: unknown, options: WinPrefillOptions = {}) {
  const p = asPair('toWinPrefill', received)
  if (options === null || typeof options !== 'object') throw new TypeError('toWinPrefill: options must be an object, e.g. { margin: 0.05 }')
  return gateResult(
    this,
    'toWinPrefill',
    p,
    () => winGate({ baseline: p.baseline, candidate: p.candidate }, { ...options, gate: 'toWinPrefill' }),
    ['pass'],
  )
}
