import { ServegateError } from '../errors.ts'
import { createRandom, mixSeed } from '../random.ts'
import type { GroupDistribution, PrefixGroupsPlan } from '../schema/prefix-groups.ts'
import { proseSource } from './text.ts'
import type { ResolvedWorkloadSpec } from './workload-spec.ts'

/** The stream salt of the group draws; a group's system prompt reads text stream `GROUP_TEXT_STREAM + group`. */
const GROUP_DRAW_STREAM = 0x67727073
/** Past every request's stream (request i reads stream i + 1, at most ~10 million). */
const GROUP_TEXT_STREAM = 0x4000_0000

/** What a shared-prefix workload with groups declares (SGLang's generated-shared-prefix). */
export interface GroupsSpec {
  seed: number
  groups: number
  promptsPerGroup: number
  systemTokens: number
  questionTokens: number
  groupDistribution: GroupDistribution
}

/** The system prompt of group `group`, `pieces` pieces of prose from the group's own stream. */
export function groupSystemText(seed: number, group: number, pieces: number): string {
  return proseSource(seed, GROUP_TEXT_STREAM + group).take(pieces)
}

/**
 * Which group each request of a shared-prefix workload belongs to, drawn once at planning time
 * from the seed. `uniform`: the measured requests are every group `promptsPerGroup` times, in a
 * seeded shuffled order (as SGLang shuffles its generated-shared-prefix requests). `{ zipf: alpha }`:
 * each request draws its group on its own, with probability ∝ 1 / (g + 1)^alpha. Warm-up
 * requests (past the measured ones) draw theirs the same way; uniform ones cycle through the groups.
 * @example
 * const spec = { seed: 1, groups: 4, promptsPerGroup: 8, systemTokens: 512, questionTokens: 64, groupDistribution: 'uniform' } as const
 * new PrefixGroups(spec, 32, 32).of(0) // the group of request 0
 */
export class PrefixGroups {
  readonly spec: GroupsSpec
  readonly #of: Int32Array
  readonly #measured: number

  /**
   * @param measured the measured requests (groups × promptsPerGroup)
   * @param total measured and warm-up requests
   */
  constructor(spec: GroupsSpec, measured: number, total: number) {
    this.spec = spec
    this.#measured = measured
    this.#of = new Int32Array(total)
    const { groups, groupDistribution } = spec
    if (groupDistribution === 'uniform') {
      for (let i = 0; i < total; i++) this.#of[i] = i < measured ? i % groups : (i - measured) % groups
      // Fisher–Yates over the measured requests only: each group keeps exactly its share.
      const random = createRandom(mixSeed(spec.seed, GROUP_DRAW_STREAM))
      for (let i = measured - 1; i > 0; i--) {
        const j = Math.floor(random() * (i + 1))
        const t = this.#of[i] as number
        this.#of[i] = this.#of[j] as number
        this.#of[j] = t
      }
    } else {
      const cumulative = new Float64Array(groups)
      let sum = 0
      for (let g = 0; g < groups; g++) cumulative[g] = sum += 1 / (g + 1) ** groupDistribution.zipf
      const base = mixSeed(spec.seed, GROUP_DRAW_STREAM)
      for (let i = 0; i < total; i++) {
        const u = createRandom(mixSeed(base, i))() * sum
        let lo = 0
        let hi = groups - 1
        while (lo < hi) {
          const mid = (lo + hi) >>> 1
          if ((cumulative[mid] as number) > u) hi = mid
          else lo = mid + 1
        }
        this.#of[i] = lo
      }
    }
  }

  /** The group (0-based) of request `index`. */
  of(index: number): number {
    return this.#of[index] as number
  }

  /** The groups as the record states them, with each group's measured requests. */
  plan(): PrefixGroupsPlan {
    const requestsPerGroup = new Array<number>(this.spec.groups).fill(0)
    for (let i = 0; i < this.#measured; i++) {
      const g = this.#of[i] as number
      requestsPerGroup[g] = (requestsPerGroup[g] as number) + 1
    }
    const { groups, promptsPerGroup, systemTokens, questionTokens, groupDistribution } = this.spec
    return { groups, promptsPerGroup, systemTokens, questionTokens, groupDistribution, requestsPerGroup }
  }
}

/**
 * The groups of a shared-prefix workload that declares them; null for any other workload.
 * @param measured the measured requests, which must be groups × promptsPerGroup
 * @throws ServegateError CONFIG_INVALID when the cell's request count disagrees
 */
export function prefixGroupsOf(spec: ResolvedWorkloadSpec, measured: number, total: number): PrefixGroups | null {
  const { groups, promptsPerGroup, systemTokens, questionTokens } = spec
  if (spec.kind !== 'shared-prefix' || groups === undefined || promptsPerGroup === undefined) return null
  if (measured !== groups * promptsPerGroup) {
    throw new ServegateError(
      'CONFIG_INVALID',
      `requests: shared-prefix groups send groups × promptsPerGroup = ${groups * promptsPerGroup} requests, not ${measured}; ` +
        `remove requests or set it to ${groups * promptsPerGroup}`,
    )
  }
  const declared = {
    seed: spec.seed,
    groups,
    promptsPerGroup,
    systemTokens: systemTokens ?? 1,
    questionTokens: questionTokens ?? 8,
    groupDistribution: spec.groupDistribution ?? 'uniform',
  }
  return new PrefixGroups(declared, measured, total)
}
