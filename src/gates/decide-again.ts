import type { GateDecision, GateName } from '../schema/gate.ts'
import type { RunRecord } from '../schema/run.ts'
import { accuracyGapGate } from './accuracy-gap.ts'
import type {
  AccuracyGapGateOptions,
  HoldLatencyGateOptions,
  ReuseCacheGateOptions,
  SLOGateOptions,
  SustainGateOptions,
  WinGateOptions,
} from './gate-options.ts'
import { holdLatencyGate } from './hold-latency.ts'
import { reuseCacheGate } from './reuse-cache.ts'
import { sloGate } from './slo.ts'
import { type CapacityInput, sustainGate } from './sustain-gate.ts'
import { winGate } from './win.ts'

/** What a gate read, resolved: a pair's two arms, one cell's launches, or two capacity searches. */
export type GateInput =
  | { kind: 'pair'; baseline: readonly RunRecord[]; candidate: readonly RunRecord[] }
  | { kind: 'cell'; records: readonly RunRecord[] }
  | { kind: 'capacity'; candidate: CapacityInput; baseline: CapacityInput }

/** The input a gate needs, or a TypeError naming the gate and what it was given. */
function expect<K extends GateInput['kind']>(gate: GateName, input: GateInput, kind: K): Extract<GateInput, { kind: K }> {
  if (input.kind !== kind) throw new TypeError(`${gate}: judges ${kind === 'pair' ? 'a pair' : `a ${kind}`}, but was given a ${input.kind}`)
  return input as Extract<GateInput, { kind: K }>
}

/**
 * Runs the pure gate function behind a gate matcher on what it judged, with the options it
 * decided with: the one place that says which function decides which gate, so `servegate verify`
 * decides each gate of an evidence directory again as its matcher did. The options are parsed
 * by the gate function (a wrong one is a TypeError naming the gate).
 * @example decideAgain('toWinDecode', { kind: 'pair', baseline: [b], candidate: [c] }, { gate: 'toWinDecode', margin: 0.05 })
 */
export function decideAgain(gate: GateName, input: GateInput, options: Record<string, unknown>): GateDecision {
  switch (gate) {
    case 'toWinDecode':
    case 'toWinPrefill':
    case 'toWinThroughput': {
      const pair = expect(gate, input, 'pair')
      return winGate({ baseline: pair.baseline, candidate: pair.candidate }, options as WinGateOptions)
    }
    case 'toHoldLatency': {
      const pair = expect(gate, input, 'pair')
      return holdLatencyGate({ baseline: pair.baseline, candidate: pair.candidate }, options as HoldLatencyGateOptions)
    }
    case 'toStayWithinAccuracyGap': {
      const pair = expect(gate, input, 'pair')
      return accuracyGapGate({ baseline: pair.baseline, candidate: pair.candidate }, options as AccuracyGapGateOptions)
    }
    case 'toMeetSLO':
    case 'capacity probe':
      return sloGate(expect(gate, input, 'cell').records, options as SLOGateOptions)
    case 'toSustainMoreThan': {
      const searches = expect(gate, input, 'capacity')
      return sustainGate(searches.candidate, searches.baseline, options as SustainGateOptions)
    }
    case 'toReuseCache': {
      if (input.kind === 'capacity') throw new TypeError('toReuseCache: judges a cell or a pair, but was given a capacity')
      const arms = input.kind === 'cell' ? { cell: input.records } : { baseline: input.baseline, candidate: input.candidate }
      return reuseCacheGate(arms, options as ReuseCacheGateOptions)
    }
  }
}
