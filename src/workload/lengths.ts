import { createHash } from 'node:crypto'
import { readFileSync, statSync } from 'node:fs'
import { z } from 'zod'
import { ServegateError } from '../errors.ts'
import { createRandom, mixSeed, normalVariate } from '../random.ts'
import { type DrawnLengths, type Length, LengthDistribution } from '../schema/lengths.ts'

/** No served model's context is larger: a size above it (declared or drawn) is held to it. */
export const MAX_LENGTH_TOKENS = 10_000_000
const MAX_HISTOGRAM_BYTES = 16 * 1024 * 1024
const MAX_HISTOGRAM_ROWS = 100_000

/** The smallest prompt and the smallest `max_tokens`: a size may not be declared below them, and a draw below them takes them. */
export const MIN_PROMPT_TOKENS = 8
export const MIN_MAX_TOKENS = 1

/** Stream salts: prompt sizes and `max_tokens` draw from streams of their own, so one never shifts the other. */
export const PROMPT_TOKENS_STREAM = 0x70726f6d
export const MAX_TOKENS_STREAM = 0x6d617874

/** A histogram file, read: its rows' token counts and the running sum of their weights. */
export interface Histogram {
  path: string
  sha256: string
  tokens: Int32Array
  /** `cumulative[i]` is the sum of the weights of rows 0 … i. */
  cumulative: Float64Array
}

const HISTOGRAM_FORMAT = 'a CSV of tokens,weight rows (an optional tokens,weight header; # comments)'

/**
 * Reads a histogram of sizes: one `tokens,weight` row per line — tokens an integer ≥ `floor`,
 * weight a number ≥ 0 — with an optional `tokens,weight` header, blank lines and `#` comments
 * ignored; at least one weight > 0, each token count listed once. A draw is one of the listed
 * counts, with its weight's share of the total.
 * @throws ServegateError CONFIG_INVALID naming the file, the line and the fix
 */
export function readHistogram(path: string, floor: number): Histogram {
  const bad = (message: string): ServegateError => new ServegateError('CONFIG_INVALID', `${path} ${message}`)
  let bytes: Buffer
  try {
    const stat = statSync(path)
    if (!stat.isFile()) throw bad(`is not a file; pass the path of ${HISTOGRAM_FORMAT}`)
    if (stat.size > MAX_HISTOGRAM_BYTES) throw bad(`has ${stat.size} bytes, more than ${MAX_HISTOGRAM_BYTES}; pass a smaller histogram`)
    bytes = readFileSync(path)
  } catch (err) {
    if (err instanceof ServegateError) throw err
    throw new ServegateError(
      'CONFIG_INVALID',
      `${path} cannot be read (${(err as { code?: string }).code ?? (err as Error).message}); pass the path of ${HISTOGRAM_FORMAT}`,
      { cause: err },
    )
  }
  const tokens: number[] = []
  const weights: number[] = []
  const seenAt = new Map<number, number>()
  const lines = bytes.toString('utf8').split(/\r?\n/)
  for (let i = 0; i < lines.length; i++) {
    const line = (lines[i] as string).trim()
    if (line === '' || line.startsWith('#')) continue
    const cells = line.split(',').map((c) => c.trim())
    if (tokens.length === 0 && cells[0] === 'tokens' && cells[1] === 'weight' && cells.length === 2) continue
    const at = `line ${i + 1}:`
    if (cells.length !== 2) throw bad(`${at} "${line}" is not a tokens,weight row`)
    const [t, w] = cells.map(Number) as [number, number]
    if (cells[0] === '' || !Number.isInteger(t) || t < floor || t > MAX_LENGTH_TOKENS) {
      throw bad(`${at} tokens "${cells[0]}" is not an integer from ${floor} to ${MAX_LENGTH_TOKENS}`)
    }
    if (cells[1] === '' || !Number.isFinite(w) || w < 0) throw bad(`${at} weight "${cells[1]}" is not a number ≥ 0`)
    const earlier = seenAt.get(t)
    if (earlier !== undefined) throw bad(`${at} tokens ${t} is listed again (first on line ${earlier}); list each size once`)
    seenAt.set(t, i + 1)
    tokens.push(t)
    weights.push(w)
    if (tokens.length > MAX_HISTOGRAM_ROWS) throw bad(`has more than ${MAX_HISTOGRAM_ROWS} rows; merge rows into fewer sizes`)
  }
  if (!weights.some((w) => w > 0)) throw bad(`has no row with a weight > 0; pass ${HISTOGRAM_FORMAT}`)
  const cumulative = new Float64Array(weights.length)
  let sum = 0
  weights.forEach((w, i) => (cumulative[i] = sum += w))
  return { path, sha256: createHash('sha256').update(bytes).digest('hex'), tokens: Int32Array.from(tokens), cumulative }
}

/** One problem of a declared distribution: where in it, and the message naming the fix. */
interface Problem {
  path: Array<string | number>
  message: string
}

