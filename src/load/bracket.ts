import { z } from 'zod'
import type { GateOutcome } from '../schema/gate.ts'
import type { CapacityStatus } from '../schema/capacity-record.ts'

/**
 * How a capacity search walks its axis: from `start`, doubling after each probe that meets the
 * SLO (or halving after one that does not) within [`min`, `max`], until a probe on each side
 * brackets the capacity; then bisecting the bracket (geometrically for rates, by integers for
 * concurrency) until it is narrow enough or the probes run out.
 * @example { axis: 'rate', start: 4, min: 0.5, max: 256, maxProbes: 8, resolution: 0.1 }
 */
export const BracketOptions = z
  .object({
    /** `rate`: open-loop requests/s; `concurrency`: closed-loop streams. @default 'rate' */
    axis: z.enum(['rate', 'concurrency']).default('rate'),
    /** The first value probed. */
    start: z.number().positive(),
    /** The lowest value probed. @default start / 16 (1 for concurrency) */
    min: z.number().positive().optional(),
    /** The highest value probed. @default start × 16 */
    max: z.number().positive().optional(),
    /** Probe cells at most, each recorded. @default 8 */
    maxProbes: z.int().min(1).max(64).default(8),
    /** Stop bisecting when high / low ≤ 1 + resolution (rate) or high − low ≤ 1 (concurrency). @default 0.1 */
    resolution: z.number().positive().max(10).default(0.1),
  })
  .refine((o) => o.axis === 'rate' || Number.isInteger(o.start), { message: 'a concurrency search starts at an integer', path: ['start'] })
export type BracketOptions = z.input<typeof BracketOptions>

/** Bracket options with the range filled in. */
export type ResolvedBracketOptions = Required<z.infer<typeof BracketOptions>>

/** Fills the range defaults; min ≤ start ≤ max is then required. */
export function resolveBracketOptions(input: BracketOptions): ResolvedBracketOptions | { error: string } {
  const parsed = BracketOptions.safeParse(input)
  if (!parsed.success) return { error: parsed.error.issues.map((i) => `${i.path.join('.') || 'options'}: ${i.message}`).join('; ') }
  const o = parsed.data
  const integer = o.axis === 'concurrency'
  const min = o.min ?? (integer ? 1 : o.start / 16)
  const max = o.max ?? o.start * 16
  if (!(min <= o.start && o.start <= max)) return { error: `start: ${o.start} must lie within [min ${min}, max ${max}]` }
  if (integer && !(Number.isInteger(min) && Number.isInteger(max))) return { error: 'min, max: a concurrency search needs integer bounds' }
  return { ...o, min, max }
}

/** What one probe said about the engine at a value: the SLO gate's outcome, or why it said nothing. */
export interface ProbeVerdict {
  outcome: GateOutcome
  /** Set when the probe tells nothing about the engine (the harness was the bottleneck, the cell failed). */
  invalid: { status: Extract<CapacityStatus, 'harness-limited' | 'cell-failed' | 'interrupted'>; reason: string } | null
}

export interface BracketResult<P> {
  /** Every probe in the order run. */
  probes: Array<{ value: number; verdict: ProbeVerdict; probe: P }>
  /** `low`: the highest value shown to meet the SLO; `high`: the lowest value not shown to (failed or inconclusive). */
  bracket: { low: number | null; high: number | null }
  status: CapacityStatus
}

function nextValue(o: ResolvedBracketOptions, low: number | null, high: number | null): number {
  const integer = o.axis === 'concurrency'
  if (high === null) return Math.min(o.max, 2 * (low as number))
  if (low === null) return Math.max(o.min, integer ? Math.floor(high / 2) : high / 2)
  return integer ? Math.floor((low + high) / 2) : Math.sqrt(low * high)
}

function resolved(o: ResolvedBracketOptions, low: number, high: number): boolean {
  return o.axis === 'concurrency' ? high - low <= 1 : high / low <= 1 + o.resolution
}

/**
 * The bracketing search. Only a probe that passes raises `low` (the capacity is the highest value
 * *shown* to meet the SLO); a failed or inconclusive one lowers `high`. It stops at the first
 * probe that says nothing about the engine (`harness-limited`, `cell-failed`), when the range
 * ends (`above-max`, `below-min`), when the bracket is narrow enough (`bracketed`), or when the
 * probes run out (`unresolved` with both ends, `unbracketed` with one), or when `signal` aborts
 * (`interrupted`).
 */
export async function bracketSearch<P>(
  o: ResolvedBracketOptions,
  probe: (value: number) => Promise<{ verdict: ProbeVerdict; probe: P }>,
  signal?: AbortSignal,
): Promise<BracketResult<P>> {
  const probes: BracketResult<P>['probes'] = []
  let low: number | null = null
  let high: number | null = null
  let value = o.start
  while (probes.length < o.maxProbes) {
    if (signal?.aborted === true) return { probes, bracket: { low, high }, status: 'interrupted' }
    const result = await probe(value)
    probes.push({ value, ...result })
    const { verdict } = result
    if (verdict.invalid !== null) return { probes, bracket: { low, high }, status: verdict.invalid.status }
    if (verdict.outcome === 'pass') low = value
    else high = value
    if (high === null && value >= o.max) return { probes, bracket: { low, high }, status: 'above-max' }
    if (low === null && value <= o.min) return { probes, bracket: { low, high }, status: 'below-min' }
    if (low !== null && high !== null && resolved(o, low, high)) return { probes, bracket: { low, high }, status: 'bracketed' }
    value = nextValue(o, low, high)
  }
  return { probes, bracket: { low, high }, status: low !== null && high !== null ? 'unresolved' : 'unbracketed' }
}
