import { z } from 'zod'
import { ServegateError } from '../errors.ts'
import { type ArrivalSpec, MAX_RATE_PER_S } from './arrival-spec.ts'

/**
 * A ladder of rates or concurrencies declared once; each rung becomes a cell.
 * - `rates`: open-loop cells at each rate (the cell's `arrival` process, constant when unset);
 *   with `durationS`, each rung sends rate × durationS requests (so each lasts about as long);
 * - `concurrencies`: closed-loop cells at each concurrency; with `requestsPerSlot`, each rung
 *   sends requestsPerSlot × C requests.
 * @example { rates: [2, 4, 8, 16], durationS: 20 }
 */
export const Ladder = z.union([
  z.strictObject({ rates: z.array(z.number().positive().max(MAX_RATE_PER_S)).min(1), durationS: z.number().positive().optional() }),
  z.strictObject({ concurrencies: z.array(z.int().min(1).max(4096)).min(1), requestsPerSlot: z.int().min(1).optional() }),
])
export type Ladder = z.input<typeof Ladder>

/** What a rung changes in a cell's options. */
export interface LadderOptions {
  requests?: number
  concurrency?: number
  arrival?: ArrivalSpec | null
}

export interface Rung<T> {
  axis: 'rate' | 'concurrency'
  value: number
  /** The cell options of this rung: the base with its rate (or concurrency) and request count. */
  options: T
}

function refuse(message: string): never {
  throw new ServegateError('CONFIG_INVALID', `invalid ladder: ${message}`)
}

/**
 * Expands a ladder into the cell options of each rung, in the order declared. Pure.
 * @throws ServegateError `CONFIG_INVALID` naming the field: a repeated value, a rate ladder over a trace
 */
export function expandLadder<T extends LadderOptions>(input: Ladder, base: T): Array<Rung<T>> {
  const parsed = Ladder.safeParse(input)
  if (!parsed.success)
    refuse(
      `${parsed.error.issues.map((i) => `${i.path.join('.') || 'ladder'}: ${i.message}`).join('; ')}; ` +
        'give { rates: [...] } or { concurrencies: [...] }',
    )
  const ladder = parsed.data
  const values = 'rates' in ladder ? ladder.rates : ladder.concurrencies
  const repeated = values.find((v, i) => values.indexOf(v) !== i)
  if (repeated !== undefined) refuse(`${'rates' in ladder ? 'rates' : 'concurrencies'}: ${repeated} appears twice; each rung is one cell`)
  if ('rates' in ladder) {
    const arrival = base.arrival ?? { kind: 'constant' as const, ratePerS: 1 }
    if (arrival.kind === 'trace') refuse('rates: a trace sets its own times; a rate ladder needs constant, poisson or gamma arrivals')
    return ladder.rates.map((value) => ({
      axis: 'rate',
      value,
      options: {
        ...base,
        arrival: { ...arrival, ratePerS: value },
        requests: ladder.durationS === undefined ? base.requests : Math.max(1, Math.round(value * ladder.durationS)),
      },
    }))
  }
  if (base.arrival !== undefined && base.arrival !== null)
    refuse('concurrencies: a concurrency ladder runs closed-loop cells; drop arrival, or ladder the rates')
  return ladder.concurrencies.map((value) => ({
    axis: 'concurrency',
    value,
    options: {
      ...base,
      concurrency: value,
      requests: ladder.requestsPerSlot === undefined ? base.requests : ladder.requestsPerSlot * value,
    },
  }))
}
