import { afterEach, expect, test } from 'vitest'
import type { SimOptions } from '../sim/sim-options.ts'
import { type SimServer, startSimServer } from '../sim/server.ts'
import { runCell } from './measure-cell.ts'

const servers: SimServer[] = []
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.close()))
})

async function sim(options: SimOptions = {}): Promise<SimServer> {
  const s = await startSimServer({ model: 'm', prefillTokPerS: 200_000, decodeTokPerS: 4000, ...options })
  servers.push(s)
  return s
}

test('shared-prefix groups: identical bytes on both arms, each record keeps its group, zipf skews toward group 0', async () => {
  const a = await sim({ model: 'baseline-model' })
  const b = await sim({ model: 'candidate-model' })
  const workload = {
    kind: 'shared-prefix' as const,
    groups: 4,
    promptsPerGroup: 10,
    systemTokens: 96,
    questionTokens: 24,
    groupDistribution: { zipf: 1.5 },
    seed: 61_001,
  }
  const cell = { concurrency: 4, maxTokens: 4, workload, usageCheck: { retokenize: false } }
  const ra = await runCell({ baseUrl: a.url, model: 'baseline-model', ...cell })
  const rb = await runCell({ baseUrl: b.url, model: 'candidate-model', ...cell })
  expect([ra.completed, rb.completed]).toEqual([40, 40])
  expect(rb.plan.workload.requestStreamSha256).toBe(ra.plan.workload.requestStreamSha256)
  expect([ra.plan.workload.wireMatchesPlan, rb.plan.workload.wireMatchesPlan]).toEqual([true, true])

  const groups = ra.plan.workload.prefixGroups
  expect(groups).toMatchObject({ groups: 4, promptsPerGroup: 10, systemTokens: 96, questionTokens: 24, groupDistribution: { zipf: 1.5 } })
  const recorded = [0, 1, 2, 3].map((g) => ra.requests.filter((r) => r.group === g).length)
  expect(recorded).toEqual(groups?.requestsPerGroup)
  expect(rb.requests.map((r) => r.group)).toEqual(ra.requests.map((r) => r.group))
  // P(group 0) ≈ 0.60 with 4 groups at alpha 1.5.
  expect(recorded[0]).toBeGreaterThan(20)
  expect(ra.plan.workload.prefixCache).toEqual({ mode: 'shared', tokens: 96 })
  expect(ra.plan.workload.promptTokens).toBe(120)
  for (const r of ra.requests) expect(Math.abs((r.promptTokens as number) - 120)).toBeLessThanOrEqual(8)
})
