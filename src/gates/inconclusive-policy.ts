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
  const verb = (p: InconclusivePolicy) => (p === 'pass' ? 'passes' : 'fails')
  const does = `inconclusive ${verb(policy.inconclusive)}`
  const other = policy.inconclusive === 'pass' ? 'fail' : 'pass'
  if (policy.from === 'default')
    return `${does}: the default for a ${kind} claim (set inconclusive: '${other}' on the gate or in servegate({ … }) to change it)`
  const source =
    policy.from === 'gate'
      ? `this gate's option inconclusive: '${policy.inconclusive}'`
      : `the plugin option servegate({ inconclusive: '${policy.inconclusive}' })`
  // The gate's rule and warnings are worded for the default of its kind; say when that is not what decided.
  const fallback = DEFAULT_INCONCLUSIVE[kind]
  return fallback === policy.inconclusive
    ? `${does}: ${source}`
    : `${does}: ${source}, not the default of a ${kind} claim (inconclusive ${verb(fallback)}) that the rule and warnings describe`
}
