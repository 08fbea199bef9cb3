import type { z } from 'zod'
import { parseOptions } from '../gates/gate-options.ts'
import type { GateName } from '../schema/gate.ts'

/**
 * A gate matcher's options, parsed once where the matcher is called: the schema's defaults filled
 * in and the matcher's own name set as the gate's, so what goes down to the gate is resolved.
 * Anything but an object is a TypeError naming the matcher with `usage`; a wrong field, one naming
 * the matcher, the field and the fix.
 * @example gateMatcherOptions('toWinDecode', WinGateOptions, options, 'options must be an object, e.g. { margin: 0.05 }')
 */
export function gateMatcherOptions<S extends z.ZodType>(matcher: GateName, schema: S, options: unknown, usage: string): z.infer<S> {
  if (options === null || typeof options !== 'object') throw new TypeError(`${matcher}: ${usage}`)
  return parseOptions(matcher, schema, { ...options, gate: matcher })
}
