import { describe, expect, test } from 'vitest'
import { resolveCellPlan } from '../runner/cell-options.ts'
import type { TokenizerProbe } from '../client/tokenize.ts'
import { PrefixGroups } from './prefix-groups.ts'
import { prepareWorkload } from './prepare.ts'

const groups = (groupDistribution: 'uniform' | { zipf: number }, seed = 1) =>
  ({ seed, groups: 8, promptsPerGroup: 50, systemTokens: 512, questionTokens: 64, groupDistribution }) as const

/** The message a cell declaration fails with. */
function declarationError(cell: unknown): string {
  try {
    resolveCellPlan(cell)
  } catch (err) {
    return (err as Error).message
  }
  throw new Error('the declaration was accepted')
}

describe('which group each request is in', () => {
  test('uniform: each group exactly promptsPerGroup times, shuffled, the same for the same seed', () => {
    const g = new PrefixGroups(groups('uniform'), 400, 400)
    expect(g.plan().requestsPerGroup).toEqual(new Array(8).fill(50))
    const order = Array.from({ length: 400 }, (_, i) => g.of(i))
    expect(order.slice(0, 16)).not.toEqual(Array.from({ length: 16 }, (_, i) => i % 8))
    expect(Array.from({ length: 400 }, (_, i) => new PrefixGroups(groups('uniform'), 400, 400).of(i))).toEqual(order)
    expect(Array.from({ length: 400 }, (_, i) => new PrefixGroups(groups('uniform', 2), 400, 400).of(i))).not.toEqual(order)
  })

  test('zipf alpha 1.5: group 0 takes most requests, and each group fewer than the one before', () => {
    const counts = new PrefixGroups(groups({ zipf: 1.5 }), 400, 400).plan().requestsPerGroup
    // P(group 0) = 1 / Σ k^-1.5 over 8 groups ≈ 0.52.
    expect(counts[0]).toBeGreaterThan(180)
    expect(counts[0]).toBe(Math.max(...counts))
    expect(counts[0]).toBeGreaterThan((counts[1] as number) * 2)
    expect(counts.reduce((s, c) => s + c, 0)).toBe(400)
    expect(counts[1]).toBeGreaterThan(counts[7] as number)
  })

  test('warm-up requests past the measured ones have groups too, not counted in the plan', () => {
    const g = new PrefixGroups(groups('uniform'), 400, 403)
    expect([g.of(400), g.of(401), g.of(402)]).toEqual([0, 1, 2])
    expect(g.plan().requestsPerGroup.reduce((s, c) => s + c, 0)).toBe(400)
  })
})

describe('declared groups are checked when declared', () => {
  const gsp = { kind: 'shared-prefix', groups: 4, promptsPerGroup: 8, systemTokens: 256, questionTokens: 32 }

  test('requests are groups × promptsPerGroup: filled in, and one that disagrees is refused', () => {
    expect(resolveCellPlan({ workload: gsp }).requests).toBe(32)
    expect(declarationError({ requests: 30, workload: gsp })).toContain(
      'requests: shared-prefix groups send groups × promptsPerGroup = 32 requests, not 30; remove requests or set it to 32',
    )
  })

  test.each([
    [
      { kind: 'shared-prefix', groups: 4 },
      'workload.promptsPerGroup: shared-prefix groups need groups, promptsPerGroup, systemTokens and questionTokens',
    ],
    [{ ...gsp, systemTokens: 0 }, "workload.systemTokens: each group's system prompt needs at least 1 token; pass systemTokens ≥ 1"],
    [{ ...gsp, promptTokens: 999 }, 'workload.promptTokens: with groups each prompt is systemTokens + questionTokens; remove promptTokens'],
    [
      { ...gsp, prefixCache: { mode: 'shared', tokens: 64 } },
      'workload.prefixCache: the groups share their own system prompts; remove prefixCache',
    ],
    [{ ...gsp, groupDistribution: { zipf: 0 } }, 'workload.groupDistribution'],
    [
      { kind: 'synthetic-summary', groups: 4 },
      "workload.groups: only a shared-prefix workload takes groups; set kind: 'shared-prefix' or remove it",
    ],
    [{ kind: 'synthetic-summary', systemTokens: 4 }, 'workload.systemTokens: only a conversation takes systemTokens'],
  ])('%j', (workload, message) => {
    expect(declarationError({ workload })).toContain(message)
  })

  test('the old shape still stands: a shared-prefix workload of promptTokens shares half of it', () => {
    expect(resolveCellPlan({ workload: { kind: 'shared-prefix', promptTokens: 128 } }).workload).toMatchObject({
      kind: 'shared-prefix',
      promptTokens: 128,
    })
  })
})

describe('prepared prompts', () => {
  /** A tokenizer that counts whitespace-separated words, as the simulated engine does. */
  const words: TokenizerProbe = {
    tokenizer: {
      description: 'words',
      countText: async (text: string) => text.split(/\s+/).filter(Boolean).length,
      countChat: async (messages) => messages.reduce((s, m) => s + m.content.split(/\s+/).filter(Boolean).length, 0) + 3,
    },
    warning: null,
  }

  test("each prompt opens with its group's own system prompt, sized to systemTokens, then is fitted to systemTokens + questionTokens", async () => {
    const workload = { kind: 'shared-prefix' as const, groups: 3, promptsPerGroup: 4, systemTokens: 120, questionTokens: 40, seed: 11 }
    const w = await prepareWorkload(workload, { api: 'chat', maxTokens: 8, requests: 12, warmupRequests: 0 }, words)
    const systemOf = (i: number): string => {
      const body = JSON.parse(w.request(i).body) as { messages: Array<{ content: string }> }
      return (body.messages[0]?.content ?? '').split('\n\n')[0] as string
    }
    const byGroup = new Map<number, Set<string>>()
    for (let i = 0; i < 12; i++) {
      const group = w.planned(i).group as number
      byGroup.set(group, (byGroup.get(group) ?? new Set()).add(systemOf(i)))
      expect(w.planned(i).plannedPromptTokens).toBe(160)
    }
    expect([...byGroup.keys()].sort()).toEqual([0, 1, 2])
    for (const systems of byGroup.values()) expect(systems.size).toBe(1)
    const texts = [...byGroup.values()].map((s) => [...s][0] as string)
    expect(new Set(texts).size).toBe(3)
    for (const text of texts) expect(text.split(/\s+/).length).toBe(120)
    expect(w.prefixGroups).toMatchObject({
      groups: 3,
      promptsPerGroup: 4,
      systemTokens: 120,
      questionTokens: 40,
      groupDistribution: 'uniform',
    })
    expect(w.prefixGroups?.requestsPerGroup).toEqual([4, 4, 4])
    expect(w.calibration.sharedPrefixTokens).toBe(120)
  })
})
