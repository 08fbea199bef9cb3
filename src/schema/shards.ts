import { z } from 'zod'

/**
 * One shard of a cell measured by several client processes (`servegate run --shards N`): where it
 * ran, its clock against the coordinator's, and its own client-health figures, kept beside the
 * merged cell's so that one overloaded client among N cannot hide in the whole.
 */
export const ShardFigures = z.object({
  /** The shard, 0-based: its requests are its share of the one plan (docs/cli.md, "Shards"). */
  index: z.int().nonnegative(),
  /** The host name of the machine the shard ran on (a pod's name on Kubernetes). */
  host: z.string(),
  /**
   * The coordinator's clock minus the shard's, ms, from the ping of least round trip
   * (NTP's ((t1 − t0) + (t2 − t3)) / 2): added to the shard's times to put them in the coordinator's.
   */
  clockOffsetMs: z.number(),
  /** Half that ping's round trip, ms: the offset is exact to within it. */
  clockOffsetUncertaintyMs: z.number().nonnegative(),
  /** Measured requests this shard sent (its share of the plan's). */
  requests: z.int().nonnegative(),
  /** A closed loop's slots of this shard (its share of the concurrency); null for an open loop. */
  concurrency: z.int().positive().nullable(),
  /** p99 of this shard's send lag, ms. */
  sendLagP99Ms: z.number().nonnegative().nullable(),
  /** This shard's busiest client thread's CPU share (1.0 is one core). */
  clientCpuShare: z.number().nonnegative().nullable(),
  /** True when this shard's client, not the engine, was the bottleneck; `reasons` say why. */
  harnessLimited: z.boolean(),
  reasons: z.array(z.string()),
})
export type ShardFigures = z.infer<typeof ShardFigures>
