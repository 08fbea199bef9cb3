/**
 * What vitest's configured reporters are, as the servegate reporters need to know: whether one
 * writes for a person (else stdout may be a machine's, e.g. `--reporter=json` without an output
 * file), and whether one prints every test's annotations. Main process only.
 */
import type { Vitest } from 'vitest/node'

/** vitest's own reporters that write for a person, by name. */
const TERMINAL_REPORTERS = new Set(['default', 'verbose', 'tree', 'dot', 'minimal', 'agent'])

/** A configured reporter's names: a built-in's name, or an instance's class and the classes it extends. */
function namesOf(reporter: Vitest['config']['reporters'][number]): Set<string> {
  if (Array.isArray(reporter)) return new Set([String(reporter[0])])
  if (typeof reporter === 'string') return new Set([reporter])
  const names = new Set<string>()
  for (let proto: unknown = Object.getPrototypeOf(reporter); proto !== null; proto = Object.getPrototypeOf(proto)) {
    const constructor = (proto as { constructor?: unknown }).constructor
    if (typeof constructor === 'function') names.add(constructor.name)
  }
  return names
}

/**
 * How vitest's reporters show a run: `terminal` when one of them writes for a person (the
 * default, dot, minimal or verbose reporter, or one built on them), `verbose` when one prints
 * every test's annotations (so the figure lines are already there).
 */
export function reportersOf(vitest: Vitest): { terminal: boolean; verbose: boolean } {
  const names = vitest.config.reporters.map(namesOf)
  return {
    terminal: names.some((n) => [...n].some((name) => TERMINAL_REPORTERS.has(name)) || n.has('DefaultReporter') || n.has('DotReporter')),
    verbose: names.some((n) => n.has('verbose') || n.has('VerboseReporter')),
  }
}
