import { z } from 'zod'

/** Highest open-loop rate accepted, requests/s: far beyond what one client process can send on time. */
export const MAX_RATE_PER_S = 100_000

/** Largest trace block, tokens: far beyond any served context, so a larger value is a typo. */
export const MAX_BLOCK_TOKENS = 1_048_576

const ratePerS = z.number().positive().max(MAX_RATE_PER_S)

const rateShared = {
  /** Target rate, requests/s (after any ramp-up). */
  ratePerS,
  /**
   * Ramp the rate linearly from `fromRatePerS` up to `ratePerS` over the first `durationS`
   * seconds (the draws are time-warped, so a Poisson process stays Poisson). @default null
   */
  rampUp: z
    .object({ durationS: z.number().positive(), fromRatePerS: z.number().min(0).default(0) })
    .nullable()
    .default(null),
  /**
   * Cap on requests in flight. A request due while the cap is reached waits for a free place
   * (recorded as its queueDelayMs; the cell counts them); the cell is then no longer open loop
   * at its rate. @default null (no cap)
   */
  maxInFlight: z.int().min(1).max(65_536).nullable().default(null),
}

const seed = z.int().min(0).default(0)

/**
 * Open-loop arrivals: requests are sent at times drawn before the cell starts, whatever the
 * engine does, instead of when a concurrency slot frees (the closed loop).
 * - `constant`: evenly spaced, 1/rate apart;
 * - `poisson`: exponential gaps with mean 1/rate;
 * - `gamma`: gamma gaps with mean 1/rate and shape `burstiness` (1 is Poisson; below 1 burstier,
 *   above 1 more regular), as vLLM's `--burstiness`;
 * - `trace`: the offsets (and prompt and output lengths) of a JSONL trace, replayed.
 * @example { kind: 'poisson', ratePerS: 8, seed: 1 }
 */
export const ArrivalSpec = z.discriminatedUnion('kind', [
  z.object({ kind: z.literal('constant'), ...rateShared }),
  z.object({ kind: z.literal('poisson'), ...rateShared, seed }),
  z.object({ kind: z.literal('gamma'), ...rateShared, burstiness: z.number().positive().max(1000), seed }),
  z.object({
    kind: z.literal('trace'),
    /**
     * JSONL, one request per line: `{"timestamp": ms, "input_length": n, "output_length": n}` (Mooncake's
     * shape, optionally with `"hash_ids": [ids]`) or `{"offsetMs", "promptTokens", "outputTokens"}`.
     */
    path: z.string().min(1),
    /** Multiplies every offset: 0.5 replays twice as fast. @default 1 */
    timeScale: z.number().positive().default(1),
    /**
     * Tokens per `hash_ids` block, as the engine's tokenizer counts them: requests sharing an id
     * share that block's bytes (Mooncake's traces hash blocks of 512). Unused by a trace without
     * `hash_ids`. @default 512
     */
    blockTokens: z.int().min(1).max(MAX_BLOCK_TOKENS).default(512),
    maxInFlight: rateShared.maxInFlight,
  }),
])
export type ArrivalSpec = z.input<typeof ArrivalSpec>
export type ResolvedArrivalSpec = z.infer<typeof ArrivalSpec>
export type RateArrivalSpec = Exclude<ResolvedArrivalSpec, { kind: 'trace' }>
