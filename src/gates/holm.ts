import type { GateDecision } from '../schema/gate.ts'
import { holmAdjust as holmAdjustPValues } from '../stats/tests.ts'
import { holmRuleClause } from './rule-text.ts'
import { DEFAULT_CONFIDENCE } from './gate-options.ts'

/** A gate ready to be decided at any confidence: e.g. `(confidence) => winGate(pair, { ...options, confidence })`. */
export type HolmGate = (confidence: number) => GateDecision

/**
 * Holm's step-down adjustment across the gates of a run, so the chance that any of them makes a
 * false claim stays within 1 − familyConfidence.
 *
 * - Given p-values: the Holm-adjusted p-values, as R's `p.adjust(p, "holm")`.
 * - Given gates (functions of the confidence, since a decision's interval fixes its level): Holm
 *   run as its equivalent step-down on intervals. With r gates undecided, every one is decided at
 *   two-sided confidence 1 − (1 − familyConfidence)/r; those that are decisive (pass or fail)
 *   keep that decision and leave, and the rest are tried again at the next, looser level; when a
 *   round decides none, the rest stay inconclusive at that round's level. Returned in input order.
 * @example holmAdjust([0.01, 0.04, 0.03, 0.005]) // [0.03, 0.06, 0.06, 0.02]
 * @example holmAdjust([(c) => winGate(pair, { gate: 'toWinDecode', confidence: c }), …], 0.98)
 */
export function holmAdjust(pValues: readonly number[]): number[]
export function holmAdjust(gates: readonly HolmGate[], familyConfidence?: number): GateDecision[]
export function holmAdjust(
  input: readonly number[] | readonly HolmGate[],
  familyConfidence: number = DEFAULT_CONFIDENCE,
): number[] | GateDecision[] {
  if (input.length === 0) return []
  if (input.every((x) => typeof x === 'number')) return holmAdjustPValues(input as readonly number[])
  if (!input.every((x) => typeof x === 'function'))
    throw new TypeError('holmAdjust: pass p-values or gates (functions of the confidence), not a mix')
  if (!(familyConfidence > 0 && familyConfidence < 1))
    throw new TypeError(`holmAdjust: familyConfidence must be in (0, 1), got ${familyConfidence}`)
  const gates = input as readonly HolmGate[]
  const m = gates.length
  const out = new Array<GateDecision | undefined>(m)
  let open = gates.map((_, i) => i)
  let step = 1
  while (open.length > 0) {
    const r = open.length
    const confidence = 1 - (1 - familyConfidence) / r
    const decisions = open.map((i) => [i, (gates[i] as HolmGate)(confidence)] as const)
    const decisive = decisions.filter(([, d]) => d.outcome !== 'inconclusive')
    const last = decisive.length === 0
    for (const [i, d] of last ? decisions : decisive) {
      out[i] = {
        ...d,
        rule: d.rule + holmRuleClause({ gates: m, familyConfidence, decided: !last, step, open: r, confidence }),
      }
    }
    if (last) break
    const done = new Set(decisive.map(([i]) => i))
    open = open.filter((i) => !done.has(i))
    step++
  }
  return out as GateDecision[]
}
