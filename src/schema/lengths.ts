import { z } from 'zod'

/**
 * A seeded distribution of token counts, drawn once per request index at planning time:
 * `uniform` integers from min to max inclusive (vLLM's `--random-range-ratio r` around P is
 * `{ uniform: [P·(1 − r), P·(1 + r)] }`, each end rounded), `normal` by mean and standard deviation,
 * `lognormal` by median (e^μ) and sigma (the log's standard deviation), or `histogram`: the path
 * of a CSV of `tokens,weight` rows, each row's token count drawn with its share of the weights.
 * @example { uniform: [100, 200] }
 * @example { lognormal: { median: 512, sigma: 0.5 } }
 */
export const LengthDistribution = z.union([
  z.strictObject({ uniform: z.tuple([z.int(), z.int()]) }),
  z.strictObject({ normal: z.strictObject({ mean: z.number(), sd: z.number() }) }),
  z.strictObject({ lognormal: z.strictObject({ median: z.number(), sigma: z.number() }) }),
  z.strictObject({ histogram: z.string().min(1) }),
])
export type LengthDistribution = z.infer<typeof LengthDistribution>

/** A size as declared: one token count for every request, or a distribution each request draws from. */
export type Length = number | LengthDistribution

/** The sizes a distribution drew for a cell, as its record keeps them. */
export const DrawnLengths = z.object({
  /** The distribution as declared. */
  distribution: LengthDistribution,
  /** A histogram file's sha256 when it was read (hex); null for the other distributions. */
  histogramSha256: z.string().nullable(),
  /** Each measured request's drawn size, tokens, in request order (index i is request i). */
  tokens: z.array(z.int().positive()),
  smallestTokens: z.int().positive(),
  meanTokens: z.number().positive(),
  largestTokens: z.int().positive(),
})
export type DrawnLengths = z.infer<typeof DrawnLengths>

/** Which sizes a cell drew from a distribution; a size declared as one number is null here. */
export const LengthsPlan = z.object({
  /** `workload.promptTokens` as drawn: each request's prompt was fitted to its own size. */
  promptTokens: DrawnLengths.nullable(),
  /** The cell's `maxTokens` as drawn: each request's `max_tokens` (held exactly under output control). */
  maxTokens: DrawnLengths.nullable(),
})
export type LengthsPlan = z.infer<typeof LengthsPlan>

/**
 * A size as it reads in a cell id and a summary line: the number, or the distribution in short
 * (`u100-200`, `n512sd64`, `ln512s0.5`, `hist`).
 * @example lengthLabel({ uniform: [100, 200] }) // 'u100-200'
 */
export function lengthLabel(length: Length): string {
  if (typeof length === 'number') return String(length)
  if ('uniform' in length) return `u${length.uniform[0]}-${length.uniform[1]}`
  if ('normal' in length) return `n${length.normal.mean}sd${length.normal.sd}`
  if ('lognormal' in length) return `ln${length.lognormal.median}s${length.lognormal.sigma}`
  return 'hist'
}
