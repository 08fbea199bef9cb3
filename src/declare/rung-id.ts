/**
 * The ids of a ladder's rungs: the ladder's name, then the axis letter and the rung's value, as
 * short as stays distinct (`…-c1`, `…-c2`, `…-r4`, `…-r0.5`), so vitest's test titles, the board
 * and the charts can tell the rungs apart at a glance.
 */

/** `r` for a rate rung (requests per second), `c` for a concurrency rung. */
const AXIS_LETTER = { rate: 'r', concurrency: 'c' } as const

/**
 * A value as written in a rung id: a sweep's values as given (`4`, `0.5`, `2.25`); a value a search
 * computed (`28.284271…` from a geometric bisection) to two decimals, or two significant digits below 1.
 */
function valueText(value: number): string {
  if (Number.isInteger(value) || String(value).length <= 6) return String(value)
  return String(value >= 1 ? Math.round(value * 100) / 100 : Number(value.toPrecision(2)))
}

/**
 * The rung ids of a ladder named `name`, one per value in order: `<name>-r4` or `<name>-c8`. Two
 * values that would read alike (only a computed value can) get `~2`, `~3`… so the ids stay distinct.
 * @example rungIds('candidate-synthetic-summary-ctx1024', 'concurrency', [1, 2, 8]) // ['…-c1', '…-c2', '…-c8']
 */
export function rungIds(name: string, axis: 'rate' | 'concurrency', values: readonly number[]): string[] {
  const seen = new Map<string, number>()
  return values.map((value) => {
    const id = `${name}-${AXIS_LETTER[axis]}${valueText(value)}`
    const n = (seen.get(id) ?? 0) + 1
    seen.set(id, n)
    return n === 1 ? id : `${id}~${n}`
  })
}
