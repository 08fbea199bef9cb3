import { z } from 'zod'

/**
 * How a shared-prefix workload's requests fall into its groups: `uniform` gives every group
 * exactly `promptsPerGroup` requests in a seeded shuffled order; `{ zipf: alpha }` draws each
 * request's group with probability ∝ 1 / (g + 1)^alpha, so group 0 is the hottest (SGLang's
 * `--gsp-group-distribution zipf --gsp-zipf-alpha`).
 */
export const GroupDistribution = z.union([z.literal('uniform'), z.strictObject({ zipf: z.number().positive().max(100) })])
export type GroupDistribution = z.infer<typeof GroupDistribution>

/** A shared-prefix cell's groups as planned (SGLang's generated-shared-prefix). */
export const PrefixGroupsPlan = z.object({
  groups: z.int().positive(),
  promptsPerGroup: z.int().positive(),
  /** Planned tokens of each group's own system prompt, shared by the group's requests. */
  systemTokens: z.int().positive(),
  /** Planned tokens of each request's own question after its group's system prompt. */
  questionTokens: z.int().positive(),
  groupDistribution: GroupDistribution,
  /** Measured requests of each group, group 0 first. */
  requestsPerGroup: z.array(z.int().nonnegative()),
})
export type PrefixGroupsPlan = z.infer<typeof PrefixGroupsPlan>
