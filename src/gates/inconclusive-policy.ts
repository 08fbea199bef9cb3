import type { GateDecision, GateOutcome } from '../schema/gate.ts'
import { DEFAULT_INCONCLUSIVE, type DecidingPolicy, type InconclusivePolicy } from '../schema/task-meta.ts'

/**
 * The policy a gate matcher applies: the gate's own `inconclusive` option, else the plugin's
 * `servegate({ inconclusive })`, else the default of the decision's kind.
 * @example resolveInconclusive('superiority', undefined, 'pass') // { inconclusive: 'pass', from: 'plugin' }
 */
export function resolveInconclusive(
  kind: GateDecision['kind'],
  gate: InconclusivePolicy | undefined,
  plugin: InconclusivePolicy | undefined,
): DecidingPolicy {
  if (gate !== undefined) return { inconclusive: gate, from: 'gate' }
  if (plugin !== undefined) return { inconclusive: plugin, from: 'plugin' }
  return { inconclusive: DEFAULT_INCONCLUSIVE[kind], from: 'default' }
}

/** The matcher's result before `.not`: a pass passes, a fail fails, an inconclusive outcome does what its policy says. */
export function passesUnder(outcome: GateOutcome, policy: Pick<DecidingPolicy, 'inconclusive'>): boolean {
  return outcome === 'pass' || (outcome === 'inconclusive' && policy.inconclusive === 'pass')
}

/**
 * The policy in words, for the matcher message, the annotation and the evidence: what an
 * inconclusive outcome does and who said so.
 * @example policyText({ inconclusive: 'fail', from: 'default' }, 'superiority')
 * // "inconclusive fails: the default for a superiority claim (set inconclusive: 'pass' on the gate or in servegate({ … }) to change it)"
 */
export function policyText(policy: DecidingPolicy, kind: GateDecision['kind']): string {
  const does = `inconclusive ${policy.inconclusive === 'pass' ? 'passes' : 'fails'}`
  const other = policy.inconclusive === 'pass' ? 'fail' : 'pass'
  if (policy.from === 'gate') return `${does}: this gate's option inconclusive: '${policy.inconclusive}'`
  if (policy.from === 'plugin') return `${does}: the plugin option servegate({ inconclusive: '${policy.inconclusive}' })`
  return `${does}: the default for a ${kind} claim (set inconclusive: '${other}' on the gate or in servegate({ … }) to change it)`
}
