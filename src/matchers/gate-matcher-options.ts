import { z } from 'zod'
import { parseOptions } from '../gates/gate-options.ts'
import type { GateName } from '../schema/gate.ts'
import { InconclusivePolicy } from '../schema/task-meta.ts'

/** The option every gate matcher takes besides its gate's own. */
export interface InconclusiveOption {
  /**
   * What an inconclusive outcome does to the assertion: `'pass'` or `'fail'`. Overrides
   * `servegate({ inconclusive })`; unset, the default of the gate's kind: a superiority claim
   * (`toWin*`, `toMeetSLO`, `toSustainMoreThan`) fails, a non-regression claim (`toHoldLatency`,
   * `toStayWithinAccuracyGap`) passes with a warning.
   * @default per kind
   */
  inconclusive?: InconclusivePolicy
}

const InconclusiveField = z.object({ inconclusive: InconclusivePolicy.optional() })

/** A gate matcher's options as resolved: its gate's (defaults filled in, the gate named) and the matcher's `inconclusive`. */
export type GateMatcherOptions<T> = T & InconclusiveOption

/**
 * A gate matcher's options, parsed once where the matcher is called: the schema's defaults filled
 * in and the matcher's own name set as the gate's, so what goes down to the gate is resolved, and
 * the matcher's `inconclusive` policy beside them (gate functions ignore it). Anything but an
 * object is a TypeError naming the matcher with `usage`; a wrong field, one naming the matcher,
 * the field and the fix.
 * @example gateMatcherOptions('toWinDecode', WinGateOptions, options, 'options must be an object, e.g. { margin: 0.05 }')
 */
export function gateMatcherOptions<S extends z.ZodType>(
  matcher: GateName,
  schema: S,
  options: unknown,
  usage: string,
): GateMatcherOptions<z.infer<S>> {
  if (options === null || typeof options !== 'object') throw new TypeError(`${matcher}: ${usage}`)
  return parseOptions(matcher, z.intersection(schema, InconclusiveField), { ...options, gate: matcher }) as GateMatcherOptions<z.infer<S>>
}

/**
 * The options a gate function received, as the evidence records them: the resolved options
 * without the matcher's `inconclusive`, through JSON (undefined fields dropped).
 */
export function gateOptionsOf(options: InconclusiveOption & object): Record<string, unknown> {
  const { inconclusive: _policy, ...gate } = options
  return JSON.parse(JSON.stringify(gate)) as Record<string, unknown>
}