/** What is wrong with a distribution of sizes that must be at least `floor`; empty when nothing is. */
export function lengthProblems(d: LengthDistribution, floor: number): Problem[] {
  const problems: Problem[] = []
  const within = (value: number, path: Array<string | number>, name: string): void => {
    if (!Number.isFinite(value) || value < floor || value > MAX_LENGTH_TOKENS) {
      problems.push({ path, message: `${name} ${value} is not from ${floor} to ${MAX_LENGTH_TOKENS}; pass a size in that range` })
    }
  }
  const spread = (value: number, path: Array<string | number>, name: string): void => {
    if (!Number.isFinite(value) || value < 0) {
      problems.push({ path, message: `${name} ${value} is negative; pass ${name} ≥ 0 (0 draws the same size every time)` })
    }
  }
  if ('uniform' in d) {
    const [min, max] = d.uniform
    within(min, ['uniform', 0], 'min')
    within(max, ['uniform', 1], 'max')
    if (min > max) problems.push({ path: ['uniform'], message: `min ${min} > max ${max}; pass [min, max] with min ≤ max` })
  } else if ('normal' in d) {
    within(d.normal.mean, ['normal', 'mean'], 'mean')
    spread(d.normal.sd, ['normal', 'sd'], 'sd')
  } else if ('lognormal' in d) {
    within(d.lognormal.median, ['lognormal', 'median'], 'median')
    spread(d.lognormal.sigma, ['lognormal', 'sigma'], 'sigma')
  } else {
    try {
      readHistogram(d.histogram, floor)
    } catch (err) {
      problems.push({ path: ['histogram'], message: (err as Error).message })
    }
  }
  return problems
}

/**
 * A size option: one token count (at least `floor`), or a distribution each request draws its
 * own from. Checked when declared, a histogram's file included.
 */
export function lengthOption(floor: number) {
  const shapes = `pass a number of tokens ≥ ${floor}, or one of { uniform: [min, max] }, { normal: { mean, sd } }, { lognormal: { median, sigma } }, { histogram: PATH }`
  return z.union([z.int().min(floor), LengthDistribution], { error: shapes }).superRefine((value, ctx) => {
    if (typeof value === 'number') return
    for (const problem of lengthProblems(value, floor)) ctx.addIssue({ code: 'custom', path: problem.path, message: problem.message })
  })
}

/** Sizes drawn from a distribution, one per request index (measured, then warm-up). */
export interface Drawn {
  distribution: LengthDistribution
  histogramSha256: string | null
  tokens: Int32Array
}

/** One draw, before it is rounded and held to the field's range. */
function drawOne(d: LengthDistribution, histogram: Histogram | null, random: () => number): number {
  if ('uniform' in d) return d.uniform[0] + Math.floor(random() * (d.uniform[1] - d.uniform[0] + 1))
  if ('normal' in d) return d.normal.mean + d.normal.sd * normalVariate(random)
  if ('lognormal' in d) return d.lognormal.median * Math.exp(d.lognormal.sigma * normalVariate(random))
  const { tokens, cumulative } = histogram as Histogram
  const u = random() * (cumulative[cumulative.length - 1] as number)
  let lo = 0
  let hi = cumulative.length - 1
  // The first row whose running weight exceeds u: rows of weight 0 are never drawn.
  while (lo < hi) {
    const mid = (lo + hi) >>> 1
    if ((cumulative[mid] as number) > u) hi = mid
    else lo = mid + 1
  }
  return tokens[lo] as number
}

/**
 * Draws `count` sizes, request `i`'s from its own generator seeded by (seed, stream, i): a
 * request's size depends only on the seed and its index, never on how many requests the plan
 * has, and is the same on both arms. Each draw is rounded to the nearest integer, then held to
 * [floor, 10,000,000]: a draw below the field's smallest size (1 for `maxTokens`, 8 for
 * `promptTokens`) takes that size. Null for a size declared as one number.
 * @param field the option's name in messages, e.g. `workload.promptTokens`
 */
export function drawLengths(length: Length, floor: number, seed: number, stream: number, count: number, field: string): Drawn | null {
  if (typeof length === 'number') return null
  let histogram: Histogram | null = null
  if ('histogram' in length) {
    try {
      histogram = readHistogram(length.histogram, floor)
    } catch (err) {
      throw new ServegateError('CONFIG_INVALID', `${field}.histogram: ${(err as Error).message}`, { cause: err })
    }
  }
  const base = mixSeed(seed, stream)
  const tokens = new Int32Array(count)
  for (let i = 0; i < count; i++) {
    const x = Math.round(drawOne(length, histogram, createRandom(mixSeed(base, i))))
    tokens[i] = Math.min(MAX_LENGTH_TOKENS, Math.max(floor, x))
  }
  return { distribution: length, histogramSha256: histogram?.sha256 ?? null, tokens }
}

/** The sizes the first `measured` requests drew, as the record keeps them. */
export function drawnLengthsRecord(drawn: Drawn, measured: number): DrawnLengths {
  const tokens = Array.from(drawn.tokens.subarray(0, measured))
  let sum = 0
  let smallest = Infinity
  let largest = 0
  for (const t of tokens) {
    sum += t
    smallest = Math.min(smallest, t)
    largest = Math.max(largest, t)
  }
  return {
    distribution: drawn.distribution,
    histogramSha256: drawn.histogramSha256,
    tokens,
    smallestTokens: smallest,
    meanTokens: sum / Math.max(1, tokens.length),
    largestTokens: largest,
  }
}

/** A size's center, tokens: the number itself, a uniform's midpoint, a normal's mean, a lognormal's median, a histogram's weighted mean. */
export function centerTokens(length: Length, floor: number): number {
  if (typeof length === 'number') return length
  if ('uniform' in length) return Math.round((length.uniform[0] + length.uniform[1]) / 2)
  if ('normal' in length) return Math.max(floor, Math.round(length.normal.mean))
  if ('lognormal' in length) return Math.max(floor, Math.round(length.lognormal.median))
  let histogram: Histogram
  try {
    histogram = readHistogram(length.histogram, floor)
  } catch {
    // Only a record of a cell that failed before its draws asks: the file it could not read is named there.
    return floor
  }
  const { tokens, cumulative } = histogram
  let weighted = 0
  for (let i = 0; i < tokens.length; i++) weighted += (tokens[i] as number) * ((cumulative[i] as number) - (cumulative[i - 1] ?? 0))
  return Math.round(weighted / (cumulative[cumulative.length - 1] as number))
}
